"""The cursor rule of API folders (``mailpoll.sync.changes_sync``), whatever the provider: it moves only over what is
stored. Driven through the real poller and the Gmail provider against tests/support/fake_gmail.py; the resync
itself is in test_gmail_mailbox.py and test_graph_mailbox.py, per provider.
"""

from __future__ import annotations

import pytest

from mailpoll.sync import store
from mailpoll.models import FolderCursor, Request
from mailpoll.sync.poller import Poller
from tests.mailpoll.factories import mail
from tests.support.gmail_mailboxes import gmail_mailbox

pytestmark = pytest.mark.django_db(transaction=True)


def failing_on(subject: str):
    """``store_messages``, except that a batch holding the message with ``subject`` cannot be stored."""

    def store_messages(mailbox, folder, fetched):
        if any(f"Subject: {subject}\n".encode() in raw.replace(b"\r\n", b"\n") for _, raw in fetched):
            raise OSError("No space left on device")
        return store.store_messages(mailbox, folder, fetched)

    return store_messages


def position(mailbox) -> str:
    return FolderCursor.objects.get(mailbox=mailbox, folder="INBOX").position


def test_a_message_that_cannot_be_stored_holds_the_cursor_and_the_next_poll_takes_it(gmail):
    mailbox = gmail_mailbox()
    Poller().poll(mailbox)  # an empty label: the cursor is the history id of now
    start = position(mailbox)
    ids = {subject: gmail.add(mail(subject)) for subject in ("a", "bad", "c")}

    Poller(store_messages=failing_on("bad")).poll(mailbox)
    mailbox.refresh_from_db()
    # The others were stored one by one; the batch's cursor would pass "bad", so it stays.
    assert sorted(Request.objects.values_list("subject", flat=True)) == ["a", "c"]
    assert position(mailbox) == start
    row = FolderCursor.objects.get(mailbox=mailbox, folder="INBOX")
    assert row.last_error == f"message {ids['bad']} not stored: OSError: No space left on device"
    assert f"1 message(s) not stored; first: INBOX message {ids['bad']}: OSError" in mailbox.last_error

    Poller().poll(mailbox)
    mailbox.refresh_from_db()
    assert sorted(Request.objects.values_list("subject", flat=True)) == ["a", "bad", "c"]
    assert position(mailbox) == str(gmail.history_id) != start
    row.refresh_from_db()
    # The folder's problem is gone; the mailbox's error stays as history, older than its success.
    assert row.last_error == "" and mailbox.last_success_at > mailbox.last_error_at


def test_a_poll_stopped_between_batches_keeps_what_it_stored_and_the_next_goes_on_from_there(gmail):
    mailbox = gmail_mailbox()
    Poller().poll(mailbox)
    for n in range(6):
        gmail.add(mail(f"m{n}"))
    gmail.max_page = 2  # a history page is a batch, with its cursor
    poller = Poller()

    def stop_after_the_first_fetch(call):
        if call.batched and call.query.get("format") == ["raw"]:
            poller.stop()

    gmail.after.append(stop_after_the_first_fetch)
    poller.poll(mailbox)
    stored = Request.objects.count()
    assert stored == 2 and position(mailbox) not in ("", str(gmail.history_id))

    gmail.after.clear()
    Poller().poll(mailbox)
    assert Request.objects.count() == 6 and position(mailbox) == str(gmail.history_id)
    assert len(gmail.served("/history")) == 1 + 2  # the stopped poll's first page, then the rest in two pages
