"""Every move of ``Attachment.status``, in one place (as ``jobs.sql`` is for jobs).

- ``start``: pending → processing (its ``process_attachment`` job begins a run), or processing → processing
  for a newer attempt of the job that holds it (its previous run died), or → failed once out of runs
- ``wait_for_disk``: processing (this run) → pending, the run given back: the disk is full, its job retries later
- ``finish``: processing → done, or → held when the downstream outbox is on (its entry in the same transaction)
- ``delivered``: held → done (the downstream acknowledged it; a CSV/Excel becomes its Import then)
- ``fail_held``: held → failed (acknowledged, but what should follow cannot be done)
- ``fail``: pending | processing | failed → failed (its job failed)
- ``release_stuck``: processing, stuck → pending with a new job, or failed once out of runs
- ``link_import``: processing (this run) → processing, its Import recorded (in the Import's transaction)
- ``requeue``: failed → pending (an operator requeued its failed job)
- ``retry_failed``: failed → pending with a new job, attempts from 0 (the admin's Retry)
- ``route``: needs_route → pending with a new job, for the site target an operator chose (the admin's Route to…)
- ``ignore``: needs_route → skipped (the admin's Ignore)

``skipped``, ``needs_route`` and the first ``pending`` are set when the row is inserted
(``mailpoll.sync.store``, by the routing decision); no transition leads out of ``done`` or ``skipped``.

Each transition is one statement conditional on the state it leaves, so two
actors (a worker, the watchdog, an operator) never both move one row: the one
that finds the row no longer where it expected updates nothing. A single-row
transition returns whether it moved the row, for its caller to report; a
set-based one that locked its rows first raises ``TransitionError`` if it moves
fewer than it locked.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field

from django.db import models, transaction
from django.db.models import Q
from django.db.models import F, Value
from django.db.models.functions import Cast, Concat
from django.utils import timezone

from jobs.queue import enqueue_many
from outbox import capacity as outbox_capacity
from outbox import entries as outbox_entries

from . import conf
from .models import Attachment, AttachmentKind, AttachmentStatus

log = logging.getLogger(__name__)

RELEASE = "release"
FAIL = "fail"
MAX_RUNS = 3  # runs an attachment may die in before it is given up (the watchdog's rule and a re-run's)
# What a waiting attachment's error says while its job waits for disk space (mailpoll.handlers).
WAITING_FOR_DISK = "waiting for disk space"


class TransitionError(RuntimeError):
    """A guarded statement moved fewer rows than the ones it had locked: a broken invariant, not a race."""


def after_stuck(attempts: int, max_attempts: int | None) -> str:
    """What becomes of an attachment found stuck in ``processing`` (its worker died) after ``attempts`` runs.

    RELEASE (back to ``pending`` with a new job) while runs are left, FAIL once
    ``max_attempts`` runs have started; ``max_attempts=None`` (an operator's
    Release) never gives up. With a cap of 3: attempts 1 or 2 release, 3
    fails, and 5 (released by hand past the cap) fails at once.
    """
    if max_attempts is not None and attempts >= max_attempts:
        return FAIL
    return RELEASE


def enqueue_processing(org_id: str, attachment_ids: list[int]) -> int:
    """Queue ``process_attachment`` for these pending attachments; call in the transaction that made them so.

    One job per attachment, keyed on it: an attachment already waiting for its job gets no second one.
    """
    return enqueue_many("process_attachment", org_id=org_id, items=[
        ({"attachment_id": pk}, f"process_attachment:{pk}") for pk in attachment_ids
    ])


STARTED, TAKEN_OVER, GIVEN_UP = "started", "taken over", "given up"


def start(pk: int, job) -> str | None:
    """A run of ``job`` (its ``id`` and ``attempts``, the queue's fence) takes the attachment; None if it may not.

    STARTED: pending → processing. TAKEN_OVER: the row is processing for an older attempt of this same job,
    whose run died (kill -9, a lost worker): the newer attempt carries on at once instead of leaving it to the
    watchdog. GIVEN_UP: such a row had died MAX_RUNS times already (``after_stuck``) → failed. None: anything
    else — a row that is not pending, or one another job's run holds (a duplicate job never steals it).
    """
    now = timezone.now()
    run = {"run_job_id": job.id, "run_attempt": job.attempts}
    if Attachment.objects.filter(pk=pk, status=AttachmentStatus.PENDING).update(
            status=AttachmentStatus.PROCESSING, processing_started_at=now, attempts=F("attempts") + 1, **run):
        return STARTED
    with transaction.atomic():
        own = Attachment.objects.select_for_update(of=("self",)).filter(
            pk=pk, status=AttachmentStatus.PROCESSING, run_job_id=job.id, run_attempt__lt=job.attempts,
        ).values_list("attempts", flat=True).first()
        if own is None:
            return None
        if after_stuck(own, MAX_RUNS) == FAIL:
            _move([pk], AttachmentStatus.PROCESSING, status=AttachmentStatus.FAILED, error=_given_up(own))
            log.error("attachment=%s failed: its runs died %s times", pk, own)
            return GIVEN_UP
        _move([pk], AttachmentStatus.PROCESSING, processing_started_at=now, attempts=F("attempts") + 1, **run)
    log.warning("job=%s attempt %s takes attachment=%s over from its previous run, which died", job.id,
                job.attempts, pk)
    return TAKEN_OVER


def _given_up(attempts: int) -> str:
    return f"stuck in processing {attempts} times; given up"


def _this_run(pk: int, job):
    """The row while this run of ``job`` holds it (processing): what a run's own writes are conditional on."""
    return Attachment.objects.filter(pk=pk, status=AttachmentStatus.PROCESSING, run_job_id=job.id,
                                     run_attempt=job.attempts)


def wait_for_disk(pk: int, job, error: str) -> bool:
    """processing (this run) → pending: the disk is full, and ``job`` is retried later; False if not this run's.

    The run is given back (it did not die), the error says what it waits for; the job's retry starts it again.
    """
    return bool(_this_run(pk, job).update(
        status=AttachmentStatus.PENDING, processing_started_at=None, attempts=F("attempts") - 1,
        error=f"{WAITING_FOR_DISK} ({error}); tried again automatically"[:2000]))


def link_import(pk: int, job, import_id: int) -> bool:
    """Record the Import this run made of the attachment; call in the Import's transaction. False if the run
    no longer holds it (a newer attempt took it over): the caller then rolls the Import back."""
    return bool(_this_run(pk, job).filter(source_import__isnull=True).update(source_import_id=import_id))


def waits_for_downstream() -> bool:
    """Whether an accepted document is held for the downstream (a DOWNSTREAM_URL is set) before it moves on."""
    return outbox_capacity.enabled()


def finish(pk: int, job=None, **fields) -> bool:
    """processing → held (outbox on) or done, with the result's ``fields``; False if it was no longer processing.

    ``job``: the run that finishes, whose hold it must still be (a run a newer attempt took over records
    nothing); None for a caller outside any run.

    The document is accepted here: with a DOWNSTREAM_URL it is held, and its
    outbox entry written in the same transaction (written down first,
    it survives); ``delivered`` moves it on once the downstream has it.
    """
    if not waits_for_downstream():
        return _record_result(pk, job, AttachmentStatus.DONE, fields)  # one statement: no transaction of its own
    with transaction.atomic():
        moved = _record_result(pk, job, AttachmentStatus.HELD, fields)
        if moved:
            _hold_for_downstream(Attachment.objects.select_related("request__mailbox").get(pk=pk))
    return moved


def _record_result(pk: int, job, status: str, fields: dict) -> bool:
    # A run the watchdog or an operator gave up on meanwhile (released or failed) does not overwrite that.
    rows = _this_run(pk, job) if job is not None else Attachment.objects.filter(
        pk=pk, status=AttachmentStatus.PROCESSING)
    return bool(rows.update(status=status, error="", **fields))


def delivered(pk: int) -> bool:
    """held → done: the downstream acknowledged it; False if the row was not held."""
    # Called once per entry, in the transaction that deletes the acknowledged entry (outbox.delivered).
    return bool(Attachment.objects.filter(pk=pk, status=AttachmentStatus.HELD).update(status=AttachmentStatus.DONE))


def fail_held(pk: int, error: str) -> bool:
    """held → failed: the downstream has it, but what was waiting for that cannot be done; False if not held."""
    # An operator's Retry (failed → pending) runs it again and holds it anew.
    return bool(Attachment.objects.filter(pk=pk, status=AttachmentStatus.HELD).update(
        status=AttachmentStatus.FAILED, error=(error or "failed")[:2000]))


def downstream_document(attachment: Attachment) -> dict:
    """The JSON body the downstream receives for an accepted document (the file goes beside it)."""
    request = attachment.request
    return {
        "source": request.source,
        "org": str(request.org_id),
        "mailbox": {"id": request.mailbox_id, "name": request.mailbox.name if request.mailbox else ""},
        "message_id": request.source_ref,
        # Where the message is at its server: an API's message id, or the folder and IMAP UID.
        "provider_message_id": request.provider_ref or (f"{request.folder}:{request.uid}" if request.uid else ""),
        "sender": request.sender,
        "subject": request.subject,
        # The message's date, or when intake stored it if it carried none.
        "received_at": (request.received_at or request.created_at).isoformat(),
        "document_type": attachment.document_type,
        "filename": attachment.original_filename or attachment.filename,
        "mime": attachment.mime,
        "size": attachment.size,
        "sha256": attachment.sha256,
        # A body document's text is the body; a PDF's the extracted text; a CSV/Excel has none (an Import).
        "text": attachment.extracted_text,
        "context_text": attachment.context_text,
    }


def _hold_for_downstream(attachment: Attachment) -> None:
    has_file = attachment.kind == AttachmentKind.FILE and bool(attachment.file.name)
    outbox_entries.add(org_id=attachment.request.org_id, document_ref=f"mailpoll.attachment:{attachment.pk}",
                       source=attachment.request.source, document=downstream_document(attachment),
                       file=attachment.file.name if has_file else "", file_size=attachment.size if has_file else 0,
                       file_sha256=attachment.sha256 if has_file else "")


def fail(pk: int, error: str, job_id=None) -> bool:
    """pending | processing | failed → failed with ``error``; False if the row is done, skipped or gone.

    ``job_id``: the job that failed; a row another job's run is processing is not its to fail.
    """
    # Its job failed; a row that finished (done) or was never work (skipped) keeps its outcome.
    others = ~Q(status=AttachmentStatus.PROCESSING) | Q(run_job_id__isnull=True) | Q(run_job_id=job_id)
    return bool(Attachment.objects.filter(
        others if job_id is not None else Q(),
        pk=pk, status__in=[AttachmentStatus.PENDING, AttachmentStatus.PROCESSING, AttachmentStatus.FAILED],
    ).update(status=AttachmentStatus.FAILED, error=(error or "failed")[:2000]))


def requeue(pk: int) -> bool:
    """failed → pending, attempts kept (an operator requeued its job); False if the row was not failed."""
    # Only a failed row comes back: one that an operator retried meanwhile already has its own job.
    return bool(Attachment.objects.filter(pk=pk, status=AttachmentStatus.FAILED).update(
        status=AttachmentStatus.PENDING, error="", processing_started_at=None))


def retry_failed(ids) -> list[int]:
    """Failed attachments among ``ids`` back to ``pending`` with a new job; attempts start again from 0.

    Returns those moved; a row among ``ids`` that is not failed is left alone.
    """
    with transaction.atomic():
        rows = _lock(Attachment.objects.filter(pk__in=ids, status=AttachmentStatus.FAILED))
        # Guarded by status although locked: a shortfall would mean the lock did not hold.
        _move(rows, AttachmentStatus.FAILED, status=AttachmentStatus.PENDING, processing_started_at=None,
              attempts=0, error="")
        _enqueue(rows)
    return sorted(rows)


def route(ids, target, *, by: str) -> list[int]:
    """Attachments among ``ids`` waiting for a site (``needs_route``) → pending for ``target``, each with its job.

    Returns those moved. Two operators routing the same attachment at once: the
    row locks order them, and the second finds it no longer waiting, so it is
    imported once, into the first one's choice. Only attachments of the target's
    org move; ``by`` names who decided, for the history.
    """
    with transaction.atomic():
        rows = _lock(Attachment.objects.filter(
            pk__in=ids, status=AttachmentStatus.NEEDS_ROUTE, request__org_id=target.site.org_id))
        _move(rows, AttachmentStatus.NEEDS_ROUTE, status=AttachmentStatus.PENDING, site_target=target,
              rule=None, rule_name="", route_reason=f"routed by {by}"[:300])
        _enqueue(rows)
    for pk in sorted(rows):
        log.info("attachment=%s routed to site target %s by %s", pk, target.pk, by)
    return sorted(rows)


def ignore(ids, *, by: str) -> list[int]:
    """Attachments among ``ids`` waiting for a site → skipped, never imported; returns those moved."""
    with transaction.atomic():
        rows = _lock(Attachment.objects.filter(pk__in=ids, status=AttachmentStatus.NEEDS_ROUTE))
        _move(rows, AttachmentStatus.NEEDS_ROUTE, status=AttachmentStatus.SKIPPED,
              skip_reason=f"ignored by {by}"[:300], route_reason=f"ignored by {by}"[:300])
    return sorted(rows)


@dataclass(frozen=True)
class Released:
    """The stuck attachments put back to pending (each with a job), and those given up (failed)."""

    released: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)


def release_stuck(ids=None, *, max_attempts: int | None = None) -> Released:
    """Stuck attachments (``Attachment.objects.stuck``) back to ``pending`` with a job, or failed (``after_stuck``).

    ``ids=None`` is every stuck row (the watchdog); otherwise only those among
    ``ids`` (the admin's Release). Only stuck rows: a younger ``processing`` one
    may have a live worker, and a second run would import twice.
    """
    stuck = Attachment.objects.stuck(conf.get("MAILPOLL_STUCK_AFTER"))
    if ids is not None:
        stuck = stuck.filter(pk__in=ids)
    with transaction.atomic():
        # SKIP LOCKED: a row another watchdog or operator is releasing right now is theirs to decide.
        rows = _lock(stuck, skip_locked=True, attempts=True)
        plan = defaultdict(dict)
        for pk, (org_id, attempts) in rows.items():
            plan[after_stuck(attempts, max_attempts)][pk] = org_id
        # Guarded by the state they leave, as every transition; locked above, so each of them moves.
        _move(plan[RELEASE], AttachmentStatus.PROCESSING, status=AttachmentStatus.PENDING,
              processing_started_at=None, run_job_id=None, run_attempt=None)
        _move(plan[FAIL], AttachmentStatus.PROCESSING, status=AttachmentStatus.FAILED, error=Concat(
            Value("stuck in processing "), Cast("attempts", models.TextField()), Value(" times; given up"),
            output_field=models.TextField()))
        _enqueue(plan[RELEASE])
    for pk in sorted(plan[FAIL]):
        log.error("attachment=%s failed: stuck %s times", pk, rows[pk][1])
    for pk in sorted(plan[RELEASE]):
        log.warning("attachment=%s released from processing (attempt %s)", pk, rows[pk][1])
    return Released(sorted(plan[RELEASE]), sorted(plan[FAIL]))


def _lock(queryset, *, skip_locked=False, attempts=False) -> dict:
    """Lock these attachment rows (not their requests): {pk: org_id}, or {pk: (org_id, attempts)}."""
    columns = ["pk", "request__org_id", *(["attempts"] if attempts else [])]
    locked = queryset.select_for_update(skip_locked=skip_locked, of=("self",)).values_list(*columns)
    if attempts:
        return {pk: (org_id, n) for pk, org_id, n in locked}
    return dict(locked)


def _move(pks, from_status: str, **changes) -> None:
    """One guarded UPDATE of locked rows out of ``from_status``; every one of them must move."""
    if not pks:
        return
    moved = Attachment.objects.filter(pk__in=list(pks), status=from_status).update(**changes)
    if moved != len(pks):
        raise TransitionError(f"{moved} of {len(pks)} locked attachment(s) left {from_status}")


def _enqueue(rows: dict) -> None:
    """A process_attachment job per attachment; ``rows`` maps pk to org_id."""
    by_org = defaultdict(list)
    for pk, org_id in rows.items():
        by_org[org_id].append(pk)
    for org_id, pks in by_org.items():
        enqueue_processing(org_id, sorted(pks))
