"""The outbox's transitions: guarded, leased, and written with the accept or not at all."""

import threading
import uuid
from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from jobs.models import Job
from mailpoll import attachments
from mailpoll.models import Attachment, AttachmentStatus
from mailpoll.sync.store import store_message
from outbox import capacity, entries
from outbox.models import Entry, EntryState
from tests.mailpoll.factories import MailboxFactory, mail
from tests.support.processes import run_burst

pytestmark = pytest.mark.django_db

BODY = "Traffic on /shop dropped 30 % since Monday, please look into it."


def test_without_a_downstream_url_nothing_is_queued(settings):
    settings.DOWNSTREAM_URL = ""
    store_message(MailboxFactory(), "INBOX", 1, mail(body=BODY))
    run_burst()
    assert Attachment.objects.get().status == AttachmentStatus.DONE
    assert not Entry.objects.exists()
    assert not Job.objects.filter(type="deliver_outbox").exists()
    assert (capacity.enabled(), capacity.is_full()) == (False, False)


def test_the_entry_is_written_in_the_transaction_that_accepts_the_document(downstream):
    downstream.answers = [500]
    store_message(MailboxFactory(), "INBOX", 1, mail(body=BODY))
    pk = Attachment.objects.get().pk
    assert attachments.start(pk, Job.objects.get(type="process_attachment"))
    with pytest.raises(RuntimeError), transaction.atomic():
        assert attachments.finish(pk, extracted_text=BODY)
        assert Entry.objects.filter(document_ref=f"mailpoll.attachment:{pk}").exists()
        raise RuntimeError("the accepting transaction rolls back")
    assert Attachment.objects.get().status == AttachmentStatus.PROCESSING
    assert not Entry.objects.exists()

    assert attachments.finish(pk, extracted_text=BODY)
    entry = Entry.objects.get()
    assert (entry.document_ref, entry.state, entry.document["text"]) == (f"mailpoll.attachment:{pk}", "waiting", BODY)
    assert Job.objects.filter(type="deliver_outbox", status="queued").count() == 1


def test_a_document_is_held_once(downstream, held, org):
    held(1)
    assert not entries.add(org_id=org.pk, document_ref="test:doc:0", source="test", document={})
    assert Entry.objects.count() == 1


def test_failed_counts_the_try_keeps_the_error_and_releases_the_claim_with_a_delay(downstream, held):
    held(1)
    claimed = entries.claim("sender-a")
    assert Entry.objects.get().state == EntryState.SENDING
    assert entries.claim("sender-b") is None  # claimed: nobody else gets it

    wait = entries.failed(claimed, "HTTP 500: down")
    entry = Entry.objects.get()
    assert (entry.state, entry.attempts, entry.last_error, entry.claimed_by) == ("waiting", 1, "HTTP 500: down", "")
    assert wait == pytest.approx(0.2)
    assert entry.next_attempt_at > entry.last_tried_at
    assert entries.claim("sender-b") is None  # released, but not due before its delay


def test_a_sender_whose_lease_expired_cannot_fail_its_successors_try(downstream, held):
    held(1)
    first = entries.claim("sender-a")
    Entry.objects.update(lease_until=timezone.now() - timedelta(seconds=1))  # sender-a died holding it
    second = entries.claim("sender-b")
    assert second is not None and second.key == first.key and second.token != first.token
    entry = Entry.objects.get()
    assert (entry.claimed_by, entry.attempts) == ("sender-b", 1)
    assert "claim of sender-a expired" in entry.last_error

    with pytest.raises(entries.LeaseLost):
        entries.failed(first, "late")
    assert entries.done(second)
    assert not Entry.objects.exists()


def test_retry_now_makes_a_waiting_entry_due_and_leaves_one_being_sent(downstream, held):
    held(2)
    a, b = entries.claim("s"), entries.claim("s")
    entries.failed(a, "HTTP 503")
    Entry.objects.filter(pk=a.id).update(next_attempt_at=timezone.now() + timedelta(hours=1))
    assert entries.retry_now([a.id, b.id]) == [a.id]
    assert entries.claim("s").id == a.id


@pytest.mark.parametrize("change", [
    {"state": "sending"},  # no holder, token or lease
    {"state": "lost"},
    {"claim_token": uuid.uuid4()},  # waiting, yet holding a claim
    {"attempts": -1},
])
def test_the_database_refuses_a_state_that_means_nothing(downstream, held, change):
    held(1)
    with pytest.raises(IntegrityError), transaction.atomic():
        Entry.objects.update(**change)


@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_take_different_entries_without_waiting(downstream, held):
    held(2)
    taken, release = threading.Event(), threading.Event()
    other = {}

    def hold_one_open():
        try:
            with transaction.atomic():
                other["entry"] = entries.claim("other")
                taken.set()
                release.wait(10)
        finally:
            connection.close()

    thread = threading.Thread(target=hold_one_open)
    thread.start()
    try:
        assert taken.wait(10)
        mine = entries.claim("me")  # the other's row is locked: skipped, not waited for
        assert mine is not None and mine.id != other["entry"].id
        assert entries.claim("me") is None
    finally:
        release.set()
        thread.join(10)
