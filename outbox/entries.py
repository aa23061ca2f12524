"""Every move of an outbox entry, through ``outbox.sql``: add, claim, done, failed, retry_now.

- ``add``: (nothing) → waiting, in the transaction that accepts the document, under the document's key
- ``claim``: waiting and due, or sending with an expired lease → sending (a new claim token)
- ``done``: → deleted, after the downstream answered 2xx
- ``failed``: sending (this claim) → waiting, one more attempt, due after ``seoinsight.backoff.doubling``
- ``recovered``: waiting because the downstream was unreachable → waiting, due now (it acknowledged a document)
- ``retry_now``: waiting → waiting, due now (the admin)
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass

from django.db import connection

from seoinsight import backoff

from . import capacity, conf, sql
from .wake import wake

log = logging.getLogger(__name__)

MAX_ERROR_CHARS = 2000

# The namespace of every Idempotency-Key (uuid5 of "seoinsight:outbox:idempotency-key" in the URL namespace).
KEY_NAMESPACE = uuid.UUID("7f57c101-5319-5c2e-a55a-a960ac779011")


class LeaseLost(RuntimeError):
    """The claim this sender holds is gone: its lease expired and another sender re-claimed the entry."""


@dataclass(frozen=True)
class Claimed:
    """One entry as a sender holds it; ``token`` fences its transitions."""

    id: int
    key: uuid.UUID
    org_id: int
    document_ref: str
    document: dict
    file: str
    file_size: int
    file_sha256: str
    attempts: int
    token: uuid.UUID


def idempotency_key(org_id, document_ref: str, content_sha256: str = "") -> uuid.UUID:
    """The Idempotency-Key of a document: the same for every send of it, whichever entry carries it.

    A document held again after it was acknowledged (an operator's Retry of a
    document "delivered downstream, but not imported") is the same document, so
    the downstream records it once. Its content's digest is part of it: an id
    reused for other content (a database restored from an old backup) is
    another document.

    >>> idempotency_key("acme", "mailpoll.attachment:42", "ab") == idempotency_key("acme", "mailpoll.attachment:42", "ab")
    True
    >>> idempotency_key("acme", "mailpoll.attachment:42") == idempotency_key("acme", "mailpoll.attachment:43")
    False
    """
    return uuid.uuid5(KEY_NAMESPACE, f"{org_id}\n{document_ref}\n{content_sha256}")


def add(*, org_id, document_ref: str, source: str, document: dict, file: str = "", file_size: int = 0,
        file_sha256: str = "") -> bool:
    """Hold an accepted document for the downstream; call in the transaction that accepts it.

    Does nothing (False) when the outbox is off (no DOWNSTREAM_URL) or the document is
    held already. Queues a sender in the same transaction, so a sender runs if and
    only if the entry exists.
    """
    if not capacity.enabled():
        return False
    with connection.cursor() as cursor:
        key = idempotency_key(org_id, document_ref, file_sha256 or str(document.get("sha256") or ""))
        cursor.execute(sql.ADD, {"key": key, "org_id": org_id, "document_ref": document_ref, "source": source,
                                 "document": json.dumps(document), "file": file, "file_size": file_size,
                                 "file_sha256": file_sha256})
        added = cursor.fetchone() is not None
    if added:
        wake()
    return added


def claim(worker: str) -> Claimed | None:
    """Take one due entry (or one whose lease expired) for ``worker``; None if none is claimable now."""
    with connection.cursor() as cursor:
        cursor.execute(sql.CLAIM, {"worker": worker[:200], "lease": float(conf.get("OUTBOX_LEASE_SECONDS"))})
        row = cursor.fetchone()
    if row is None:
        return None
    pk, key, org_id, ref, document, file, size, sha256, attempts, token = row
    if isinstance(document, str):
        document = json.loads(document)
    return Claimed(pk, key, org_id, ref, document, file, size, sha256, attempts, token)


def done(entry: Claimed) -> bool:
    """The downstream has it (2xx): delete the entry. False if it was gone already (another sender's 2xx)."""
    with connection.cursor() as cursor:
        cursor.execute(sql.DONE, {"id": entry.id})
        return cursor.rowcount == 1


def failed(entry: Claimed, error: str, *, unreachable: bool = False) -> float:
    """This try failed: count it, keep ``error``, release the claim; returns the delay before the next try.

    ``unreachable``: the downstream did not answer (or answered that it is unavailable), as opposed to
    refusing this document; such an entry is due again at the downstream's next success (``recovered``).

    Raises LeaseLost if this sender no longer holds the claim (its lease expired
    and another sender took the entry): that sender's try is the one that counts.
    """
    wait = backoff.doubling(entry.attempts + 1, float(conf.get("OUTBOX_RETRY_BASE_SECONDS")),
                       float(conf.get("OUTBOX_RETRY_MAX_SECONDS")))
    with connection.cursor() as cursor:
        cursor.execute(sql.FAILED, {"id": entry.id, "token": entry.token, "delay": wait,
                                    "error": (error or "failed")[:MAX_ERROR_CHARS], "unreachable": unreachable})
        if cursor.rowcount != 1:
            raise LeaseLost(f"outbox entry {entry.id} is no longer claimed by this sender")
    return wait


def recovered() -> int:
    """The downstream acknowledged a document: entries waiting only for it to come back are due now; how many."""
    with connection.cursor() as cursor:
        cursor.execute(sql.RECOVERED)
        return cursor.rowcount


def retry_now(ids) -> list[int]:
    """Waiting entries among ``ids`` due at once; returns those moved (one being sent is left alone)."""
    with connection.cursor() as cursor:
        cursor.execute(sql.RETRY_NOW, {"ids": list(ids)})
        return sorted(pk for (pk,) in cursor.fetchall())


def next_due_in() -> float | None:
    """Seconds until an entry can be claimed (0 or less: now); None when the outbox is empty."""
    with connection.cursor() as cursor:
        cursor.execute(sql.NEXT_DUE_IN)
        (seconds,) = cursor.fetchone()
    return float(seconds) if seconds is not None else None


def due_count() -> int:
    """Entries claimable now (due, or their lease expired)."""
    with connection.cursor() as cursor:
        cursor.execute(sql.DUE_COUNT)
        return int(cursor.fetchone()[0])
