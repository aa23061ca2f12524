"""The Graph source alone against tests/support/fake_graph.py: its fixtures; a message, a run, a consented msal cache.

Shared by test_graph_source.py and test_graph_hostile.py. A module gets the fixtures (``fake``, ``app``,
``session``, ``sleeps``, ``source``) by importing their ``fixture_*`` functions (pytest's ``name=`` idiom, so
a test's argument does not shadow an import).
"""

from __future__ import annotations

import msal
import pytest

from mailpoll.providers.graph import GraphSource
from mailpoll.providers.graph_auth import DELEGATED_SCOPES, AppOnlyTokens, GraphApp, new_session
from tests.support.fake_graph import CLIENT_ID, CLIENT_SECRET, TENANT, USER, FakeGraph

LIMIT = 4096  # the source's max_message_bytes unless a test says otherwise


def mail(n: int, body: bytes = b"hello\r\n") -> bytes:
    return (f"From: sender{n}@example.com\r\nTo: {USER}\r\nSubject: message {n}\r\n"
            f"Message-ID: <m{n}@example.com>\r\n\r\n").encode() + body


def run(source, folder="inbox", cursor=None, **kwargs):
    return list(source.changes(folder, cursor, **kwargs))


def consented_cache(fake, app, session) -> str:
    """The serialized msal cache a Connect would have stored: an account and its refresh token."""
    cache = msal.SerializableTokenCache()
    client = msal.ConfidentialClientApplication(CLIENT_ID, client_credential=CLIENT_SECRET, authority=app.authority,
                                                http_client=session, instance_discovery=False, token_cache=cache)
    assert "access_token" in client.acquire_token_by_refresh_token(fake.grant_refresh_token(), DELEGATED_SCOPES)
    return cache.serialize()


@pytest.fixture(name="fake")
def fixture_fake():
    server = FakeGraph(page_size=10)
    yield server
    server.stop()


@pytest.fixture(name="app")
def fixture_app(fake):
    return GraphApp(TENANT, CLIENT_ID, CLIENT_SECRET, authority_host=fake.origin)


@pytest.fixture(name="session")
def fixture_session(fake):
    return new_session(fake.ca_file)


@pytest.fixture(name="sleeps")
def fixture_sleeps():
    """What the source waited, recorded instead of slept."""
    return []


@pytest.fixture(name="source")
def fixture_source(fake, app, session, sleeps):
    """Makes a GraphSource of the fake's user (app-only unless given a token); takes its keyword arguments."""
    def make(token=None, **kwargs):
        kwargs.setdefault("max_message_bytes", LIMIT)
        kwargs.setdefault("sleep", sleeps.append)
        return GraphSource(USER, token or AppOnlyTokens(app, session), mailbox=7, session=session,
                           graph_url=fake.graph_url, jitter=lambda: 0.0, **kwargs)
    return make
