"""Delivery against a loopback downstream: 2xx deletes, 500 and a hang are retried, the key never changes."""

import time

import pytest

from mailpoll.models import Attachment
from mailpoll.sync.store import store_message
from outbox import entries, sender, sql
from seoinsight.storage import media_path
from outbox.models import Entry
from tests.mailpoll.corpus import tiny_pdf
from tests.mailpoll.factories import MailboxFactory, mail
from tests.support.processes import run_burst, wait_for

pytestmark = pytest.mark.django_db

BODY = "Traffic on /shop dropped 30 % since Monday, please look into it."


def test_accepted_documents_reach_the_downstream_with_their_file_and_text(downstream):
    pdf = tiny_pdf("Clicks went up")
    mailbox = MailboxFactory()
    store_message(mailbox, "INBOX", 7, mail("Numbers", attachments=[("summary.pdf", pdf, "application/pdf")]))
    store_message(mailbox, "INBOX", 8, mail("A question", body=BODY))
    run_burst()  # process_attachment for each document, then deliver_outbox

    assert not Entry.objects.exists()
    by_type = {r.document["document_type"]: r for r in downstream.documents.values()}
    assert set(by_type) == {"body", "pdf"}
    sent_pdf, body = by_type["pdf"], by_type["body"]
    attachment = Attachment.objects.get(document_type="pdf")
    assert sent_pdf.file == pdf and sent_pdf.file_name == "summary.pdf"
    assert (sent_pdf.document["sha256"], sent_pdf.document["size"], sent_pdf.document["mime"]) == (
        attachment.sha256, len(pdf), "application/pdf")
    assert "Clicks went up" in sent_pdf.document["text"]
    assert sent_pdf.document["context_text"]
    assert (sent_pdf.document["source"], sent_pdf.document["mailbox"]["id"], sent_pdf.document["provider_message_id"]) \
        == ("email", mailbox.pk, "INBOX:7")
    assert sent_pdf.document["received_at"]
    assert body.file is None and body.document["text"] == BODY


def test_a_500_is_retried_later_with_the_same_idempotency_key(downstream, held):
    downstream.answers = [500]
    held(1)
    assert sender.run() == {"delivered": 0, "failed": 1}
    entry = Entry.objects.get()
    assert (entry.attempts, entry.state) == (1, "waiting")
    assert "HTTP 500" in entry.last_error
    assert sender.run()["delivered"] == 0  # not due yet: its delay has not passed

    wait_for(lambda: sender.run()["delivered"] == 1, timeout=10, message="the retry after the delay")
    assert not Entry.objects.exists()
    key = str(entry.key)
    assert [r.key for r in downstream.requests] == [key, key]
    assert downstream.keys() == {key}


def test_a_downstream_that_hangs_past_the_timeout_is_retried(downstream, held):
    downstream.answers = ["hang"]
    held(1)
    assert sender.run()["failed"] == 1
    assert "ReadTimeout" in Entry.objects.get().last_error

    wait_for(lambda: sender.run()["delivered"] == 1, timeout=10, message="the retry after the hang")
    assert not Entry.objects.exists()
    assert len(downstream.requests) == 2 and len(downstream.keys()) == 1


def test_a_downstream_that_refuses_connections_is_retried(downstream, settings, held):
    from tests.support.loopback import free_port

    settings.DOWNSTREAM_URL = f"http://127.0.0.1:{free_port()}/documents"
    held(1)
    assert sender.run()["failed"] == 1
    assert "ConnectionError" in Entry.objects.get().last_error


def test_a_damaged_file_fails_its_try_with_the_reason(downstream):
    store_message(MailboxFactory(), "INBOX", 1, mail(attachments=[("s.pdf", tiny_pdf("x"), "application/pdf")]))
    downstream.answers = [500, 500, 500]  # hold everything while the file is damaged
    run_burst()
    pdf = Entry.objects.get(document__document_type="pdf")
    media_path(pdf.file).write_bytes(b"not the file")
    entries.retry_now(list(Entry.objects.values_list("pk", flat=True)))
    downstream.answers = []
    sender.run()
    pdf.refresh_from_db()
    assert (pdf.attempts, pdf.state) == (2, "waiting") and "is damaged" in pdf.last_error
    assert len(downstream.requests) == 1 and not downstream.documents  # the damaged file was never sent


def test_a_sender_waits_for_a_retry_due_within_its_budget(downstream, settings, held):
    settings.OUTBOX_SENDER_SECONDS = 10
    downstream.answers = [500]
    held(1)
    started = time.monotonic()
    assert sender.run() == {"delivered": 1, "failed": 1}
    assert time.monotonic() - started < 10  # it ended once the outbox was empty, not at its budget


def test_every_sender_slot_taken_means_this_one_ends_at_once(downstream, settings, held):
    settings.OUTBOX_SENDERS = 1
    held(1)
    from django.db import connections

    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s, 0)", [sql.SENDER_LOCK_NAMESPACE])
            assert sender.run() == {"skipped": "every sender slot is taken"}
            assert Entry.objects.count() == 1
            # Unlocked, not only closed: a closed session's locks go when its backend exits, a moment later.
            cursor.execute("SELECT pg_advisory_unlock(%s, 0)", [sql.SENDER_LOCK_NAMESPACE])
    finally:
        other.close()
    assert sender.run()["delivered"] == 1
