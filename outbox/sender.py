"""Sending held documents to the downstream: one try per claimed entry, then done or failed.

A try is one POST to DOWNSTREAM_URL with ``Idempotency-Key: <entry key>`` (the
same on every try, so the downstream records a document once however often it
arrives: delivery is at least once) and, with DOWNSTREAM_TOKEN, ``Authorization:
Bearer <token>``; redirects are not followed, so the token reaches that URL's
host only. The body is the document's JSON; with a
file it is multipart (part ``document``: the JSON, part ``file``: the bytes,
read through ``seoinsight.storage.read_verified``). Every request has a
timeout (DOWNSTREAM_TIMEOUT, to connect and per silence while answering): a
downstream that hangs fails the try instead of holding the sender.

``run`` is one sender (the ``deliver_outbox`` job): it holds one of
OUTBOX_SENDERS slots (a session advisory lock, freed if its process dies), so
senders never take all the workers while the downstream is down.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, field

import requests
from django.db import connection, transaction

from seoinsight import storage

from . import conf, delivered, entries, sql
from .entries import Claimed, LeaseLost
from .wake import wake

log = logging.getLogger(__name__)

# A sleeping sender looks at the table again at least this often (a retry made due by the admin).
MAX_NAP = 1.0


class DeliveryError(Exception):
    """The downstream did not acknowledge the document; the message says what it answered."""


@dataclass
class Report:
    delivered: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"delivered": self.delivered, "failed": self.failed, "errors": self.errors[:5]}


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


def post(entry: Claimed, session: requests.Session | None = None) -> requests.Response:
    """One try: the document (and its file) to DOWNSTREAM_URL; raises DeliveryError unless it answers 2xx."""
    url = str(conf.get("DOWNSTREAM_URL")).strip()
    timeout = float(conf.get("DOWNSTREAM_TIMEOUT"))
    headers = {"Idempotency-Key": str(entry.key)}
    token = str(conf.get("DOWNSTREAM_TOKEN")).strip()
    if token:
        headers["Authorization"] = f"Bearer {token}"
    http = session or requests
    # No redirects: the token goes to DOWNSTREAM_URL's host and nowhere else, and a document is registered
    # only by a 2xx from that URL (a 3xx fails the try, and says where it pointed).
    send = {"headers": headers, "timeout": (timeout, timeout), "allow_redirects": False}
    try:
        if entry.file:
            data = storage.read_verified(entry.file, entry.file_size, entry.file_sha256)
            document = json.dumps(entry.document)
            files = {"document": (None, document, "application/json"),
                     "file": (entry.document.get("filename") or "document", data,
                              entry.document.get("mime") or "application/octet-stream")}
            response = http.post(url, files=files, **send)
        else:
            response = http.post(url, json=entry.document, **send)
    except storage.DamagedFile as exc:
        raise DeliveryError(str(exc)) from None
    except requests.RequestException as exc:
        raise DeliveryError(f"{type(exc).__name__}: {exc}") from None
    if 300 <= response.status_code < 400:
        raise DeliveryError(f"HTTP {response.status_code}: redirected to {response.headers.get('Location', '?')!r}, "
                            "which is not followed (set DOWNSTREAM_URL to where documents are accepted)")
    if not 200 <= response.status_code < 300:
        raise DeliveryError(f"HTTP {response.status_code}: {response.text[:300]}")
    return response


def deliver_one(entry: Claimed, report: Report, session=None) -> None:
    """Try ``entry`` once and record the outcome (done or failed)."""
    try:
        post(entry, session)
    except DeliveryError as exc:
        try:
            wait = entries.failed(entry, str(exc))
        except LeaseLost:
            log.warning("outbox entry=%s try failed after its claim expired (another sender has it): %s",
                        entry.id, exc)
            return
        report.failed += 1
        report.errors.append(str(exc)[:200])
        log.warning("outbox entry=%s %s org=%s try %s failed, next in %.1f s: %s", entry.id,
                    entry.document_ref, entry.org_id, entry.attempts + 1, wait, exc)
        return
    try:
        # Deleted only now, after the 2xx: acknowledged, then deleted (seed 004). The document moves on in
        # the same transaction, and only for the sender whose delete removed the row (one follow-up per entry).
        with transaction.atomic():
            if entries.done(entry):
                delivered.follow_up(entry.document_ref)
    except Exception as exc:
        # Rolled back: the entry stays, and is sent again (the same key: the downstream records it once).
        log.exception("outbox entry=%s %s org=%s was delivered but what follows failed; it will be sent again",
                      entry.id, entry.document_ref, entry.org_id)
        try:
            entries.failed(entry, f"delivered, but recording the delivery failed: {type(exc).__name__}: {exc}")
        except LeaseLost:
            pass  # another sender has the entry now, and will send it again itself
        report.failed += 1
        report.errors.append(f"after delivery: {exc}"[:200])
        return
    report.delivered += 1
    log.info("outbox entry=%s %s org=%s delivered (key %s)", entry.id, entry.document_ref, entry.org_id, entry.key)


def run(budget: float | None = None, worker: str | None = None) -> dict:
    """One sender: send what is due, wait for retries due within ``budget`` seconds, end when there is none.

    ``budget`` defaults to OUTBOX_SENDER_SECONDS (0: send what is due now, then end).
    Returns a report; ``{"skipped": ...}`` when every sender slot is taken.
    """
    budget = float(conf.get("OUTBOX_SENDER_SECONDS")) if budget is None else budget
    worker = worker or worker_name()
    slot = _take_slot()
    if slot is None:
        return {"skipped": "every sender slot is taken"}
    report = Report()
    deadline = time.monotonic() + budget
    fanned_out = False
    try:
        with requests.Session() as session:
            while True:
                entry = entries.claim(worker)
                if entry is not None:
                    if not fanned_out:
                        # More due than this sender alone sends: queue one more (it takes a free slot, or ends).
                        fanned_out = True
                        if entries.due_count() > 0:
                            wake(entry.org_id)
                    deliver_one(entry, report, session)
                    continue
                due_in = entries.next_due_in()
                if due_in is None or time.monotonic() + max(due_in, 0) > deadline:
                    break
                time.sleep(min(max(due_in, 0.05), MAX_NAP))
    finally:
        _release_slot(slot)
    # A wake that came while this sender held the last slot found none free and ended: look once more.
    if entries.due_count() > 0:
        org_id = _any_org()
        if org_id is not None:
            wake(org_id)
    return report.as_dict()


def _take_slot() -> int | None:
    with connection.cursor() as cursor:
        for slot in range(int(conf.get("OUTBOX_SENDERS"))):
            cursor.execute(sql.TRY_SLOT, {"namespace": sql.SENDER_LOCK_NAMESPACE, "slot": slot})
            if cursor.fetchone()[0]:
                return slot
    return None


def _release_slot(slot: int) -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql.RELEASE_SLOT, {"namespace": sql.SENDER_LOCK_NAMESPACE, "slot": slot})
    except Exception:
        # The connection is broken: its session, and with it the lock, is gone already.
        log.warning("outbox sender slot %s: could not unlock (connection lost; the lock went with it)", slot)


def _any_org():
    from .models import Entry

    return Entry.objects.values_list("org_id", flat=True).first()
