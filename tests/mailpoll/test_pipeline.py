"""From a mailbox to the data: an emailed CSV ends as UrlMetric rows; PDFs give text; the watchdog."""

from datetime import timedelta

import pytest
from django.utils import timezone

from imports.models import Import, ImportOrigin, UrlMetric
from jobs.models import Job, JobStatus
from mailpoll.sync import watchdog
from mailpoll.handlers import OLD_XLS
from mailpoll.models import Attachment, AttachmentStatus, Mailbox
from mailpoll.sync.poller import Poller
from mailpoll.sync.store import store_message
from tests.mailpoll.corpus import hostile_corpus, tiny_pdf
from tests.mailpoll.factories import CSV, AttachmentFactory, MailboxFactory, mail
from tests.support.processes import run_burst

pytestmark = pytest.mark.django_db


def test_an_emailed_csv_ends_as_metrics_and_a_pdf_as_text(dovecot, imap_mailbox):
    mailbox = imap_mailbox()
    dovecot.append(mailbox.username, "INBOX", mail("Weekly numbers", attachments=[
        ("pages.csv", CSV, "text/csv"), ("summary.pdf", tiny_pdf("Clicks went up"), "application/pdf")]))
    Mailbox.objects.filter(pk=mailbox.pk).update(last_polled_at=None)
    Poller().cycle()
    run_burst()  # process_attachment, then import_csv, then map_reconcile

    csv, pdf = Attachment.objects.get(document_type="csv"), Attachment.objects.get(document_type="pdf")
    assert (csv.status, pdf.status) == (AttachmentStatus.DONE, AttachmentStatus.DONE)
    imp = Import.objects.get(pk=csv.source_import_id)
    assert (imp.origin, imp.site_target_id, imp.status, imp.inserted) == (
        ImportOrigin.EMAIL, mailbox.site_target_id, "done", 1)
    metric = UrlMetric.objects.get()
    assert (metric.url_normalized, metric.clicks, metric.page is not None) == ("https://shop.example/a", 3, True)
    assert "Clicks went up" in pdf.extracted_text
    assert not Job.objects.exclude(status=JobStatus.DONE).exists()


def test_a_body_document_is_processed_into_its_text():
    mailbox = MailboxFactory()
    store_message(mailbox, "INBOX", 1, mail(body="Traffic on /shop dropped 30 % since Monday."))
    run_burst()
    body = Attachment.objects.get()
    assert (body.document_type, body.status) == ("body", AttachmentStatus.DONE)
    assert body.extracted_text == "Traffic on /shop dropped 30 % since Monday."


def test_a_csv_from_a_mailbox_without_target_waits_for_a_site_with_its_reason():
    mailbox = MailboxFactory(site_target=None)
    store_message(mailbox, "INBOX", 1, mail(attachments=[("pages.csv", CSV, "text/csv")]))
    run_burst()
    attachment = Attachment.objects.get()
    assert attachment.status == AttachmentStatus.NEEDS_ROUTE
    assert attachment.route_reason == "no rule matched and the mailbox has no site target"


def test_a_broken_pdf_fails_only_its_attachment():
    mailbox = MailboxFactory()
    store_message(mailbox, "INBOX", 1, mail(attachments=[
        ("broken.pdf", b"%PDF-1.4\n garbage", "application/pdf"), ("pages.csv", CSV, "text/csv")]))
    run_burst()
    statuses = dict(Attachment.objects.values_list("filename", "status"))
    assert statuses == {"broken.pdf": AttachmentStatus.FAILED, "pages.csv": AttachmentStatus.DONE}
    assert "PDF" in Attachment.objects.get(filename="broken.pdf").error


def test_the_watchdog_releases_stuck_attachments_then_gives_up(settings):
    settings.MAILPOLL_STUCK_AFTER = 900
    mailbox = MailboxFactory()
    store_message(mailbox, "INBOX", 1, mail(attachments=[("pages.csv", CSV, "text/csv")]))
    Job.objects.all().delete()  # the worker that took it died
    stuck = Attachment.objects.get()
    long_ago = timezone.now() - timedelta(minutes=20)
    Attachment.objects.filter(pk=stuck.pk).update(status=AttachmentStatus.PROCESSING,
                                                  processing_started_at=long_ago, attempts=1)
    recent = AttachmentFactory(request=stuck.request, filename="recent.csv", processing=True)

    assert watchdog.run_once() == {"released": 1, "failed": 0}
    stuck.refresh_from_db()
    assert stuck.status == AttachmentStatus.PENDING
    assert Job.objects.get().payload == {"attachment_id": stuck.pk}
    assert Attachment.objects.get(pk=recent.pk).status == AttachmentStatus.PROCESSING

    Attachment.objects.filter(pk=stuck.pk).update(status=AttachmentStatus.PROCESSING,
                                                  processing_started_at=long_ago, attempts=watchdog.MAX_ATTEMPTS)
    assert watchdog.run_once() == {"released": 0, "failed": 1}
    assert Attachment.objects.get(pk=stuck.pk).status == AttachmentStatus.FAILED


@pytest.mark.parametrize("name, expected", [
    ("tnef-empty", [("winmail.dat", AttachmentStatus.SKIPPED, "empty TNEF: the winmail.dat holds no files")]),
    ("nested-41-levels", [("deep.csv", AttachmentStatus.SKIPPED,
                           "nested too deep (over 32 MIME levels): not searched")]),
    ("forwarded-too-deep", [("lost.csv", AttachmentStatus.SKIPPED,
                             "nested too deep (forwarded over 5 times): not searched")]),
    ("base64-cut-mid-quantum", [("cut.pdf", AttachmentStatus.DONE, "")]),
    ("old-xls", [("old.xls", AttachmentStatus.FAILED, OLD_XLS)]),
])
def test_nothing_vanishes_every_file_ends_as_a_row_with_its_true_reason(name, expected):
    store_message(MailboxFactory(), "INBOX", 1, dict(hostile_corpus())[name])
    run_burst()
    files = Attachment.objects.filter(kind="file").order_by("pk")
    rows = [(a.filename, a.status, a.skip_reason or a.error.removeprefix("DocumentError: ")) for a in files]
    assert rows == expected
    if name == "base64-cut-mid-quantum":
        assert "Clicks report" in files[0].extracted_text
