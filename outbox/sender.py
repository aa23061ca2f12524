"""Sending held documents to the downstream: one try per claimed entry, then done or failed.

A try is one POST to DOWNSTREAM_URL with ``Idempotency-Key: <the document's key>``
(the same on every try and every send of the document, so the downstream
records a document once however often it arrives: delivery is at least once)
and, with DOWNSTREAM_TOKEN, ``Authorization: Bearer <token>``; redirects are not
followed, so the token reaches that URL's host only. The body is the document's
JSON; with a file it is multipart (part ``document``: the JSON, part ``file``:
the bytes, read through ``seoinsight.storage.read_verified``). Every request has
a timeout (DOWNSTREAM_TIMEOUT, to connect and per silence while answering): a
downstream that hangs fails the try instead of holding the sender.

Of an answer only the status is used, and of an error at most REASON_BYTES for
its reason; the rest of a short answer (KEEP_BYTES) is read only so that its
connection serves the next try, a longer one is closed unread: no answer can
grow the worker. An
error's text names the downstream's origin only (``seoinsight.outbound``): a key
in DOWNSTREAM_URL's query never reaches last_error, a log line or a page.

A try the downstream did not answer (or answered 502 / 503 / 504) marks its entry
``unreachable``; the downstream's next 2xx makes every such entry due at once
(``entries.recovered``), so a document never waits out its backoff for a
downstream that is back.

``run`` is one sender (the ``deliver_outbox`` job): it holds one of
OUTBOX_SENDERS slots (a session advisory lock, freed if its process dies), so
senders never take all the workers while the downstream is down. It claims
until its budget (OUTBOX_SENDER_SECONDS) is spent or its worker is stopping —
a SIGTERM costs at most the try under way — and waits only for retries due
within the budget; what is left is a successor's (woken as it ends) or, due
later, the periodic duty's (``outbox.watch``). Its report is counts only: it
serves every org, and its job is visible to superusers alone anyway.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass

import requests
from django.db import connection, transaction

from seoinsight import outbound, storage

from . import conf, delivered, entries, sql
from .entries import Claimed, LeaseLost
from .wake import wake

log = logging.getLogger(__name__)

# A sleeping sender looks at the table again at least this often (a retry made due by the admin).
MAX_NAP = 1.0
# The most of an error answer read for its reason; the rest is never read (the connection is closed).
REASON_BYTES = 2048
# The most of an answer read only to keep its connection for the next try.
KEEP_BYTES = 64 * 1024
REASON_CHARS = 300
# Answers that say the downstream is not there right now (a proxy in front of it, or it is overloaded), as
# opposed to refusing this document: its next success makes such an entry due again (entries.recovered).
UNAVAILABLE = (502, 503, 504)


class DeliveryError(Exception):
    """The downstream did not acknowledge the document; the message says what it answered.

    ``unreachable``: it did not answer at all, or answered UNAVAILABLE, rather than refusing the document.
    """

    def __init__(self, message: str, *, unreachable: bool = False):
        super().__init__(message)
        self.unreachable = unreachable


@dataclass
class Report:
    """What one sender did, in counts: its job serves every org, so it names no document."""

    delivered: int = 0
    failed: int = 0

    def as_dict(self) -> dict:
        return {"delivered": self.delivered, "failed": self.failed}


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


def post(entry: Claimed, session: requests.Session | None = None) -> None:
    """One try: the document (and its file) to DOWNSTREAM_URL; raises DeliveryError unless it answers 2xx.

    The error names the downstream's origin only: no path, and none of the URL's query values anywhere in it.
    """
    url = str(conf.get("DOWNSTREAM_URL")).strip()
    try:
        _post(url, entry, session)
    except DeliveryError as exc:
        raise DeliveryError(outbound.hide_query(str(exc), url), unreachable=exc.unreachable) from None


def _post(url: str, entry: Claimed, session: requests.Session | None) -> None:
    timeout = float(conf.get("DOWNSTREAM_TIMEOUT"))
    headers = {"Idempotency-Key": str(entry.key)}
    token = str(conf.get("DOWNSTREAM_TOKEN")).strip()
    if token:
        headers["Authorization"] = f"Bearer {token}"
    http = session or requests
    # No redirects: the token goes to DOWNSTREAM_URL's host and nowhere else, and a document is registered
    # only by a 2xx from that URL (a 3xx fails the try, and says to which host it pointed).
    # Streamed: the status is read, the body only as far as an error's reason.
    send = {"headers": headers, "timeout": (timeout, timeout), "allow_redirects": False, "stream": True}
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
        raise DeliveryError(outbound.describe(exc), unreachable=True) from None
    try:
        outbound.refuse_redirect(response, "the downstream")
        if not 200 <= response.status_code < 300:
            raise DeliveryError(f"HTTP {response.status_code}: {reason(response)}",
                                unreachable=response.status_code in UNAVAILABLE)
    except outbound.RedirectRefused as exc:
        raise DeliveryError(f"{exc} (set DOWNSTREAM_URL to where documents are accepted)") from None
    finally:
        done_with(response)


def done_with(response) -> None:
    """Read what is left of a small answer, so its connection serves the next try; close it on a large one.

    An acknowledgement is a few bytes: reading them keeps the connection (and, over https, its TLS session)
    in the session's pool, instead of a new handshake per document. Past KEEP_BYTES the rest is never read.
    """
    left = KEEP_BYTES
    try:
        for chunk in response.iter_content(chunk_size=8192):
            left -= len(chunk)
            if left < 0:
                break
    except Exception:
        pass  # the downstream broke off mid-answer: the connection is closed below
    response.close()  # returns a fully read connection to the pool, closes any other


def reason(response) -> str:
    """The start of an error answer, as one line with no URL's path or query; at most REASON_BYTES are read."""
    try:
        raw = response.raw.read(REASON_BYTES, decode_content=False) or b""
    except Exception as exc:  # the downstream closed or stalled mid-answer: its status is the reason
        return f"(its answer could not be read: {type(exc).__name__})"
    text = raw.decode("utf-8", errors="replace")
    return outbound.scrub(" ".join(text.split()))[:REASON_CHARS]


def deliver_one(entry: Claimed, report: Report, session=None) -> None:
    """Try ``entry`` once and record the outcome (done or failed)."""
    try:
        post(entry, session)
    except DeliveryError as exc:
        try:
            wait = entries.failed(entry, str(exc), unreachable=exc.unreachable)
        except LeaseLost:
            log.warning("outbox entry=%s try failed after its claim expired (another sender has it): %s",
                        entry.id, exc)
            return
        report.failed += 1
        log.warning("outbox entry=%s %s org=%s try %s failed, next in %.1f s: %s", entry.id,
                    entry.document_ref, entry.org_id, entry.attempts + 1, wait, exc)
        return
    try:
        # Deleted only now, after the 2xx: acknowledged, then deleted. The document moves on in
        # the same transaction, and only for the sender whose delete removed the row (one follow-up per entry).
        with transaction.atomic():
            removed = entries.done(entry)
            if removed:
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
        return
    if not removed:
        # Another sender (this one's lease had expired) got its 2xx first and counted the delivery.
        log.info("outbox entry=%s %s acknowledged again, after another sender's delivery", entry.id,
                 entry.document_ref)
        return
    report.delivered += 1
    log.info("outbox entry=%s %s org=%s delivered (key %s)", entry.id, entry.document_ref, entry.org_id, entry.key)
    # The downstream is there: what waited only for it to come back need not wait out its backoff.
    due_again = entries.recovered()
    if due_again:
        log.info("outbox: the downstream answered again; %s document(s) that found it unreachable are due now",
                 due_again)


def run(budget: float | None = None, worker: str | None = None, stop: threading.Event | None = None) -> dict:
    """One sender: send what is due until ``budget`` seconds are spent or ``stop`` is set, then end.

    ``budget`` defaults to OUTBOX_SENDER_SECONDS; the first claim is always made
    (0: one try), later ones only within the budget, and none once ``stop`` is
    set (the worker is stopping), so a stop costs at most the try under way.
    Retries due within the budget are waited for. Whatever is due when it ends
    is woken for (a successor). Returns counts; ``{"skipped": ...}`` when every
    sender slot is taken.
    """
    budget = float(conf.get("OUTBOX_SENDER_SECONDS")) if budget is None else budget
    worker = worker or worker_name()
    slot = _take_slot()
    if slot is None:
        return {"skipped": "every sender slot is taken"}
    report = Report()
    deadline = time.monotonic() + budget
    fanned_out = False
    tried = 0
    try:
        with requests.Session() as session:
            while not (stop is not None and stop.is_set()):
                if tried and time.monotonic() >= deadline:
                    break
                entry = entries.claim(worker)
                if entry is not None:
                    if not fanned_out:
                        # More due than this sender alone sends: queue one more (it takes a free slot, or ends).
                        fanned_out = True
                        if entries.due_count() > 0:
                            wake()
                    deliver_one(entry, report, session)
                    tried += 1
                    continue
                due_in = entries.next_due_in()
                if due_in is None or time.monotonic() + max(due_in, 0) > deadline:
                    break
                _nap(min(max(due_in, 0.05), MAX_NAP), stop)
    finally:
        _release_slot(slot)
    # Work left that is due now (the budget ran out, the worker is stopping, or a wake came while this sender
    # held the last slot and found none free): a successor. What comes due later is the periodic duty's.
    if entries.due_count() > 0:
        wake()
    return report.as_dict()


def _nap(seconds: float, stop: threading.Event | None) -> None:
    if stop is not None:
        stop.wait(seconds)
    else:
        time.sleep(seconds)


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
