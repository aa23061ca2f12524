"""Microsoft Graph mailboxes polled by the real poller, against the loopback fake over verified TLS.

App-only (auth=service: msal's client credentials) and delegated (auth=oauth: the mailbox's
OAuthGrant, refreshed through msal under its row lock) go through the production path:
``Poller`` → ``ChangesSync`` → ``GraphMailbox`` → ``GraphSource`` → requests / msal →
``tests.support.fake_graph``. The source's own rules have their tests in test_graph_source.py.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading

import pytest
from django.db import connection
from django.utils import timezone

from mailpoll.oauth import tokens as oauth
from mailpoll.models import FolderCursor, GrantState, Mailbox, OAuthGrant, Request, RequestStatus
from mailpoll.sync.poller import Poller
from mailpoll.providers.base import PollInterrupted
from mailpoll.providers.graph import is_missing_folder
from mailpoll.providers.graph_mailbox import GraphMailbox, graph_folder
from seoinsight import crypto
from tests.mailpoll.factories import MailboxFactory, poll_now
from tests.support.fake_graph import CLIENT_ID, CLIENT_SECRET, TENANT, USER, FakeGraph
from tests.support.guards import finishes_within

# oauth.access_token commits its own transaction, and the source's download threads have connections of their own.
pytestmark = pytest.mark.django_db(transaction=True)

AUTHS = ["service", "oauth"]


def mail(n: int, body: bytes = b"hello\r\n") -> bytes:
    return (f"From: sender{n}@example.com\r\nTo: {USER}\r\nSubject: message {n}\r\n"
            f"Message-ID: <graph-m{n}@example.com>\r\n\r\n").encode() + body


@pytest.fixture(autouse=True)
def waits(monkeypatch):
    """What throttled requests waited, recorded instead of slept."""
    recorded: list[float] = []
    monkeypatch.setattr(GraphMailbox, "sleep", staticmethod(recorded.append))
    return recorded


def graph_mailbox(fake: FakeGraph, auth: str, **fields) -> Mailbox:
    """A Graph mailbox of ``fake``'s user; a delegated one connected as the admin's Connect leaves it."""
    fields.setdefault("initial_mode", "full")
    mailbox = MailboxFactory(provider="graph", auth=auth, host="", security="tls", username=USER, **fields)
    if auth == "oauth":
        oauth.connect(mailbox, "microsoft", refresh_token=fake.grant_refresh_token())
    return mailbox


def refs(mailbox) -> list[str]:
    return sorted(Request.objects.filter(mailbox=mailbox).values_list("provider_ref", flat=True))


def graph_requests(fake: FakeGraph) -> list:
    return [r for r in fake.requests if r[1].startswith("/v1.0/")]


def value_requests(fake: FakeGraph) -> list[str]:
    return [path.split("/")[5] for _, path, _ in fake.requests_to("/$value")]


def cursor_of(mailbox, folder="INBOX") -> FolderCursor:
    return FolderCursor.objects.get(mailbox=mailbox, folder=folder)


# -- first polls and incremental ------------------------------------------------------------------------------

@pytest.mark.parametrize("auth", AUTHS)
def test_first_full_poll_then_incremental_reads_only_what_arrived(graph, auth):
    ids = [graph.add("inbox", mail(n)).id for n in range(3)]
    mailbox = graph_mailbox(graph, auth)
    poll_now(mailbox)
    assert mailbox.last_error == "" and mailbox.last_success_at is not None
    assert refs(mailbox) == sorted(ids)  # Request.provider_ref holds the Graph id
    assert "$deltatoken=" in cursor_of(mailbox).position
    new = graph.add("inbox", mail(9))
    fetched = len(value_requests(graph))
    poll_now(mailbox)
    assert value_requests(graph)[fetched:] == [new.id]
    assert refs(mailbox) == sorted([*ids, new.id]) and mailbox.last_error == ""
    # The second poll reused the first one's token: app-only from msal's cache, delegated from the grant.
    if auth == "service":
        assert len(graph.grants_of("client_credentials")) == 1
    else:
        assert len(graph.grants_of("refresh_token")) == 1


@pytest.mark.parametrize("auth", AUTHS)
def test_new_only_stores_nothing_and_starts_from_the_latest_state(graph, auth):
    for n in range(3):
        graph.add("inbox", mail(n))
    mailbox = graph_mailbox(graph, auth, initial_mode="new-only")
    poll_now(mailbox)
    assert refs(mailbox) == [] and value_requests(graph) == []
    assert graph.requests_to("/delta")[0][2]["$deltatoken"] == "latest"
    assert cursor_of(mailbox).position and mailbox.last_error == ""
    new = graph.add("inbox", mail(7))
    poll_now(mailbox)
    assert refs(mailbox) == [new.id]


def test_since_reads_what_was_received_from_that_day(graph):
    graph.add("inbox", mail(1), received=dt.datetime(2026, 3, 1, 23, 59, tzinfo=dt.UTC))
    kept = graph.add("inbox", mail(2), received=dt.datetime(2026, 3, 2, 0, 0, tzinfo=dt.UTC))
    mailbox = graph_mailbox(graph, "service", initial_mode="since", initial_since=dt.date(2026, 3, 2))
    poll_now(mailbox)
    assert refs(mailbox) == [kept.id]
    assert graph.requests_to("/delta")[0][2]["$filter"] == "receivedDateTime ge 2026-03-02T00:00:00Z"


# -- expired delta state ----------------------------------------------------------------------------------------

def test_a_410_mid_paging_is_one_resync_storing_each_message_once(graph):
    ids = [graph.add("inbox", mail(n)).id for n in range(25)]
    graph.gone_on_page = 2  # the first page is stored, then Graph forgets the round's state
    mailbox = graph_mailbox(graph, "oauth")
    poll_now(mailbox)
    assert mailbox.last_error == ""
    assert refs(mailbox) == sorted(ids)  # each once: the resync's repeats of page one were duplicates
    cursor = cursor_of(mailbox)
    assert cursor.resyncs == 1 and "410 SyncStateNotFound" in cursor.resync_reason
    assert cursor.resync_started_at is None and "$deltatoken=" in cursor.position
    # An expired deltaLink later: one more resync, and the new message alone is new.
    new = graph.add("inbox", mail(99))
    graph.expire_state_tokens()
    poll_now(mailbox)
    cursor = cursor_of(mailbox)
    assert cursor.resyncs == 2 and cursor.resync_started_at is None
    assert refs(mailbox) == sorted([*ids, new.id]) and mailbox.last_error == ""


# -- throttling -------------------------------------------------------------------------------------------------

def test_throttling_waits_as_retry_after_says_and_the_poll_succeeds(graph, waits):
    message = graph.add("inbox", mail(1))
    graph.throttle = [(429, "3"), (503, "1")]
    mailbox = graph_mailbox(graph, "service")
    poll_now(mailbox)
    assert waits == [3.0, 1.0]
    assert refs(mailbox) == [message.id] and mailbox.last_error == ""


def test_throttling_without_end_fails_the_mailbox_with_backoff_after_bounded_tries(graph, waits):
    graph.add("inbox", mail(1))
    graph.throttle = [(429, "2")] * 50
    mailbox = graph_mailbox(graph, "oauth")
    poll_now(mailbox)
    assert "Graph kept answering 429 after 6 tries" in mailbox.last_error
    assert mailbox.consecutive_failures == 1 and mailbox.next_attempt_at is not None
    assert len(graph_requests(graph)) == 6 and waits == [2.0] * 5
    assert refs(mailbox) == []
    # Backed off: the next cycle leaves it alone.
    assert Poller().cycle() == [] and len(graph_requests(graph)) == 6


# -- size limit -------------------------------------------------------------------------------------------------

def test_a_message_over_the_limit_is_a_rejected_request_never_downloaded(graph, settings):
    settings.MAILPOLL_MAX_MESSAGE_BYTES = 4096
    big = graph.add("inbox", mail(1, b"x" * 5000))
    small = graph.add("inbox", mail(2))
    mailbox = graph_mailbox(graph, "service")
    poll_now(mailbox)
    rejected = Request.objects.get(mailbox=mailbox, provider_ref=big.id)
    assert rejected.status == RequestStatus.REJECTED and rejected.subject == "message 1"
    assert "over the 4,096-byte limit" in rejected.reject_reason
    assert Request.objects.get(mailbox=mailbox, provider_ref=small.id).status == RequestStatus.ACCEPTED
    assert value_requests(graph) == [small.id]


# -- delegated tokens -------------------------------------------------------------------------------------------

def test_the_rotated_msal_cache_is_stored_encrypted_and_the_next_refresh_uses_it(graph):
    mailbox = graph_mailbox(graph, "oauth")
    [connected] = graph.live_refresh_tokens()
    graph.add("inbox", mail(1))
    poll_now(mailbox)
    grant = OAuthGrant.objects.get(mailbox=mailbox)
    [rotated] = graph.live_refresh_tokens()
    assert rotated != connected
    assert grant.token_cache and rotated not in grant.token_cache and rotated in crypto.decrypt(grant.token_cache)
    assert grant.access_token and not [t for t in graph.issued if t in grant.access_token]
    # Once the access token is due, the refresh presents the rotated token (the fake refuses the connected one).
    OAuthGrant.objects.filter(pk=grant.pk).update(access_expires_at=timezone.now())
    graph.add("inbox", mail(2))
    poll_now(mailbox)
    assert graph.grants_of("refresh_token")[-1]["refresh_token"] == rotated
    assert mailbox.last_error == "" and len(refs(mailbox)) == 2
    assert OAuthGrant.objects.get(mailbox=mailbox).state == GrantState.ACTIVE


def test_two_pollers_at_once_refresh_once_and_the_newer_token_survives(graph):
    ids = [graph.add("inbox", mail(n)).id for n in range(4)]
    mailbox = graph_mailbox(graph, "oauth")
    graph.refresh_delay = 0.5  # the first refresh is still in flight when the second poller asks
    start = threading.Barrier(2)
    errors = []

    def poll():
        try:
            start.wait(timeout=10)
            Poller().poll(Mailbox.objects.get(pk=mailbox.pk))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=poll) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == [] and not any(thread.is_alive() for thread in threads)
    # A second refresh with the connected token would have been refused (strict rotation): needs_reauth.
    assert len(graph.grants_of("refresh_token")) == 1
    grant = OAuthGrant.objects.get(mailbox=mailbox)
    assert grant.state == GrantState.ACTIVE
    assert graph.live_refresh_tokens()[0] in crypto.decrypt(grant.token_cache)
    mailbox.refresh_from_db()
    assert mailbox.last_error == "" and refs(mailbox) == sorted(ids)


@pytest.mark.parametrize("reason", [
    "AADSTS700082: The refresh token has expired due to inactivity.",
    "AADSTS50173: The provided grant has expired due to it being revoked.",
])
def test_a_dead_grant_needs_reauthorization_and_is_polled_no_more(graph, reason):
    graph.add("inbox", mail(1))
    mailbox = graph_mailbox(graph, "oauth")
    graph.revoked = reason
    poll_now(mailbox)
    grant = OAuthGrant.objects.get(mailbox=mailbox)
    code = reason.split(":")[0]
    assert grant.state == GrantState.NEEDS_REAUTH and code in grant.failure_reason
    assert "needs re-authorization" in mailbox.last_error and code in mailbox.last_error
    asked = len(graph.token_grants)
    Mailbox.objects.filter(pk=mailbox.pk).update(last_polled_at=None, next_attempt_at=None)
    assert Poller().cycle() == []
    assert len(graph.token_grants) == asked and graph_requests(graph) == [] and refs(mailbox) == []


@pytest.mark.parametrize("auth", AUTHS)
def test_a_token_refused_mid_poll_is_renewed_once_and_the_poll_succeeds(graph, auth):
    ids = [graph.add("inbox", mail(n)).id for n in range(3)]
    graph.expire_access_on_request = 2  # the delta page passes; the downloads meet a 401
    mailbox = graph_mailbox(graph, auth)
    poll_now(mailbox)
    assert mailbox.last_error == "" and refs(mailbox) == sorted(ids)
    grant_type = "client_credentials" if auth == "service" else "refresh_token"
    assert len(graph.grants_of(grant_type)) == 2  # the first token, and one replacement for all three downloads


def test_a_delegated_mailbox_never_connected_says_so(graph):
    mailbox = MailboxFactory(provider="graph", auth="oauth", host="", security="tls", username=USER,
                             initial_mode="full")
    Poller().poll(mailbox)
    mailbox.refresh_from_db()
    assert "is not connected" in mailbox.last_error and graph.requests == []


def test_no_token_or_secret_in_any_log_record_at_debug(graph, caplog):
    caplog.set_level(logging.DEBUG)
    graph.add("inbox", mail(1))
    graph.throttle = [(429, "1")]
    graph.expire_access_on_request = 2
    poll_now(graph_mailbox(graph, "oauth"))
    graph.expire_access_on_request = None
    poll_now(graph_mailbox(graph, "service"))
    text = caplog.text
    assert "Graph refused the access token" in text and "Graph answered 429" in text  # the logs were captured
    assert CLIENT_SECRET not in text
    assert graph.issued and not [token for token in graph.issued if token in text]


# -- configuration and folders ----------------------------------------------------------------------------------

@pytest.mark.parametrize("setting, value, says", [
    ("MAILPOLL_MICROSOFT_CLIENT_ID", "", "has no OAuth client id"),
    ("MAILPOLL_MICROSOFT_CLIENT_SECRET", "", "has no client secret"),
    ("MAILPOLL_MICROSOFT_TENANT", "organizations", "needs the mailbox's tenant"),
])
def test_an_incomplete_app_only_configuration_is_named_and_nothing_is_sent(graph, settings, setting, value, says):
    setattr(settings, setting, value)
    mailbox = graph_mailbox(graph, "service")
    poll_now(mailbox)
    assert says in mailbox.last_error and graph.requests == []


def test_a_refused_client_secret_is_named_on_the_mailbox_without_the_secret(graph, settings):
    settings.MAILPOLL_MICROSOFT_CLIENT_SECRET = "a-wrong-secret-value"
    mailbox = graph_mailbox(graph, "service")
    poll_now(mailbox)
    assert "invalid_client: AADSTS7000215" in mailbox.last_error and mailbox.next_attempt_at is not None
    assert "a-wrong-secret-value" not in mailbox.last_error and graph_requests(graph) == []


def test_the_mailboxs_own_app_wins_over_the_settings(graph, settings):
    settings.MAILPOLL_MICROSOFT_CLIENT_ID, settings.MAILPOLL_MICROSOFT_CLIENT_SECRET = "other-app", "wrong"
    settings.MAILPOLL_MICROSOFT_TENANT = "organizations"
    message = graph.add("inbox", mail(1))
    mailbox = graph_mailbox(graph, "service", client_id=CLIENT_ID, tenant=TENANT)
    mailbox.set_app_secret(CLIENT_SECRET)
    mailbox.save(update_fields=["app_secret"])
    poll_now(mailbox)
    assert mailbox.last_error == "" and refs(mailbox) == [message.id]


def test_a_folder_graph_does_not_have_fails_alone(graph):
    message = graph.add("inbox", mail(1))
    mailbox = graph_mailbox(graph, "service", folders=["Invoices", "AAMkGone", "INBOX"])
    poll_now(mailbox)
    assert refs(mailbox) == [message.id]
    assert "400 ErrorInvalidIdMalformed" in cursor_of(mailbox, "Invoices").last_error
    assert "404 ErrorItemNotFound" in cursor_of(mailbox, "AAMkGone").last_error
    assert "folder Invoices could not be read" in mailbox.last_error
    assert mailbox.next_attempt_at is None  # the mailbox answered: no backoff


def test_one_mailboxs_poll_has_at_most_four_requests_in_flight(graph):
    for n in range(12):
        graph.add("inbox", mail(n))
    graph.add("archive", mail(50))
    graph.page_size, graph.value_delay = 12, 0.05
    mailbox = graph_mailbox(graph, "service", folders=["INBOX", "Archive"])
    poll_now(mailbox)
    assert len(refs(mailbox)) == 13 and mailbox.last_error == ""
    assert 2 <= graph.peak_inflight <= 4


def test_an_interrupt_before_connect_or_after_close_is_safe_and_stops_every_request(graph):
    graph.add("inbox", mail(1))
    provider = GraphMailbox(graph_mailbox(graph, "service"))
    provider.interrupt("the poll's deadline passed")
    with provider:
        with pytest.raises(PollInterrupted, match="deadline passed"):
            list(provider.changes("INBOX", None, mode="full"))
    provider.interrupt("again, after close")
    assert graph.requests == []


def test_the_poll_deadline_cuts_downloads_graph_never_answers(graph, settings):
    settings.MAILPOLL_POLL_DEADLINE = 1.0  # and each read may wait MAILPOLL_SOCKET_TIMEOUT, 60 s
    for n in range(3):
        graph.add("inbox", mail(n))
    graph.value_gate = threading.Event()  # the delta page comes, the messages never do
    mailbox = graph_mailbox(graph, "service")
    with finishes_within(20, "a Graph poll blocked on downloads past its deadline"):
        poll_now(mailbox)
    assert "the poll's deadline of 1 s passed" in mailbox.last_error and refs(mailbox) == []
    assert not FolderCursor.objects.filter(mailbox=mailbox).exclude(position="").exists()  # nothing vouched for


# -- pure decisions ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, segment", [
    ("INBOX", "inbox"), ("Inbox", "inbox"), ("inbox", "inbox"), ("SentItems", "sentitems"),
    ("JunkEmail", "junkemail"), ("ARCHIVE", "archive"),
    ("AAMkAGI2TG93AAA=", "AAMkAGI2TG93AAA="),  # an id is case-sensitive: as given
    ("Invoices", "Invoices"),  # a display name is no well-known name: Graph will say it has no such folder
])
def test_graph_folder(name, segment):
    assert graph_folder(name) == segment


@pytest.mark.parametrize("status, code, expected", [
    (404, "ErrorItemNotFound", True), (400, "ErrorInvalidIdMalformed", True), (400, "errorinvalididmalformed", True),
    (404, "ResourceNotFound", False),  # not the folder: the user, say
    (403, "ErrorAccessDenied", False), (410, "SyncStateNotFound", False), (500, "ErrorItemNotFound", False),
])
def test_is_missing_folder(status, code, expected):
    assert is_missing_folder(status, code) is expected
