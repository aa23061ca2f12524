"""What every API or OAuth mailbox shares, apart from its provider: the model's rules, the claim, the store.

The providers themselves are tested through the poller against their loopback fakes
(test_gmail_mailbox.py, test_graph_mailbox.py, test_imap_oauth.py).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import IntegrityError, transaction

from mailpoll.sync import store
from mailpoll.cursor import ReadPlan, plan_changes_read
from mailpoll.models import FolderCursor, GrantState, Mailbox, OAuthGrant, Request
from mailpoll.oauth.tokens import connect
from mailpoll.sync.poller import Poller
from tests.mailpoll.factories import MailboxFactory, mail

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("position, resyncing, initial_mode, expected", [
    ("", False, "new-only", ReadPlan("initial-new-only", None, "new-only")),
    ("", False, "since", ReadPlan("initial-since", None, "since")),
    ("", False, "full", ReadPlan("initial-full", None, "full")),
    ("812", False, "new-only", ReadPlan("incremental", "812", "full")),
    # A resync reads everything, whatever the first-poll policy: the provider forgot where we were.
    ("", True, "new-only", ReadPlan("resync", None, "full")),
    ("", True, "since", ReadPlan("resync", None, "full")),
    # A resync that committed a point of its own goes on from it.
    ("sweep:812:page2", True, "new-only", ReadPlan("resync-resumed", "sweep:812:page2", "full")),
])
def test_plan_changes_read(position, resyncing, initial_mode, expected):
    assert plan_changes_read(position, resyncing, initial_mode) == expected


def test_an_unknown_first_poll_policy_is_refused():
    with pytest.raises(ValueError, match="unknown initial mode"):
        plan_changes_read("", False, "sometimes")


@pytest.mark.parametrize("fields, constraint", [
    ({"provider": "imap", "auth": "service"}, "mailbox_auth_fits_provider"),
    ({"provider": "gmail", "auth": "password"}, "mailbox_auth_fits_provider"),
    ({"provider": "graph", "auth": "password"}, "mailbox_auth_fits_provider"),
    ({"provider": "pop3", "auth": "password"}, "mailbox_auth_fits_provider"),
    ({"provider": "imap", "auth": "password", "host": ""}, "mailbox_imap_has_host"),
    ({"provider": "imap", "auth": "oauth", "oauth_provider": ""}, "mailbox_imap_oauth_has_issuer"),
])
def test_the_database_refuses_a_mailbox_whose_auth_cannot_work(fields, constraint):
    mailbox = MailboxFactory()
    with pytest.raises(IntegrityError, match=constraint), transaction.atomic():
        Mailbox.objects.filter(pk=mailbox.pk).update(**fields)


@pytest.mark.parametrize("fields", [
    {"provider": "gmail", "auth": "service", "host": ""},
    {"provider": "gmail", "auth": "oauth", "host": ""},
    {"provider": "graph", "auth": "service", "host": ""},
    {"provider": "imap", "auth": "oauth", "oauth_provider": "microsoft"},
])
def test_the_database_takes_every_auth_a_provider_offers(fields):
    mailbox = MailboxFactory()
    assert Mailbox.objects.filter(pk=mailbox.pk).update(**fields) == 1


def test_a_folder_has_one_kind_of_cursor():
    cursor = FolderCursor.objects.create(mailbox=MailboxFactory(), folder="INBOX", uidvalidity=7, last_uid=3)
    with pytest.raises(IntegrityError, match="cursor_one_kind_of_position"), transaction.atomic():
        FolderCursor.objects.filter(pk=cursor.pk).update(position="4711")


@pytest.mark.parametrize("issuer_of, expected", [
    ({"provider": "gmail", "auth": "oauth"}, "google"),
    ({"provider": "graph", "auth": "service"}, "microsoft"),
    ({"provider": "imap", "auth": "oauth", "oauth_provider": "microsoft"}, "microsoft"),
    ({"provider": "imap", "auth": "password", "oauth_provider": "google"}, ""),
])
def test_whose_tokens_a_mailbox_uses(issuer_of, expected):
    assert Mailbox(**issuer_of).issuer == expected


def test_the_claim_skips_oauth_mailboxes_until_they_hold_a_live_grant():
    password = MailboxFactory()
    unconnected = MailboxFactory(provider="gmail", auth="oauth", host="")
    dead = MailboxFactory(provider="graph", auth="oauth", host="")
    live = MailboxFactory(provider="imap", auth="oauth", oauth_provider="google")
    service = MailboxFactory(provider="graph", auth="service", host="")
    for mailbox in (dead, live):
        connect(mailbox, mailbox.issuer, refresh_token="r-" + mailbox.name)
    OAuthGrant.objects.filter(mailbox=dead).update(state=GrantState.NEEDS_REAUTH, failure_reason="invalid_grant",
                                                   failed_at=datetime.now(UTC))

    claimed = set(Poller().claim_due())

    assert claimed == {password.pk, live.pk, service.pk} and unconnected.pk not in claimed
    # Reconnecting brings it back (connect() replaces the grant, active).
    connect(dead, "microsoft", refresh_token="fresh")
    assert set(Poller().claim_due()) == {dead.pk}


def test_an_api_message_keeps_its_provider_id_and_an_imap_one_its_uid():
    gmail = MailboxFactory(provider="gmail", auth="service", host="")
    imap = MailboxFactory(org=gmail.org)
    [from_api] = store.store_messages(gmail, "INBOX", [("18c2f0a9d3e4b5c6", mail(subject="api"))])
    [from_imap] = store.store_messages(imap, "INBOX", [(42, mail(subject="imap"))])
    api_row, imap_row = Request.objects.get(pk=from_api.request_id), Request.objects.get(pk=from_imap.request_id)
    assert (api_row.uid, api_row.provider_ref) == (None, "18c2f0a9d3e4b5c6")
    assert (imap_row.uid, imap_row.provider_ref) == (42, "")


def test_an_oversized_api_message_is_a_rejected_request_named_by_its_headers():
    mailbox = MailboxFactory(provider="graph", auth="service", host="")
    headers = b"Message-ID: <big@example.com>\r\nFrom: Ann <ann@example.com>\r\nSubject: Huge export\r\n\r\n"
    outcome = store.store_oversized(mailbox, "inbox", "AAMkAD", 90_000_000, headers, 25 * 1024 * 1024)
    row = Request.objects.get(pk=outcome.request_id)
    assert (row.status, row.subject, row.provider_ref, row.size) == ("rejected", "Huge export", "AAMkAD", 90_000_000)
    assert "90,000,000 bytes, over the 26,214,400-byte limit" in row.reject_reason
    # The same message, seen again (a resync), is the same Request.
    again = store.store_oversized(mailbox, "inbox", "AAMkAD", 90_000_000, headers, 25 * 1024 * 1024)
    assert not again.created and Request.objects.filter(org=mailbox.org).count() == 1
