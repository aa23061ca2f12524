"""Nothing advances on a held document (docs/mail.md, "The downstream outbox"): until the downstream has it, a document stays ``held``
and a CSV / Excel is not imported; the acknowledgement moves it on, once, in the transaction that deletes its
entry. Also what the sender sends besides the document: the bearer token, and never past a redirect."""

import logging

import pytest

from imports.models import Import, ImportOrigin
from jobs.models import Job
from mailpoll.models import Attachment, AttachmentStatus
from mailpoll.sync.store import store_message
from outbox import entries, sender
from outbox.models import Entry
from tests.mailpoll.corpus import CSV, tiny_pdf
from tests.mailpoll.factories import MailboxFactory, mail
from tests.support.fake_downstream import FakeDownstream
from tests.support.processes import run_burst

pytestmark = pytest.mark.django_db

HELD, DONE, FAILED = AttachmentStatus.HELD, AttachmentStatus.DONE, AttachmentStatus.FAILED


@pytest.fixture(autouse=True)
def slow_retries(downstream, settings):
    """A failed try is not due again by itself during a test: ``due_now`` makes it so. A sender sends what is
    due (retries are not due within its budget)."""
    settings.OUTBOX_RETRY_BASE_SECONDS = settings.OUTBOX_RETRY_MAX_SECONDS = 60.0
    settings.OUTBOX_SENDER_SECONDS = 5


def due_now() -> None:
    entries.retry_now(list(Entry.objects.values_list("pk", flat=True)))


def test_a_csv_becomes_its_import_only_once_the_downstream_has_it(downstream):
    downstream.answers = [500]
    mailbox = MailboxFactory()
    store_message(mailbox, "INBOX", 1, mail("Clicks", attachments=[("clicks.csv", CSV, "text/csv")]))
    run_burst()  # process_attachment, then a deliver_outbox try the downstream refuses

    attachment = Attachment.objects.get(document_type="csv")
    assert attachment.status == HELD and attachment.source_import is None
    assert not Import.objects.exists()
    assert Entry.objects.get().attempts == 1

    due_now()
    assert sender.run()["delivered"] == 1

    attachment.refresh_from_db()
    imported = Import.objects.get()
    assert attachment.status == DONE and attachment.source_import == imported
    assert (imported.origin, imported.site_target_id, imported.org_id) == (
        ImportOrigin.EMAIL, mailbox.site_target_id, mailbox.org_id)
    assert Job.objects.filter(type="import_csv", status="queued").count() == 1
    assert not Entry.objects.exists()
    assert [r.file for r in downstream.documents.values()] == [CSV]


def test_a_pdf_and_a_body_stay_held_until_acknowledged(downstream):
    downstream.answers = [500, 500]
    mailbox = MailboxFactory()
    store_message(mailbox, "INBOX", 1, mail(attachments=[("s.pdf", tiny_pdf("x"), "application/pdf")]))
    store_message(mailbox, "INBOX", 2, mail(body="Traffic on /shop dropped 30 % since Monday, please look into it."))
    run_burst()
    assert sorted(Attachment.objects.values_list("document_type", "status")) == [("body", HELD), ("pdf", HELD)]

    due_now()
    sender.run()
    assert sorted(Attachment.objects.values_list("document_type", "status")) == [("body", DONE), ("pdf", DONE)]


def test_a_csv_that_could_never_be_imported_fails_before_it_is_held(downstream):
    mailbox = MailboxFactory()
    store_message(mailbox, "INBOX", 1, mail(attachments=[("clicks.csv", CSV, "text/csv")]))
    mailbox.site_target.delete()  # the site target it was routed to is gone before its run
    run_burst()

    csv = Attachment.objects.get(document_type="csv")
    assert csv.status == FAILED and "no site target" in csv.error
    assert not Entry.objects.filter(document_ref=f"mailpoll.attachment:{csv.pk}").exists()


def test_an_import_that_cannot_be_made_after_delivery_fails_the_attachment_and_the_entry_goes(downstream):
    downstream.answers = [500]
    mailbox = MailboxFactory()
    store_message(mailbox, "INBOX", 1, mail(attachments=[("clicks.csv", CSV, "text/csv")]))
    run_burst()
    mailbox.site_target.delete()  # the site target it was routed to is deleted while the document waits

    due_now()
    assert sender.run()["delivered"] == 1

    csv = Attachment.objects.get(document_type="csv")
    assert csv.status == FAILED and csv.error.startswith("delivered downstream, but not imported")
    assert not Entry.objects.exists() and not Import.objects.exists()


def test_a_failure_after_the_acknowledgement_keeps_the_entry_and_sends_it_again(downstream, monkeypatch):
    from imports import services

    store_message(MailboxFactory(), "INBOX", 1, mail(attachments=[("clicks.csv", CSV, "text/csv")]))
    real = services.create_import

    def full_disk(**kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(services, "create_import", full_disk)
    run_burst()

    entry = Entry.objects.get()
    assert (entry.attempts, entry.state) == (1, "waiting")
    assert "recording the delivery failed" in entry.last_error and "No space left" in entry.last_error
    assert Attachment.objects.get(document_type="csv").status == HELD and not Import.objects.exists()

    monkeypatch.setattr(services, "create_import", real)
    due_now()
    assert sender.run()["delivered"] == 1
    assert Attachment.objects.get(document_type="csv").status == DONE and Import.objects.count() == 1
    assert len(downstream.requests) == 2 and len(downstream.keys()) == 1  # sent again, recorded once


def test_the_bearer_token_goes_with_every_try_and_is_never_logged(downstream, settings, held, caplog):
    settings.DOWNSTREAM_TOKEN = "tok-3f9c-very-secret"
    downstream.answers = [500]
    held(1)
    with caplog.at_level(logging.DEBUG):
        sender.run()
        due_now()
        sender.run()

    assert [r.headers.get("Authorization") for r in downstream.requests] == ["Bearer tok-3f9c-very-secret"] * 2
    assert "tok-3f9c" not in caplog.text


def test_without_a_token_no_authorization_header_is_sent(downstream, held):
    held(1)
    sender.run()
    assert [r.headers.get("Authorization") for r in downstream.requests] == [None]


def test_a_redirect_is_not_followed_and_the_token_stays_home(downstream, settings, held):
    settings.DOWNSTREAM_TOKEN = "tok-3f9c-very-secret"
    elsewhere = FakeDownstream()
    try:
        downstream.answers = [f"redirect:{elsewhere.url}"]
        held(1)
        assert sender.run()["failed"] == 1
        entry = Entry.objects.get()
        assert "307" in entry.last_error and "not followed" in entry.last_error
        assert elsewhere.requests == []
        assert entry.attempts == 1
    finally:
        elsewhere.close()
