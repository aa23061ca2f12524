"""The bound holds within a poll (issue 19, 1b): the gate is asked before every fetch batch and counts the
documents on their way (stored, not yet processed into the outbox) as well as those held.

Downstream down, capacity 5, batches of 3, 23 messages in one folder of the suite's Dovecot: a poll takes
at most the capacity, the cursor stops right after the last message taken, and once the downstream is back
the next polls take the rest, each message exactly once.
"""

import pytest

from mailpoll.models import Attachment, AttachmentStatus, FolderCursor, Request
from outbox import entries
from outbox.models import Entry
from tests.mailpoll.factories import MailboxFactory, mail, poll_now
from tests.support.processes import run_burst

pytestmark = pytest.mark.django_db

CAPACITY, BATCH, MESSAGES = 5, 3, 23


def text(n: int) -> str:
    return f"Question {n}: why did /shop/{n} drop?"


@pytest.fixture
def backlog(dovecot, downstream, settings):
    """A full-mode mailbox with MESSAGES messages waiting, the downstream answering 500."""
    settings.OUTBOX_CAPACITY, settings.MAILPOLL_FETCH_BATCH = CAPACITY, BATCH
    downstream.answers = [500] * 1000
    name, password = dovecot.add_user()
    for n in range(MESSAGES):
        dovecot.append(name, "INBOX", mail(f"q{n}", body=text(n)))
    return MailboxFactory(host=dovecot.host, port=dovecot.port, username=name, password=password,
                          initial_mode="full")


def taken(mailbox) -> list[int]:
    return sorted(Request.objects.filter(mailbox=mailbox).values_list("uid", flat=True))


def intake_depth() -> int:
    """Held entries plus documents stored and not yet processed (counted here from the rows themselves)."""
    on_the_way = Attachment.objects.filter(status__in=[AttachmentStatus.PENDING, AttachmentStatus.PROCESSING])
    return Entry.objects.count() + on_the_way.count()


def test_a_poll_stops_fetching_at_the_capacity_and_its_cursor_stops_with_it(backlog):
    poll_now(backlog)

    uids = taken(backlog)
    # Nothing processed yet: every document taken is on its way, and counts.
    assert len(uids) <= CAPACITY + BATCH
    assert intake_depth() == len(uids) and intake_depth() >= CAPACITY
    assert uids == list(range(1, len(uids) + 1))
    assert FolderCursor.objects.get(mailbox=backlog, folder="INBOX").last_uid == uids[-1]
    assert "downstream outbox is full" in backlog.last_error

    run_burst()  # processed into the outbox; the downstream refuses them
    assert Entry.objects.count() == len(uids)
    poll_now(backlog)
    assert taken(backlog) == uids  # still full: nothing more fetched


def test_after_the_drain_the_next_polls_take_the_rest_each_message_exactly_once(backlog, downstream):
    polls = 0
    while Request.objects.filter(mailbox=backlog).count() < MESSAGES:
        polls += 1
        assert polls <= 2 * MESSAGES, "intake never caught up"
        poll_now(backlog)
        assert intake_depth() <= CAPACITY + BATCH
        run_burst()
        downstream.answers = []  # back after the first poll
        entries.retry_now(list(Entry.objects.values_list("pk", flat=True)))
        run_burst()

    assert not Entry.objects.exists()
    assert taken(backlog) == list(range(1, MESSAGES + 1))
    assert FolderCursor.objects.get(mailbox=backlog, folder="INBOX").last_uid == MESSAGES
    delivered = [received.document["text"] for received in downstream.documents.values()]
    assert sorted(delivered) == sorted(text(n) for n in range(MESSAGES))
    assert polls > 1  # the bound did hold intake back


def test_without_a_downstream_url_a_poll_takes_the_whole_backlog(backlog, settings):
    settings.DOWNSTREAM_URL = ""
    poll_now(backlog)
    assert taken(backlog) == list(range(1, MESSAGES + 1))
    assert backlog.last_error == ""
