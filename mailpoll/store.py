"""Storing one message: the dedup insert, its attachments, their jobs.

Each message is stored in its own transaction. The Request INSERT runs under a
savepoint and the UNIQUE (org, source, source_ref) constraint decides: if
another poller stored the same message first, the IntegrityError undoes only
that insert and we report a duplicate. The prior SELECT is only a fast path
that saves parsing and writing files.

Files are written before the transaction, named by their SHA-256: writing the
same content twice is harmless, and a file without a row (a crash between the
two) is an orphan to clean, never a row pointing at nothing.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction

from jobs.queue import enqueue

from .models import Attachment, AttachmentKind, AttachmentStatus, Request, RequestStatus
from .parse import UnparseableMessage, parse_message
from .triage import triage

log = logging.getLogger(__name__)

SOURCE = "email"
MAX_BODY_CHARS = 1_000_000  # the body is for people and context; a document travels as a file


@dataclass(frozen=True)
class Stored:
    request_id: int | None
    created: bool  # False: another poller (or an earlier tick) already stored it
    status: str


def raw_ref(raw: bytes) -> str:
    """The source_ref of a message without Message-ID."""
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def already_stored(org_id: str, source_ref: str) -> bool:
    return Request.objects.filter(org_id=org_id, source=SOURCE, source_ref=source_ref).exists()


def save_content(content: bytes) -> tuple[str, str]:
    """Store bytes under their hash; returns (storage name, sha256). Idempotent."""
    digest = hashlib.sha256(content).hexdigest()
    name = f"mail/{digest[:2]}/{digest}"
    if not default_storage.exists(name):
        saved = default_storage.save(name, ContentFile(content))
        if saved != name:
            # Another poller wrote the same content at the same moment: same bytes, keep one.
            default_storage.delete(saved)
    return name, digest


def store_message(mailbox, folder: str, uid: int | None, raw: bytes) -> Stored:
    """Parse, triage and store one message as an accepted Request (or a rejected one if unparseable)."""
    try:
        message = parse_message(raw)
    except UnparseableMessage as exc:
        return store_rejected(mailbox, folder, uid, raw_ref(raw), f"unparseable message: {exc}", size=len(raw))
    if already_stored(mailbox.org_id, message.source_ref):
        return Stored(None, False, "duplicate")

    plan = triage(message)
    files = [(document, *save_content(document.content)) for document in plan.documents]
    with transaction.atomic():
        request = _insert_request(
            mailbox, folder, uid, message.source_ref, status=RequestStatus.ACCEPTED, size=len(raw),
            sender=(message.sender or "")[:500], subject=(message.subject or "")[:1000], received_at=message.date,
            body_text=(message.body_text or "")[:MAX_BODY_CHARS],
        )
        if request is None:
            return Stored(None, False, "duplicate")
        for document, name, digest in files:
            attachment = Attachment.objects.create(
                request=request,
                kind=AttachmentKind.BODY if document.kind == "body" else AttachmentKind.FILE,
                document_type=document.kind, filename=document.filename[:255],
                original_filename=(getattr(document, "original_filename", "") or document.filename)[:500],
                mime=document.mime[:255], size=len(document.content), sha256=digest, file=name,
                context_text=document.context_text or "",
            )
            enqueue("process_attachment", org_id=mailbox.org_id, payload={"attachment_id": attachment.pk},
                    dedup_key=f"process_attachment:{attachment.pk}")
        Attachment.objects.bulk_create([
            Attachment(request=request, kind=AttachmentKind.FILE, filename=skipped.filename[:255],
                       original_filename=(getattr(skipped, "original_filename", "") or skipped.filename)[:500],
                       mime=skipped.mime[:255], size=skipped.size, status=AttachmentStatus.SKIPPED,
                       skip_reason=skipped.reason[:300])
            for skipped in plan.skipped
        ])
    return Stored(request.pk, True, RequestStatus.ACCEPTED)


def store_rejected(mailbox, folder: str, uid: int | None, source_ref: str, reason: str, *, size: int = 0,
                   sender: str = "", subject: str = "") -> Stored:
    """Record a message we cannot take in, with the reason: it is visible, never silently skipped."""
    with transaction.atomic():
        request = _insert_request(mailbox, folder, uid, source_ref, status=RequestStatus.REJECTED,
                                  reject_reason=reason, size=size, sender=sender[:500], subject=subject[:1000])
    if request is None:
        return Stored(None, False, "duplicate")
    log.warning("mailbox=%s folder=%s uid=%s rejected: %s", mailbox.pk, folder, uid, reason)
    return Stored(request.pk, True, RequestStatus.REJECTED)


def _insert_request(mailbox, folder, uid, source_ref, **fields) -> Request | None:
    """The dedup insert: None when the constraint says another poller won."""
    try:
        with transaction.atomic():  # SAVEPOINT: a conflict undoes only this insert
            return Request.objects.create(org_id=mailbox.org_id, source=SOURCE, source_ref=source_ref[:300],
                                          mailbox=mailbox, folder=folder, uid=uid, **fields)
    except IntegrityError:
        return None
