"""Gmail mailboxes through the real poller, against tests/support/fake_gmail.py (googleapiclient, google-auth).

Both kinds of credentials: a Workspace service account (domain-wide delegation) and a user's
OAuth grant (``mailpoll.oauth``: the token endpoint is the fake's, refreshes under the grant's lock).
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import date, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from mailpoll.models import FolderCursor, GrantState, Mailbox, OAuthGrant, Request, RequestStatus
from mailpoll.sync.poller import Poller
from mailpoll.providers import PollInterrupted, for_mailbox
from mailpoll.providers.gmail_rules import MAX_ATTEMPTS
from tests.mailpoll.factories import mail, poll_now
from tests.support.fake_gmail import FakeGmail
from tests.support.gmail_mailboxes import (CLIENT_SECRET, DAY_MS, JAN_2024_MS, REFRESH_TOKEN, USER, decoy_token_uri,
                                           gmail_mailbox)
from tests.support.google import service_account_key

# oauth.access_token commits its own transaction, and pollers run on threads of their own.
pytestmark = pytest.mark.django_db(transaction=True)

def poll(mailbox: Mailbox) -> None:
    Poller().poll(mailbox)
    mailbox.refresh_from_db()


def cursor_of(mailbox, folder="INBOX") -> FolderCursor:
    return FolderCursor.objects.get(mailbox=mailbox, folder=folder)


def subjects() -> list[str]:
    return sorted(Request.objects.values_list("subject", flat=True))


def provider_refs() -> list[str]:
    return sorted(Request.objects.values_list("provider_ref", flat=True))


def refreshes(fake: FakeGmail) -> int:
    return sum(1 for grant in fake.grants if "refresh_token" in grant)


# -- first polls and incremental ---------------------------------------------------

@pytest.mark.parametrize("auth", ["service", "oauth"])
def test_a_full_first_poll_takes_the_label_then_each_poll_only_what_is_new(gmail, auth):
    ids = [gmail.add(mail(f"m{n}")) for n in range(3)]
    gmail.add(mail("sent by us"), labels=["SENT"])
    before = str(gmail.history_id)
    mailbox = gmail_mailbox(auth=auth)

    poll(mailbox)
    assert subjects() == ["m0", "m1", "m2"]
    assert provider_refs() == sorted(ids) and not Request.objects.filter(uid__isnull=False).exists()
    assert cursor_of(mailbox).position == before and cursor_of(mailbox).resyncs == 0
    assert mailbox.last_error == "" and mailbox.consecutive_failures == 0 and mailbox.last_success_at is not None

    new = gmail.add(mail("m3"))
    poll_now(mailbox)  # through a cycle's claim
    assert subjects() == ["m0", "m1", "m2", "m3"]
    assert Request.objects.get(subject="m3").provider_ref == new
    assert len(gmail.listings()) == 1 and len(gmail.served("/history")) == 1
    assert cursor_of(mailbox).position == str(gmail.history_id)
    assert {c.user for c in gmail.calls} == {"me"}


def test_a_new_only_first_poll_stores_nothing_but_the_history_id(gmail):
    gmail.add(mail("old"))
    mailbox = gmail_mailbox(initial_mode="new-only")
    poll(mailbox)
    assert Request.objects.count() == 0 and cursor_of(mailbox).position == str(gmail.history_id)
    assert gmail.served("/messages") == [] and gmail.served("/history") == []

    gmail.add(mail("new"))
    poll(mailbox)
    assert subjects() == ["new"]


def test_a_since_first_poll_takes_mail_from_that_day_on(gmail):
    gmail.add(mail("before"), internal_ms=JAN_2024_MS - DAY_MS)
    gmail.add(mail("after"), internal_ms=JAN_2024_MS + DAY_MS)
    mailbox = gmail_mailbox(initial_mode="since", initial_since=date(2024, 1, 1))
    poll(mailbox)
    assert subjects() == ["after"]
    assert gmail.listings()[0].query["q"] == [f"after:{JAN_2024_MS // 1000}"]
    assert cursor_of(mailbox).position == str(gmail.history_id)


def test_a_label_is_named_by_id_or_name_and_one_that_does_not_exist_fails_that_folder_alone(gmail):
    reports = gmail.add_label("Clients/Reports")
    gmail.add(mail("in the inbox"))
    gmail.add(mail("a report"), labels=[reports])
    mailbox = gmail_mailbox(folders=["INBOX", "Nope", "Clients/Reports"])
    poll(mailbox)
    assert subjects() == ["a report", "in the inbox"]
    assert any(c.query.get("labelIds") == [reports] for c in gmail.listings())
    assert "folder Nope could not be read: Gmail has no label 'Nope'" in mailbox.last_error
    assert "Gmail has no label" in cursor_of(mailbox, "Nope").last_error
    assert mailbox.next_attempt_at is None  # the mailbox answered: no backoff
    assert len(gmail.served("/labels")) == 1  # once per poll, not per folder


# -- expired history -----------------------------------------------------------------

def test_history_expiring_mid_paging_resyncs_the_label_once_and_stores_every_message_once(gmail):
    mailbox = gmail_mailbox()
    first = [gmail.add(mail(f"a{n}")) for n in range(2)]
    poll(mailbox)
    later = [gmail.add(mail(f"b{n}")) for n in range(5)]
    gmail.max_page = 2

    def expire(call):
        if call.path.endswith("/history") and len(gmail.served("/history")) == 1:
            gmail.oldest_history = gmail.history_id  # Gmail dropped the history between two pages

    gmail.after.append(expire)
    poll(mailbox)
    row = cursor_of(mailbox)
    assert row.resyncs == 1 and "no longer takes the cursor of label INBOX" in row.resync_reason
    assert row.resync_started_at is None and row.position == str(gmail.history_id)
    assert row.last_resync_at is not None  # finished, but when it happened is kept
    assert provider_refs() == sorted(first + later) and Request.objects.count() == 7
    assert mailbox.last_error == "" and len(gmail.listings()) == 1 + 4  # the first poll's, then 7 in pages of 2

    gmail.add(mail("c"))
    poll(mailbox)
    assert cursor_of(mailbox).resyncs == 1 and Request.objects.count() == 8


# -- throttling ------------------------------------------------------------------------

@pytest.mark.parametrize("throttle", [(429, "rateLimitExceeded"), (403, "rateLimitExceeded"),
                                      (403, "userRateLimitExceeded")])
def test_throttling_past_the_bounded_backoff_is_the_mailboxs_error_and_backs_it_off(gmail, throttle):
    gmail.add(mail("m"))
    mailbox = gmail_mailbox()
    gmail.throttle = [throttle] * 50
    gmail.throttle_retry_after = "0.01"  # Gmail's own hint: the real pauses are tested in test_gmail_source

    poll_now(mailbox)
    assert f"Gmail kept throttling label INBOX after {MAX_ATTEMPTS} attempts (HTTP {throttle[0]}" in mailbox.last_error
    assert mailbox.consecutive_failures == 1 and mailbox.next_attempt_at > timezone.now()
    assert 50 - len(gmail.throttle) == MAX_ATTEMPTS and Request.objects.count() == 0

    # Due by its interval again, but backed off: the next cycle leaves it alone.
    Mailbox.objects.filter(pk=mailbox.pk).update(last_polled_at=timezone.now() - timedelta(hours=1))
    assert Poller().cycle() == []
    assert 50 - len(gmail.throttle) == MAX_ATTEMPTS


# -- content ----------------------------------------------------------------------------

def test_a_message_over_the_size_limit_is_a_rejected_request_with_its_reason_and_subject(gmail, settings):
    settings.MAILPOLL_MAX_MESSAGE_BYTES = 5000
    big = gmail.add(mail("Huge export", body="x" * 20_000))
    small = gmail.add(mail("Small"))
    mailbox = gmail_mailbox()
    poll(mailbox)
    rejected = Request.objects.get(provider_ref=big)
    assert rejected.status == RequestStatus.REJECTED and rejected.subject == "Huge export"
    assert "over the 5,000-byte limit" in rejected.reject_reason
    assert Request.objects.get(provider_ref=small).status == RequestStatus.ACCEPTED
    assert gmail.served(f"/messages/{big}", fmt="raw") == []
    assert mailbox.last_error == ""


def test_the_same_message_in_a_gmail_and_an_imap_mailbox_of_one_org_is_one_request(gmail, dovecot, imap_mailbox):
    raw = mail("Shared report", message_id="<shared-1@client.example>")
    api = gmail_mailbox()
    imap = imap_mailbox(org=api.org, site_target=api.site_target)
    gmail.add(raw)
    dovecot.append(imap.username, "INBOX", raw)

    assert sorted(Poller().cycle()) == sorted([api.pk, imap.pk])  # both at once, on threads of their own
    assert Request.objects.filter(org=api.org).count() == 1
    for mailbox in (api, imap):
        mailbox.refresh_from_db()
        assert mailbox.last_error == "" and mailbox.last_success_at is not None


def test_an_https_api_is_verified_against_the_configured_ca_bundle(settings, tmp_path):
    server = FakeGmail(tls_dir=tmp_path).start()
    try:
        settings.MAILPOLL_GMAIL_API_URL, settings.MAILPOLL_GOOGLE_TOKEN_URL = server.endpoint, server.token_uri
        server.add(mail("m"))
        mailbox = gmail_mailbox()
        poll(mailbox)
        assert "CERTIFICATE_VERIFY_FAILED" in mailbox.last_error and server.token_requests == 0

        settings.MAILPOLL_API_CA_BUNDLE = server.ca_file
        poll(mailbox)
        assert subjects() == ["m"] and mailbox.consecutive_failures == 0
        assert server.token_requests == 1  # the assertion went over the same verified connection
    finally:
        server.stop()


# -- credentials --------------------------------------------------------------------------

def test_a_service_account_signs_for_the_configured_token_endpoint_only(gmail):
    gmail.add(mail("m"))
    mailbox = gmail_mailbox()  # its key names another token_uri
    poll(mailbox)
    assert subjects() == ["m"]
    # The fake got the assertion (the key's own token_uri would have refused the connection). Its audience
    # claim stays Google's token endpoint, as google-auth writes it: a claim, not where it goes.
    [claims] = gmail.grants
    assert gmail.token_requests == 1 and claims["sub"] == USER
    assert claims["scope"] == "https://www.googleapis.com/auth/gmail.readonly"


def test_a_service_account_key_comes_from_the_mailbox_or_the_settings_file(gmail, settings, tmp_path):
    mailbox = gmail_mailbox(key=False)
    poll(mailbox)
    assert "has no service account key" in mailbox.last_error and "MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE" in mailbox.last_error
    assert gmail.token_requests == 0

    path = tmp_path / "key.json"
    path.write_text(json.dumps(service_account_key(decoy_token_uri())))
    settings.MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE = str(path)
    gmail.add(mail("m"))
    poll(mailbox)
    assert subjects() == ["m"] and mailbox.consecutive_failures == 0

    mailbox.set_app_secret('{"client_email": "x@y.example"}')
    mailbox.save(update_fields=["app_secret"])
    poll(mailbox)
    assert "is not a Google service account JSON key" in mailbox.last_error


def test_a_refused_delegation_is_the_mailboxs_error_saying_what_to_fix(gmail):
    gmail.refuse_error = "unauthorized_client"
    gmail.refuse = ("Client is unauthorized to retrieve access tokens using this method, or client not authorized "
                    "for any of the scopes requested.")
    mailbox = gmail_mailbox()
    poll(mailbox)
    assert mailbox.last_error.startswith("the provider refused the app's credentials\nGoogle refused service account ")
    assert "domain-wide delegation is not granted to client id 100000000000000000001" in mailbox.last_error
    assert "PRIVATE KEY" not in mailbox.last_error
    assert mailbox.consecutive_failures == 1 and mailbox.next_attempt_at is not None and gmail.calls == []


def test_a_revoked_grant_needs_reauthorization_and_the_mailbox_is_left_alone_until_reconnected(gmail):
    mailbox = gmail_mailbox(auth="oauth")
    gmail.refuse = "Token has been expired or revoked."

    poll_now(mailbox)
    grant = OAuthGrant.objects.get(mailbox=mailbox)
    assert grant.state == GrantState.NEEDS_REAUTH
    assert grant.failure_reason == "invalid_grant: Token has been expired or revoked."
    assert "needs re-authorization" in mailbox.last_error and "Token has been expired or revoked." in mailbox.last_error
    assert gmail.token_requests == 1 and gmail.calls == []

    Mailbox.objects.filter(pk=mailbox.pk).update(last_polled_at=None, next_attempt_at=None)  # "Poll now"
    assert Poller().cycle() == []
    assert gmail.token_requests == 1


def test_a_token_refused_mid_poll_is_refreshed_once_and_the_poll_goes_on(gmail):
    mailbox = gmail_mailbox(auth="oauth")
    poll(mailbox)
    assert refreshes(gmail) == 1  # the grant came without an access token
    ids = [gmail.add(mail(f"m{n}")) for n in range(4)]
    gmail.max_page = 2

    def revoke(call):
        if call.path.endswith("/history") and len(gmail.served("/history")) == 1:
            gmail.access_tokens.clear()  # revoked early, or the clocks disagree: Gmail answers 401

    gmail.after.append(revoke)
    poll(mailbox)
    assert provider_refs() == sorted(ids) and mailbox.last_error == ""
    assert refreshes(gmail) == 2 and len(gmail.access_tokens) == 1


def test_no_token_or_key_reaches_the_logs_at_debug(gmail, caplog):
    caplog.set_level(logging.DEBUG)
    service, user = gmail_mailbox(), gmail_mailbox(auth="oauth")
    gmail.add(mail("m"))
    poll(service)
    poll(user)
    gmail.access_tokens.clear()
    gmail.add(mail("n"))
    poll(user)  # a 401, then a refresh
    gmail.refuse = "Token has been expired or revoked."
    gmail.access_tokens.clear()
    poll(user)  # and the grant dies
    assert len(gmail.issued) == 3 and len(gmail.assertions) == 1
    logged = caplog.text + "".join(repr(r.args) for r in caplog.records)
    assert f"mailbox={user.pk} OAuth grant needs re-authorization" in logged
    private_key_line = service_account_key(gmail.token_uri)["private_key"].splitlines()[1]
    for secret in (*gmail.issued, *gmail.assertions, REFRESH_TOKEN, CLIENT_SECRET, private_key_line):
        assert secret not in logged


# -- the poll's deadline --------------------------------------------------------------------

def poll_in_thread(mailbox: Mailbox) -> threading.Thread:
    def run():
        try:
            Poller().poll(mailbox)
        finally:
            connection.close()

    thread = threading.Thread(target=run, name="gmail-poll")
    thread.start()
    return thread


@pytest.mark.parametrize("hold", ["stall", "throttle"])
def test_the_polls_deadline_ends_a_poll_held_by_a_silent_or_throttling_server(gmail, settings, hold):
    settings.MAILPOLL_POLL_DEADLINE = 1.0
    settings.MAILPOLL_SOCKET_TIMEOUT = 60.0
    gmail.add(mail("m"))
    mailbox = gmail_mailbox()
    if hold == "stall":
        gmail.after.append(lambda call: gmail.stall())  # the labels are answered, then nothing
    else:
        gmail.throttle, gmail.throttle_retry_after = [(429, "rateLimitExceeded")] * 5, "30"

    thread = poll_in_thread(mailbox)
    thread.join(timeout=20)  # far below the socket timeout and the pauses: only the interruption ends it
    assert not thread.is_alive()
    mailbox.refresh_from_db()
    assert "Gmail poll interrupted: the poll's deadline of 1 s passed" in mailbox.last_error
    assert mailbox.consecutive_failures == 1 and mailbox.next_attempt_at is not None


def test_interrupt_before_connect_or_after_close_is_harmless(gmail):
    gmail.add(mail("m"))
    mailbox = gmail_mailbox()
    early = for_mailbox(mailbox)
    early.interrupt("pollmail is stopping")
    with early, pytest.raises(PollInterrupted, match="pollmail is stopping"):
        list(early.changes("INBOX", None, mode="full"))
    assert gmail.calls == [] and gmail.token_requests == 0

    late = for_mailbox(mailbox)
    with late:
        assert [mid for batch in late.changes("INBOX", None, mode="full") for mid, _ in batch.items]
    late.interrupt("too late")
    late.close()
