"""A "new only" mailbox first polled while the outbox is full still records where new mail starts.

Its first read fetches nothing, so the capacity gate lets it through: held back until the drain, "new" would
start only then, and the mail that arrived meanwhile would never be read.
"""

import pytest

from mailpoll.models import FolderCursor, Request
from outbox import capacity
from outbox.models import Entry
from tests.mailpoll.factories import MailboxFactory, mail, poll_now

pytestmark = pytest.mark.django_db


@pytest.fixture
def full_outbox(org, held, settings):
    """An outbox on (no sender ever reaches it: none runs here) and full: capacity 1, one document held."""
    settings.DOWNSTREAM_URL, settings.OUTBOX_CAPACITY = "http://127.0.0.1:9/", 1
    held(1)
    assert capacity.is_full()


def test_a_first_new_only_poll_while_full_sets_the_cursor_so_mail_arriving_meanwhile_is_read_after_the_drain(
        dovecot, full_outbox):
    name, password = dovecot.add_user()
    dovecot.append(name, "INBOX", mail("before the mailbox was added"))
    mailbox = MailboxFactory(host=dovecot.host, port=dovecot.port, username=name, password=password,
                             initial_mode="new-only")

    poll_now(mailbox)
    row = FolderCursor.objects.get(mailbox=mailbox, folder="INBOX")
    assert row.uidvalidity is not None and row.last_uid == 1  # "new" starts after the message already there
    assert not Request.objects.exists()
    assert "downstream outbox is full (1 of 1" in mailbox.last_error  # still said loudly

    dovecot.append(name, "INBOX", mail("while the outbox was full"))
    poll_now(mailbox)
    assert not Request.objects.exists()  # held: the cursor has a position now, the gate is closed
    assert FolderCursor.objects.get(mailbox=mailbox, folder="INBOX").last_uid == 1

    Entry.objects.all().delete()  # drained
    poll_now(mailbox)
    assert list(Request.objects.values_list("subject", flat=True)) == ["while the outbox was full"]


def test_a_full_outbox_still_holds_a_first_full_sweep(dovecot, full_outbox):
    name, password = dovecot.add_user()
    dovecot.append(name, "INBOX", mail("waits on the server"))
    mailbox = MailboxFactory(host=dovecot.host, port=dovecot.port, username=name, password=password,
                             initial_mode="full")
    poll_now(mailbox)
    assert not FolderCursor.objects.filter(mailbox=mailbox).exists()
    assert not Request.objects.exists()
