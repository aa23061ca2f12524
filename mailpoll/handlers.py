"""process_attachment: each stored document goes down the pipeline.

CSV / Excel become an Import (origin email) for the site target their routing chose at intake
(``mailpoll.routing``: a mail rule, or the mailbox's own target) —
``import_csv`` does the rest; PDF text is extracted with pypdf; a body document
is its own text. Its status moves only through ``mailpoll.attachments``
(pending → processing → done | failed); a re-run of the job whose run died
takes its document over at once (the watchdog releases any other left in
``processing``). A full disk is waited out: the document waits, its job is
retried with the queue's backoff (``RUNS``), nobody has to press Retry.

With the downstream outbox on, a run ends in ``held`` instead, and nothing
further happens to the document until the downstream has it (nothing
advances on a held document): ``attachment_delivered`` then marks it done and
only then makes a CSV / Excel its Import. The run checks beforehand everything
the Import will need (a site target, a supported format, intact bytes), so a
document that could never become one fails before it is held.

A stored file is trusted only once its size and SHA-256 are the ones recorded
on the attachment: a damaged file fails its attachment with that reason, never
as an "empty" or "unreadable" document.
"""

from __future__ import annotations

import io
import logging

from django.core.files.base import ContentFile
from django.db import transaction

from jobs.registry import register
from outbox.delivered import on_delivered
from seoinsight import storage

from . import attachments
from .models import Attachment, AttachmentStatus

log = logging.getLogger(__name__)

MAX_EXTRACTED_CHARS = 2_000_000
IMPORTABLE = ("csv", "xlsx", "xls")
# The reason docs/mail.md gives for an old Excel file (imports refuse them too).
OLD_XLS = "old .xls (Excel 97-2003) files cannot be imported: save it as .xlsx or CSV and send it again"


# Runs of a process_attachment job: a full disk is retried this often, with the queue's backoff between runs
# (JOBS_RETRY_BASE doubling up to JOBS_RETRY_MAX: with the defaults, 5 to 10 hours in all; a try costs a
# failed write). Runs that die (a kill, a crash, a lost database) are bounded by the attachment's own MAX_RUNS.
RUNS = 72


class DocumentError(Exception):
    """The document cannot be processed; the message says why."""


class Superseded(Exception):
    """A newer attempt of this run's job took the attachment over while this run worked on it."""


def attachment_failed(job) -> None:
    """on_fail: the job failed, so its attachment did (unless it had finished, or another job's run has it)."""
    pk = job.payload.get("attachment_id")
    if not attachments.fail(pk, job.error, job_id=job.id):
        log.info("job=%s failed; attachment=%s was done, skipped or gone, and keeps that", job.id, pk)


def attachment_requeued(job) -> None:
    """on_requeue: an operator requeued the failed job, so its attachment is pending again."""
    pk = job.payload.get("attachment_id")
    if not attachments.requeue(pk):
        log.warning("job=%s requeued; attachment=%s was not failed and is left as it is", job.id, pk)


@register("process_attachment", on_fail=attachment_failed, on_requeue=attachment_requeued, max_attempts=RUNS,
          retry_on=(storage.OutOfSpace,))
def process_attachment(job):
    attachment_id = job.payload["attachment_id"]
    started = attachments.start(attachment_id, job)
    if started is None:
        return {"skipped": "attachment is not pending"}
    if started == attachments.GIVEN_UP:
        raise DocumentError(f"its runs died {attachments.MAX_RUNS} times; given up")
    try:
        report = _process(job, attachment_id)
    except storage.OutOfSpace as exc:
        # Transient: the document waits (and says so), the queue retries the job with backoff (retry_on).
        attachments.wait_for_disk(attachment_id, job, str(exc))
        log.warning("job=%s attachment=%s waits for disk space: %s", job.id, attachment_id, exc)
        raise
    except Superseded:
        log.warning("job=%s attachment=%s was taken over by a newer run of this job; this run records nothing",
                    job.id, attachment_id)
        return {"skipped": "a newer run of this job took the attachment over"}
    if not attachments.finish(attachment_id, job, **report.pop("fields", {})):
        log.warning("job=%s attachment=%s was released or failed while this run worked on it; its result is not "
                    "recorded", job.id, attachment_id)
    return report


def _process(job, attachment_id: int) -> dict:
    attachment = Attachment.objects.select_related("request__mailbox__site_target__site", "site_target__site").get(
        pk=attachment_id)
    if attachment.request.org_id != job.org_id:
        raise DocumentError("attachment belongs to another org")
    kind = attachment.document_type
    if kind in IMPORTABLE:
        report = _importable(attachment) if attachments.waits_for_downstream() else _to_import(attachment, job)
    elif kind == "pdf":
        report = _extract_pdf(attachment)
    elif kind == "body":
        report = _body_text(attachment)
    else:
        raise DocumentError(f"no processing for document type {kind!r}")
    return report


@on_delivered("mailpoll.attachment")
def attachment_delivered(document_id: str) -> None:
    """The downstream has the document: held → done, a CSV / Excel becoming its Import first."""
    attachment = Attachment.objects.select_related("request__mailbox__site_target__site", "site_target__site").filter(
        pk=int(document_id), status=AttachmentStatus.HELD).first()
    if attachment is None:
        log.warning("attachment=%s was delivered downstream but is no longer held; it is left as it is", document_id)
        return
    if attachment.document_type in IMPORTABLE:
        try:
            _to_import(attachment)
        except DocumentError as exc:
            # The downstream has it; only our Import cannot be made (its mailbox lost its site target, say).
            attachments.fail_held(attachment.pk, f"delivered downstream, but not imported: {exc}")
            log.warning("attachment=%s delivered downstream, not imported: %s", attachment.pk, exc)
            return
    attachments.delivered(attachment.pk)


def _import_target(attachment: Attachment):
    """The site target a CSV / Excel attachment is imported into; DocumentError if it cannot be.

    The one its routing decision recorded (mailpoll.routing). A document stored before the rules existed
    has no decision (no route_reason) and keeps its mailbox's target; a decided one never falls back to
    it, so a target deleted since routing fails the document instead of sending it to another site.
    """
    if attachment.document_type == "xls":
        raise DocumentError(OLD_XLS)
    if attachment.route_reason:
        target = attachment.site_target
    else:
        mailbox = attachment.request.mailbox
        target = mailbox.site_target if mailbox else None
    if target is None:
        raise DocumentError("no site target to import this CSV/Excel attachment into")
    if target.site.org_id != attachment.request.org_id:
        raise DocumentError("the site target belongs to another org")
    return target


def _importable(attachment: Attachment) -> dict:
    """Everything the Import will need once the downstream has the document, checked now."""
    _import_target(attachment)
    _verified_bytes(attachment)
    return {"held": "imported once the downstream has it"}


def _to_import(attachment: Attachment, job=None) -> dict:
    """The attachment's Import (its file stored, its job queued); ``job``: the run making it, None once delivered.

    A run that died after making it left it linked: the next run reports that one instead of importing twice.
    """
    from imports.models import ImportOrigin
    from imports.services import create_import

    if attachment.source_import_id is not None:
        return {"import_id": attachment.source_import_id, "job_id": str(attachment.source_import.job_id)}
    target = _import_target(attachment)
    name = attachment.filename
    if not name.lower().endswith((".csv", ".tsv", ".txt", ".xlsx", ".zip")):
        name += ".xlsx" if attachment.document_type == "xlsx" else ".csv"
    data = _verified_bytes(attachment)
    with transaction.atomic():
        imp = create_import(site_target=target, content=ContentFile(data), filename=name, size=len(data),
                            origin=ImportOrigin.EMAIL)
        if job is None:
            Attachment.objects.filter(pk=attachment.pk).update(source_import=imp)
            superseded = False
        else:
            superseded = not attachments.link_import(attachment.pk, job, imp.pk)
            transaction.set_rollback(superseded)
    if superseded:
        imp.file.delete(save=False)  # stored, but its rows were rolled back: the file must not outlive them
        raise Superseded()
    return {"import_id": imp.pk, "job_id": str(imp.job_id)}


def _extract_pdf(attachment: Attachment) -> dict:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    data = _verified_bytes(attachment)
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise DocumentError("the PDF is encrypted")
        text = "\n".join((page.extract_text() or "") for page in reader.pages)
    except (PdfReadError, ValueError, KeyError, TypeError) as exc:
        raise DocumentError(f"the PDF cannot be read: {exc}") from None
    text = text[:MAX_EXTRACTED_CHARS]
    return {"pages": len(reader.pages), "characters": len(text), "fields": {"extracted_text": text}}


def _verified_bytes(attachment: Attachment) -> bytes:
    """The document's bytes, only if they are the ones stored (size and SHA-256 as recorded)."""
    try:
        return storage.read_verified(attachment.file.name, attachment.size, attachment.sha256)
    except storage.DamagedFile as exc:
        raise DocumentError(f"{exc}; it cannot be processed (mail the file again, then retry)") from None


def _body_text(attachment: Attachment) -> dict:
    # The body document is the message's body_text (stored once, on the Request).
    text = attachment.request.body_text.strip()[:MAX_EXTRACTED_CHARS]
    return {"characters": len(text), "fields": {"extracted_text": text}}
