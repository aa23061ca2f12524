"""A misbehaving Graph met by the real poller and by the real ``pollmail`` process (issue 19).

A redirect on delta, a stored cursor outside the configured API, an answer that is not Graph's, a Retry-After
longer than the poll's deadline: each is recorded on the mailbox or its folder, and the next poll, once the
server behaves, goes on without losing or doubling a message. As processes: a 400 MB delta page does not grow
``pollmail``, and a ``pollmail`` waiting out a throttle stops at once on SIGTERM. Delegated mailboxes (user
consent), so no deployment identity is involved.
"""

from __future__ import annotations

import signal
import time

import pytest

from mailpoll.oauth import tokens as oauth
from mailpoll.models import FolderCursor, Mailbox, Request
from tests.mailpoll.factories import MailboxFactory, poll_now
from tests.support.fake_graph import CLIENT_ID, CLIENT_SECRET, ELSEWHERE, TENANT, USER, FakeGraph
from tests.support.guards import finishes_within
from tests.support.processes import ManagedProcess, peak_rss_kb, process_env, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def mail(n: int) -> bytes:
    return (f"From: sender{n}@example.com\r\nTo: {USER}\r\nSubject: message {n}\r\n"
            f"Message-ID: <hp{n}@example.com>\r\n\r\nhello\r\n").encode()


def delegated(fake: FakeGraph, **fields) -> Mailbox:
    fields.setdefault("initial_mode", "full")
    mailbox = MailboxFactory(provider="graph", auth="oauth", host="", security="tls", username=USER, **fields)
    oauth.connect(mailbox, "microsoft", refresh_token=fake.grant_refresh_token())
    return mailbox


def refs(mailbox) -> list[str]:
    return sorted(Request.objects.filter(mailbox=mailbox).values_list("provider_ref", flat=True))


def cursor_of(mailbox) -> FolderCursor:
    return FolderCursor.objects.get(mailbox=mailbox, folder="INBOX")


def test_a_302_on_delta_keeps_the_cursor_records_the_error_and_the_next_poll_is_fine(graph):
    first = graph.add("inbox", mail(1)).id
    mailbox = delegated(graph)
    poll_now(mailbox)
    committed = cursor_of(mailbox).position
    later = graph.add("inbox", mail(2)).id
    graph.redirect_delta = (302, f"{graph.origin}{ELSEWHERE}/v1.0/users/{USER}/mailFolders/inbox/messages/delta")
    poll_now(mailbox)
    assert "HTTP 302" in mailbox.last_error and graph.origin in mailbox.last_error
    assert cursor_of(mailbox).position == committed and refs(mailbox) == [first]
    assert not graph.requests_to(ELSEWHERE)
    graph.redirect_delta = None
    poll_now(mailbox)
    assert mailbox.consecutive_failures == 0 and refs(mailbox) == sorted([first, later])
    assert cursor_of(mailbox).position.startswith(graph.graph_url + "/")


@pytest.mark.parametrize("moved", ["stored cursor on another host", "MAILPOLL_GRAPH_API_URL changed"])
def test_a_cursor_outside_the_api_is_resynced_without_loss_or_duplicates(graph, settings, caplog, moved):
    before = [graph.add("inbox", mail(n)).id for n in range(3)]
    mailbox = delegated(graph)
    poll_now(mailbox)
    after = [graph.add("inbox", mail(n)).id for n in range(10, 12)]
    if moved == "stored cursor on another host":
        FolderCursor.objects.filter(mailbox=mailbox).update(
            position="https://graph.old-cloud.example/v1.0/users/u/mailFolders/inbox/messages/delta?$deltatoken=t9")
        base = graph.graph_url
    else:
        base = settings.MAILPOLL_GRAPH_API_URL = f"{graph.origin}{ELSEWHERE}/v1.0"
    poll_now(mailbox)
    assert mailbox.last_error == "" and refs(mailbox) == sorted([*before, *after])  # each once
    cursor = cursor_of(mailbox)
    assert cursor.resyncs == 1 and "outside" in cursor.resync_reason and "$deltatoken" not in cursor.resync_reason
    assert cursor.resync_started_at is None and cursor.position.startswith(base + "/")
    assert f"mailbox={mailbox.pk} " in caplog.text and "outside" in caplog.text


@pytest.mark.parametrize("body", [b'"a string"', b'{"value": "x"}', b"[" * 100_000, b"<html>proxy</html>"])
def test_an_answer_that_is_not_graphs_is_recorded_as_such(graph, body):
    graph.add("inbox", mail(1))
    mailbox = delegated(graph)
    graph.delta_body = body
    poll_now(mailbox)
    assert "Graph answered something that is not its API (" in mailbox.last_error
    for raw in ("AttributeError", "RecursionError", "JSONDecodeError", "Traceback"):
        assert raw not in mailbox.last_error
    graph.delta_body = None
    poll_now(mailbox)
    assert mailbox.consecutive_failures == 0 and len(refs(mailbox)) == 1


def test_a_retry_after_past_the_deadline_ends_the_poll_within_it_and_the_next_poll_resumes(graph, settings):
    first = graph.add("inbox", mail(1)).id
    mailbox = delegated(graph)
    poll_now(mailbox)
    committed = cursor_of(mailbox).position
    later = graph.add("inbox", mail(2)).id
    settings.MAILPOLL_POLL_DEADLINE = 3.0
    graph.throttle = [(429, "100")]
    started = time.monotonic()
    with finishes_within(60, "a poll waiting out Retry-After: 100 past its 3 s deadline"):
        poll_now(mailbox)
    assert time.monotonic() - started < 50  # generously: well before the 100 s asked
    assert "throttled until " in mailbox.last_error and cursor_of(mailbox).position == committed
    Mailbox.objects.filter(pk=mailbox.pk).update(next_attempt_at=None)
    poll_now(mailbox)
    assert mailbox.consecutive_failures == 0 and refs(mailbox) == sorted([first, later])


# -- the real pollmail process ---------------------------------------------------------------------------------

def pollmail_env(fake: FakeGraph, media, **extra) -> dict:
    return process_env(MEDIA_ROOT=media, MAILPOLL_GRAPH_API_URL=fake.graph_url,
                       MAILPOLL_MICROSOFT_AUTHORITY=fake.origin, MAILPOLL_MICROSOFT_TENANT=TENANT,
                       MAILPOLL_MICROSOFT_CLIENT_ID=CLIENT_ID, MAILPOLL_MICROSOFT_CLIENT_SECRET=CLIENT_SECRET,
                       MAILPOLL_API_CA_BUNDLE=fake.ca_file, **extra)


@pytest.mark.processes
def test_a_400_mb_delta_page_does_not_grow_pollmail_and_is_recorded(graph, processes, media):
    graph.add("inbox", mail(1))
    mailbox = delegated(graph)
    graph.huge_delta_bytes = 400 * 1024 * 1024
    poller = processes(lambda: ManagedProcess("pollmail", "--once", env=pollmail_env(graph, media)))
    peak = peak_rss_kb(poller, until_exit=120) / 1024  # MB
    assert poller.wait(timeout=60) == 0
    print(f"pollmail's peak RSS: {peak:.0f} MB")
    assert 0 < peak < 300, f"pollmail's peak RSS was {peak:.0f} MB"
    mailbox.refresh_from_db()
    assert "Graph's delta page passed" in mailbox.last_error, poller.output()[-3000:]
    assert graph.huge_sent < 100 * 1024 * 1024  # the rest was never read


@pytest.mark.processes
def test_a_pollmail_waiting_out_a_throttle_exits_promptly_on_sigterm(graph, processes, media):
    graph.add("inbox", mail(1))
    delegated(graph)
    graph.throttle = [(429, "100")] * 3
    poller = processes(lambda: ManagedProcess("pollmail", "--interval", "0.5", env=pollmail_env(graph, media)))
    wait_for(lambda: "Graph answered 429" in poller.output(), timeout=60, message="pollmail to meet the throttle")
    signalled = time.monotonic()
    poller.signal(signal.SIGTERM)
    assert poller.wait(timeout=20) == 0
    assert time.monotonic() - signalled < 20 and "SIGTERM received" in poller.output()
