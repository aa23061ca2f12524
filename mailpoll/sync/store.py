"""Storing fetched messages: parse, dedup, triage, write files, insert rows, queue jobs.

A fetched batch is stored in one transaction of two statements: the Requests
with their Attachment rows (``sql.INSERT_MESSAGES``), then one
``process_attachment`` job per document (``enqueue_many``). The UNIQUE
(org, source, source_ref) constraint is the dedup authority, through
``ON CONFLICT DO NOTHING``: a message stored first by another poller is
reported as a duplicate and the rest of the batch goes on. One ``SELECT`` per
batch is only a fast path that saves triaging and writing known messages.

A batch succeeds or fails whole. The poller then stores each message of a
failed batch on its own (a batch of one), so a message that cannot be stored
fails alone and the folder's cursor stops right before it.

Files are written before the transaction, named by their SHA-256, whole or not
at all (``seoinsight.storage``: temporary name, fsync, rename): writing the same
content twice is harmless, a file already there is reused only if its size and
hash match, and a file without a row (a crash between the two) is an orphan to
clean, never a row pointing at nothing or at a partial file. A full disk fails
the message (it is not stored, the cursor stays before it) and leaves nothing
behind. A body document is the Request's ``body_text`` and needs no file.

A Request's ``received_at`` is its ``Date:`` header; without a usable one, the time the server received the
message, when the provider handed it over as a ``providers.base.RawMessage`` (INTERNALDATE, Gmail's
``internalDate``, Graph's ``receivedDateTime``); else NULL.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone

from outbox import capacity as outbox_capacity
from seoinsight import storage

from . import sql
from ..attachments import enqueue_processing
from ..message.headers import dedup_ref
from ..models import AttachmentKind, AttachmentStatus, PostAction, RequestStatus
from ..message.parse import ParsedMessage, UnparseableMessage, parse_headers, parse_message
from ..message.triage import triage
from ..providers.base import received_by_server
from ..routing.decide import IGNORE, ROUTE, TRIAGE, AfterStore, Decision
from ..routing.router import Router

log = logging.getLogger("mailpoll.store")  # its name before the move: operators grep it

# A stored document is on its way to the outbox until its run holds it: intake's gate counts it (outbox.capacity).
outbox_capacity.count_on_the_way("mailpoll.attachment", sql.DOCUMENTS_ON_THEIR_WAY)

DUPLICATE = "duplicate"
STATEMENT_TEXT_BUDGET = 16 * 1024 * 1024  # characters of text per INSERT_MESSAGES statement


@dataclass(frozen=True)
class Stored:
    request_id: int | None
    created: bool  # False: another poller (or an earlier tick) already stored it
    status: str  # accepted | rejected | duplicate


@dataclass
class _Row:
    """One Request to insert, with its attachment rows (column name -> value)."""

    uid: int | str | None  # an IMAP UID, or an API provider's message id
    source_ref: str
    status: str
    reject_reason: str = ""
    sender: str = ""
    subject: str = ""
    received_at: datetime | None = None
    body_text: str = ""
    size: int = 0
    recipients: list[str] = field(default_factory=list)
    auth_results: list[str] = field(default_factory=list)
    attachments: list[dict] = field(default_factory=list)
    after: AfterStore | None = None  # its post-action at the source mailbox, inserted with it


def save_content(content: bytes) -> tuple[str, str]:
    """Store bytes under their hash (``mail/<2 hex>/<sha256>``); returns (storage name, sha256). Idempotent."""
    return storage.save_content("mail", content)


def store_messages(mailbox, folder: str, fetched: list[tuple[int | str | None, bytes]], *,
                   uidvalidity: int | None = None) -> list[Stored]:
    """Store a fetched batch of ``(uid, raw)`` in one transaction; one outcome per message, in order.

    ``uid`` is an IMAP UID (an int) or an API provider's message id (a str, kept as ``provider_ref``);
    ``uidvalidity`` is the folder's, for IMAP UIDs: without it a message gets no post-action (its UID
    would not say which message to act on).

    An unparseable message becomes a rejected Request; a message seen before
    (in this org, or earlier in the batch) is a duplicate.
    """
    parsed: list[ParsedMessage | _Row] = []
    for uid, raw in fetched:
        try:
            parsed.append(parse_message(raw))
        except UnparseableMessage as exc:
            # Its header block may still say who sent what: decoded as an accepted message's, same name too.
            head = parse_headers(raw)
            parsed.append(_Row(uid, dedup_ref(head.message_id, raw), RequestStatus.REJECTED,
                               reject_reason=f"unparseable message: {exc}", sender=head.sender, subject=head.subject,
                               received_at=head.date or received_by_server(raw), size=len(raw)))
    seen = stored_refs(mailbox.org_id, [message.source_ref for message in parsed])
    router = None  # the org's rules, read once a new message needs them
    rows: list[_Row | None] = []  # None: a duplicate, known before inserting
    for (uid, raw), message in zip(fetched, parsed, strict=False):
        if message.source_ref in seen:
            rows.append(None)
            continue
        seen.add(message.source_ref)
        if isinstance(message, _Row):
            rows.append(message)
            continue
        router = router or Router.for_mailbox(mailbox)
        rows.append(_accepted(uid, raw, message, router, folder))
    inserting = [row for row in rows if row is not None]
    return _outcomes(mailbox, folder, rows, _insert(mailbox, folder, inserting, uidvalidity))


def store_message(mailbox, folder: str, uid: int | None, raw: bytes, *, uidvalidity: int | None = None) -> Stored:
    """One message on its own: a batch of one."""
    return store_messages(mailbox, folder, [(uid, raw)], uidvalidity=uidvalidity)[0]


def store_oversized(mailbox, folder: str, uid: int | str | None, size: int, headers: bytes, limit: int) -> Stored:
    """A message over the size limit, known by its size and header block only: a rejected Request.

    Its sender, subject and dedup name are decoded exactly as an accepted message's are; without a
    Message-ID the name hashes the headers and the size, so the same message is still one Request.
    """
    parsed = parse_headers(headers)
    source_ref = dedup_ref(parsed.message_id, headers + str(size).encode())
    return store_rejected(mailbox, folder, uid, source_ref, f"message is {size:,} bytes, over the {limit:,}-byte limit",
                          size=size, sender=parsed.sender, subject=parsed.subject,
                          received=parsed.date or received_by_server(headers))


def store_rejected(mailbox, folder: str, uid: int | str | None, source_ref: str, reason: str, *, size: int = 0,
                   sender: str = "", subject: str = "", received: datetime | None = None) -> Stored:
    """Record a message we cannot take in, with the reason: it is visible, never silently skipped."""
    row = _Row(uid, source_ref[:300], RequestStatus.REJECTED, reject_reason=reason, size=size,
               sender=sender[:500], subject=subject[:1000], received_at=received)
    return _outcomes(mailbox, folder, [row], _insert(mailbox, folder, [row]))[0]


def _outcomes(mailbox, folder: str, rows: list[_Row | None], ids: dict[str, int]) -> list[Stored]:
    """One Stored per row (None: a duplicate known before inserting); rejections are logged, by uid."""
    outcomes = []
    for row in rows:
        if row is None or row.source_ref not in ids:
            outcomes.append(Stored(None, False, DUPLICATE))
            continue
        if row.status == RequestStatus.REJECTED:
            log.warning("mailbox=%s folder=%s uid=%s rejected: %s", mailbox.pk, folder, row.uid, row.reject_reason)
        outcomes.append(Stored(ids[row.source_ref], True, row.status))
    return outcomes


def stored_refs(org_id: str, refs: list[str]) -> set[str]:
    """Which of these source_refs the org already has (the fast path, not the authority)."""
    if not refs:
        return set()
    with connection.cursor() as cursor:
        cursor.execute(sql.STORED_REFS, {"org_id": org_id, "refs": [ref[:300] for ref in refs]})
        return {ref for (ref,) in cursor.fetchall()}


def _accepted(uid: int | None, raw: bytes, message: ParsedMessage, router: Router, folder: str) -> _Row:
    """Triage a new message, route its documents and write their files: the row to insert."""
    plan = triage(message)
    row = _Row(uid, message.source_ref[:300], RequestStatus.ACCEPTED, sender=message.sender[:500],
               subject=message.subject[:1000], received_at=message.date or received_by_server(raw),
               body_text=message.body_text, size=len(raw), recipients=list(message.recipients),
               auth_results=list(message.auth_results))
    envelope = router.envelope(folder=folder, sender=message.sender, recipients=message.recipients,
                               subject=message.subject, auth_results=message.auth_results)
    decisions = []
    for document in plan.documents:
        decision = router.decide(envelope, document.original_filename or document.filename, document.kind)
        decisions.append(decision)
        if document.kind == "body":
            name, digest = "", hashlib.sha256(document.content).hexdigest()
            kind = AttachmentKind.BODY
        else:
            name, digest = save_content(document.content)
            kind = AttachmentKind.FILE
        row.attachments.append(_attachment(
            kind=kind, document_type=document.kind, filename=document.filename,
            original_filename=document.original_filename or document.filename, mime=document.mime,
            size=len(document.content), sha256=digest, file=name, context_text=document.context_text,
            **_routed(decision),
        ))
    for skipped in plan.skipped:
        row.attachments.append(_attachment(
            kind=AttachmentKind.FILE, filename=skipped.filename,
            original_filename=skipped.original_filename or skipped.filename, mime=skipped.mime, size=skipped.size,
            status=AttachmentStatus.SKIPPED, skip_reason=skipped.reason,
        ))
    row.after = router.after_store(decisions)
    return row


def _routed(decision: Decision) -> dict:
    """The attachment columns of a routing decision: pending with its target, skipped, or waiting for a person."""
    status = {ROUTE: AttachmentStatus.PENDING, IGNORE: AttachmentStatus.SKIPPED,
              TRIAGE: AttachmentStatus.NEEDS_ROUTE}[decision.action]
    return {"status": status, "skip_reason": decision.reason if decision.action == IGNORE else "",
            "site_target_id": decision.target_id, "rule_id": decision.rule_id, "rule_name": decision.rule_name,
            "route_reason": decision.reason}


def _attachment(*, kind, filename, original_filename, mime, size, status, document_type="", sha256="", file="",
                skip_reason="", context_text="", site_target_id=None, rule_id=None, rule_name="",
                route_reason="") -> dict:
    return {
        "kind": kind, "document_type": document_type, "filename": filename[:255],
        "original_filename": original_filename[:500], "mime": mime[:255], "size": size, "sha256": sha256,
        "file": file, "status": status, "skip_reason": skip_reason[:300], "context_text": context_text,
        "site_target_id": site_target_id, "rule_id": rule_id, "rule_name": rule_name[:100],
        "route_reason": route_reason[:300],
    }


_REQUEST_ARRAYS = {
    "source_refs": "source_ref", "statuses": "status", "reject_reasons": "reject_reason",
    "senders": "sender", "subjects": "subject", "received_ats": "received_at", "bodies": "body_text",
    "sizes": "size",
}
_ATTACHMENT_ARRAYS = {
    "a_kinds": "kind", "a_document_types": "document_type", "a_filenames": "filename",
    "a_original_filenames": "original_filename", "a_mimes": "mime", "a_sizes": "size", "a_sha256s": "sha256",
    "a_files": "file", "a_statuses": "status", "a_skip_reasons": "skip_reason", "a_context_texts": "context_text",
    "a_site_target_ids": "site_target_id", "a_rule_ids": "rule_id", "a_rule_names": "rule_name",
    "a_route_reasons": "route_reason",
}


def _insert(mailbox, folder: str, rows: list[_Row], uidvalidity: int | None = None) -> dict[str, int]:
    """Insert the rows, their post-actions and their documents' jobs; returns {source_ref: request id} inserted."""
    if not rows:
        return {}
    ids, pending = {}, []
    with transaction.atomic():
        for chunk in _chunks(rows):
            with connection.cursor() as cursor:
                cursor.execute(sql.INSERT_MESSAGES, _params(mailbox, folder, chunk))
                for what, row_id, value in cursor.fetchall():
                    if what == "request":
                        ids[value] = row_id
                    elif value == AttachmentStatus.PENDING:
                        pending.append(row_id)
        enqueue_processing(mailbox.org_id, pending)
        # In the same transaction: a post-action exists exactly when its message's documents are stored.
        PostAction.objects.bulk_create(_post_actions(mailbox, folder, rows, ids, uidvalidity))
    return ids


def _post_actions(mailbox, folder: str, rows: list[_Row], ids: dict[str, int], uidvalidity: int | None):
    now = timezone.now()
    for row in rows:
        if row.after is None or row.source_ref not in ids:
            continue
        if isinstance(row.uid, int):
            if uidvalidity is None:
                continue  # a UID without its UIDVALIDITY names no message for sure: leave the message alone
            where = {"uid": row.uid, "uidvalidity": uidvalidity}
        elif row.uid:
            where = {"provider_ref": row.uid}
        else:
            continue
        yield PostAction(request_id=ids[row.source_ref], mailbox_id=mailbox.pk, folder=folder,
                         action=row.after.action, destination=row.after.destination,
                         decided_by=row.after.decided_by[:120], next_try_at=now, **where)


def _chunks(rows: list[_Row]):
    """The rows in runs of at most STATEMENT_TEXT_BUDGET characters of text (one row may exceed it alone).

    The statement carries its values inline; this keeps a batch of long bodies,
    each copied as context onto many documents, from becoming one huge query.
    """
    chunk, size = [], 0
    for row in rows:
        weight = len(row.body_text) + sum(len(a["context_text"]) + 1000 for a in row.attachments) + 1000
        if chunk and size + weight > STATEMENT_TEXT_BUDGET:
            yield chunk
            chunk, size = [], 0
        chunk.append(row)
        size += weight
    if chunk:
        yield chunk


def _params(mailbox, folder: str, rows: list[_Row]) -> dict:
    params = {"org_id": mailbox.org_id, "mailbox_id": mailbox.pk, "folder": folder}
    params.update({name: [getattr(row, column) for row in rows] for name, column in _REQUEST_ARRAYS.items()})
    # Where the message was at its server: Request.uid for IMAP's integers, provider_ref for an API's ids.
    params["uids"] = [row.uid if isinstance(row.uid, int) else None for row in rows]
    params["provider_refs"] = [row.uid if isinstance(row.uid, str) else "" for row in rows]
    params["recipients"] = [json.dumps(row.recipients) for row in rows]
    params["auth_results"] = [json.dumps(row.auth_results) for row in rows]
    attachments = [(row.source_ref, attachment) for row in rows for attachment in row.attachments]
    params["a_source_refs"] = [ref for ref, _ in attachments]
    params.update({name: [a[column] for _, a in attachments] for name, column in _ATTACHMENT_ARRAYS.items()})
    return params
