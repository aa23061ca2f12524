"""Gmail mailboxes against tests/support/fake_gmail.py: the fixture that points the settings at it, and a factory.

Shared by the Gmail provider's tests and the provider-neutral tests of ``changes_sync``.
"""

from __future__ import annotations

import json

import pytest

from mailpoll.models import Mailbox
from mailpoll.oauth.tokens import connect
from tests.mailpoll.factories import MailboxFactory
from tests.support.fake_gmail import FakeGmail
from tests.support.google import service_account_key
from tests.support.loopback import free_port

USER = "alice@client.example"
REFRESH_TOKEN = "1//fake-refresh-" + "r" * 40
CLIENT_ID = "client-1.apps.googleusercontent.com"
CLIENT_SECRET = "GOCSPX-fake-client-secret"
JAN_2024_MS = 1_704_067_200_000
DAY_MS = 86_400_000


@pytest.fixture
def gmail(settings):
    """A started FakeGmail the Gmail and Google token settings point at."""
    server = FakeGmail(refresh_token=REFRESH_TOKEN).start()
    settings.MAILPOLL_GMAIL_API_URL = server.endpoint
    settings.MAILPOLL_GOOGLE_TOKEN_URL = server.token_uri
    settings.MAILPOLL_GOOGLE_CLIENT_ID = CLIENT_ID
    settings.MAILPOLL_GOOGLE_CLIENT_SECRET = CLIENT_SECRET
    yield server
    server.stop()


def decoy_token_uri() -> str:
    """A key's own token_uri, where nothing listens: the provider must not use it."""
    return f"http://127.0.0.1:{free_port()}/token"


def gmail_mailbox(*, auth: str = "service", key: bool = True, **fields) -> Mailbox:
    """A Gmail mailbox of ``USER``: its service account key stored on it, or its user's grant connected."""
    fields.setdefault("initial_mode", "full")
    mailbox = MailboxFactory(provider="gmail", auth=auth, host="", security="tls", username=USER, **fields)
    if auth == "service" and key:
        mailbox.set_app_secret(json.dumps(service_account_key(decoy_token_uri())))
        mailbox.save(update_fields=["app_secret"])
    elif auth == "oauth":
        connect(mailbox, "google", refresh_token=REFRESH_TOKEN)
    return mailbox


