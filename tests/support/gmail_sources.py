"""The Gmail source alone against tests/support/fake_gmail.py: a message, and the fixtures.

Shared by test_gmail_source.py and test_gmail_answers.py (``other`` by test_gmail_hostile.py too). A module gets
the fixtures (``fake``, ``other``, ``pauses``, ``source``) by importing their ``fixture_*`` functions (pytest's
``name=`` idiom, so a test's argument does not shadow an import).
"""

from __future__ import annotations

import pytest

from mailpoll.providers import gmail
from tests.support.fake_gmail import FakeGmail
from tests.support.gmail_mailboxes import CLIENT_SECRET, REFRESH_TOKEN

LIMIT = 1_000_000  # the source's max_bytes unless a test says otherwise


def message(n: int, body: bytes = b"Hello.\r\n") -> bytes:
    return (f"Message-ID: <m{n}@example.com>\r\nFrom: Client {n} <c{n}@example.com>\r\n"
            f"Subject: request {n}\r\n\r\n").encode() + body


@pytest.fixture(name="fake")
def fixture_fake():
    server = FakeGmail(refresh_token=REFRESH_TOKEN).start()
    yield server
    server.stop()


@pytest.fixture(name="other")
def fixture_other():
    """A second loopback host, where a redirect points: it must receive nothing."""
    server = FakeGmail(refresh_token=REFRESH_TOKEN).start()
    yield server
    server.stop()


@pytest.fixture(name="pauses")
def fixture_pauses():
    """What the source waited, recorded instead of slept."""
    return []


@pytest.fixture(name="source")
def fixture_source(fake, pauses):
    """A source over a user's OAuth consent; takes GmailSource keyword arguments."""

    def make(**options):
        credentials = gmail.user_credentials(refresh_token=REFRESH_TOKEN, client_id="client-1.apps",
                                             client_secret=CLIENT_SECRET, token_uri=fake.token_uri)
        service = gmail.build_service(credentials, api_endpoint=fake.endpoint)
        options.setdefault("max_bytes", LIMIT)
        options.setdefault("sleep", pauses.append)
        return gmail.GmailSource(service, api_endpoint=fake.endpoint, jitter=lambda: 0.0, mailbox="mb-1", **options)

    return make
