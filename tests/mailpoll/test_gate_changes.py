"""The outbox's bound within an API folder's read (issue 19, 1b): ``changes_sync`` asks the gate before every
batch, counting documents on their way. Gmail provider against tests/support/fake_gmail.py, a downstream on
loopback that is down, then back.
"""

from __future__ import annotations

import pytest

from mailpoll.models import Attachment, AttachmentStatus, FolderCursor, Request
from mailpoll.sync.poller import Poller
from outbox import entries
from outbox.models import Entry
from tests.mailpoll.factories import mail
from tests.support.fake_downstream import FakeDownstream
from tests.support.gmail_mailboxes import gmail_mailbox
from tests.support.processes import run_burst

pytestmark = pytest.mark.django_db(transaction=True)

CAPACITY, PAGE, MESSAGES = 5, 2, 13


@pytest.fixture
def downstream(settings):
    fake = FakeDownstream(answers=[500] * 1000)  # down
    settings.DOWNSTREAM_URL, settings.DOWNSTREAM_TIMEOUT = fake.url, 0.5
    settings.OUTBOX_RETRY_BASE_SECONDS, settings.OUTBOX_RETRY_MAX_SECONDS = 0.2, 1.0
    settings.OUTBOX_SENDER_SECONDS, settings.OUTBOX_CAPACITY = 0, CAPACITY
    yield fake
    fake.close()


def depth() -> int:
    """Held entries plus documents stored and not yet processed, from the rows themselves."""
    on_the_way = Attachment.objects.filter(status__in=[AttachmentStatus.PENDING, AttachmentStatus.PROCESSING])
    return Entry.objects.count() + on_the_way.count()


def test_an_api_read_stops_at_the_capacity_and_the_next_polls_take_the_rest_exactly_once(gmail, downstream):
    mailbox = gmail_mailbox()
    gmail.max_page = PAGE  # a page is a batch
    for n in range(MESSAGES):
        gmail.add(mail(f"m{n}", body=f"body {n}"))

    Poller().poll(mailbox)
    mailbox.refresh_from_db()
    first = Request.objects.count()
    assert CAPACITY <= first <= CAPACITY + PAGE
    assert depth() == first
    assert "downstream outbox is full" in mailbox.last_error
    held_at = FolderCursor.objects.get(mailbox=mailbox, folder="INBOX").position

    run_burst()  # into the outbox; the downstream refuses them
    Poller().poll(mailbox)
    assert Request.objects.count() == first  # still full: nothing fetched
    assert FolderCursor.objects.get(mailbox=mailbox, folder="INBOX").position == held_at

    downstream.answers = []  # back
    polls = 0
    while Request.objects.count() < MESSAGES:
        polls += 1
        assert polls <= MESSAGES, "intake never caught up"
        entries.retry_now(list(Entry.objects.values_list("pk", flat=True)))
        run_burst()
        Poller().poll(mailbox)
        assert depth() <= CAPACITY + PAGE
    run_burst()

    subjects = sorted(Request.objects.values_list("subject", flat=True))
    assert subjects == sorted(f"m{n}" for n in range(MESSAGES))
    delivered = sorted(received.document["text"] for received in downstream.documents.values())
    assert delivered == sorted(f"body {n}" for n in range(MESSAGES))
