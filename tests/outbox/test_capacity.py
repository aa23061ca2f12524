"""Bounded: with the outbox full a poll fetches nothing and its cursor stays; after the drain intake resumes."""

import pytest

from mailpoll.models import FolderCursor, Request
from outbox import capacity, entries
from outbox.models import Entry
from tests.mailpoll.factories import MailboxFactory, mail, poll_now
from tests.support.processes import run_burst

pytestmark = pytest.mark.django_db


def message(n: int) -> bytes:
    return mail(f"Question {n}", body=f"Question {n}: why did traffic on /shop/{n} drop 30 % this week?")


def test_a_full_outbox_stops_intake_and_the_drain_resumes_it_with_no_message_lost(
        dovecot, downstream, settings):
    settings.OUTBOX_CAPACITY = 2
    downstream.answers = [500] * 50  # the downstream is down
    name, password = dovecot.add_user()
    mailbox = MailboxFactory(host=dovecot.host, port=dovecot.port, username=name, password=password,
                             initial_mode="full")
    dovecot.append(name, "INBOX", message(1))
    dovecot.append(name, "INBOX", message(2))
    poll_now(mailbox)
    run_burst()  # both documents accepted; their sends fail
    assert capacity.depth().held == 2 and capacity.is_full()

    dovecot.append(name, "INBOX", message(3))
    cursor_before = FolderCursor.objects.get(mailbox=mailbox, folder="INBOX").last_uid
    poll_now(mailbox)
    assert Request.objects.count() == 2  # nothing fetched
    assert FolderCursor.objects.get(mailbox=mailbox, folder="INBOX").last_uid == cursor_before
    assert "downstream outbox is full (2 of 2" in mailbox.last_error
    assert dovecot.message_count(name, "INBOX") == 3  # the mail waits on the server

    downstream.answers = []  # the downstream is back
    entries.retry_now(list(Entry.objects.values_list("pk", flat=True)))
    run_burst()  # the gate queued a sender
    assert not capacity.is_full() and capacity.depth().held == 0

    poll_now(mailbox)
    run_burst()
    assert Request.objects.count() == 3
    assert mailbox.last_error == "" or mailbox.last_success_at >= mailbox.last_error_at
    texts = sorted(r.document["text"] for r in downstream.documents.values())
    assert texts == sorted(f"Question {n}: why did traffic on /shop/{n} drop 30 % this week?" for n in (1, 2, 3))


def test_without_a_downstream_url_the_gate_never_closes(dovecot, settings):
    settings.DOWNSTREAM_URL = ""
    settings.OUTBOX_CAPACITY = 1
    name, password = dovecot.add_user()
    mailbox = MailboxFactory(host=dovecot.host, port=dovecot.port, username=name, password=password,
                             initial_mode="full")
    dovecot.append(name, "INBOX", message(1))
    dovecot.append(name, "INBOX", message(2))
    poll_now(mailbox)
    run_burst()
    assert Request.objects.count() == 2 and not Entry.objects.exists()
