"""How a run ends: done, failed (with ``on_fail``), or interrupted — back to the queue,
folded into the queued job that holds its key, or failed out of attempts.

Every write is one of ``jobs.sql``'s statements fenced on the run's attempt, so
a run that lost its job changes nothing.
"""

from __future__ import annotations

import logging
import random

from django.db import IntegrityError, connection, transaction

from seoinsight.backoff import doubling

from . import conf, registry, rows, sql
from .errors import CANCELLED
from .models import Job
from .storable import MAX_ERROR_CHARS, MAX_TRACEBACK_CHARS, storable_report, storable_text

log = logging.getLogger(__name__)


def finish_done(job: Job, report: dict | None) -> bool:
    """Record the handler's result; False if this run no longer owns the job."""
    return rows.update(sql.FINISH_DONE, job, report=storable_report(report))


def finish_failed(job: Job, error: str, traceback: str | None = None) -> bool:
    """Fail the run and run ``on_fail``, in one transaction; False if this run no longer owns the job.

    A crash or a lost connection before the commit leaves the job running (the
    sweep or this worker's retry takes it from there), never failed with its
    domain row still untouched.
    """
    with transaction.atomic():
        failed = rows.update(sql.FINISH_FAILED, job, error=storable_text(error, MAX_ERROR_CHARS),
                             traceback=storable_text(traceback, MAX_TRACEBACK_CHARS, keep="tail")
                             if traceback is not None else None)
        if failed:
            call_on_fail(job)
    return failed


def retry_delay(attempt: int, base: float, cap: float, rand: float) -> float:
    """Seconds before the next run of a job whose run ``attempt`` (1 = first) asked to be retried.

    Doubling from ``base`` up to ``cap``, then "full jitter": a point drawn by
    ``rand`` (0..1) in the upper half of that wait, so jobs that failed together
    do not all come back at once, and none comes back at once.

    >>> retry_delay(1, 2, 600, 1.0), retry_delay(1, 2, 600, 0.0), retry_delay(4, 2, 600, 1.0)
    (2.0, 1.0, 16.0)
    >>> retry_delay(20, 2, 600, 0.5)
    450.0
    """
    wait = doubling(attempt, base, cap)
    return wait / 2 + wait / 2 * rand


def finish_retry(job: Job, max_attempts: int, error: str, traceback: str | None = None,
                 after: float | None = None) -> str | None:
    """Queue the job again after ``after`` seconds (None: ``retry_delay``), or fail it if its attempts are spent.

    The failure is ``finish_failed``'s, with the run's own error and ``on_fail``; a job whose
    cancel was requested meanwhile fails ``'cancelled'`` instead of coming back.
    Returns the new status, or None if this run no longer owned the job.
    """
    with transaction.atomic():
        row = _lock_run(job)
        if row is None:
            return None
        attempts, uncounted, _, cancel_requested = row
        if cancel_requested:  # asked to stop before the run was told: not run again
            return "failed" if finish_failed(job, CANCELLED, traceback) else None
        if retry_or_fail(attempts - uncounted, max_attempts) == "failed":
            return "failed" if finish_failed(job, error, traceback) else None
        if after is None:
            after = retry_delay(attempts - uncounted, conf.get("JOBS_RETRY_BASE"), conf.get("JOBS_RETRY_MAX"),
                                random.random())
        return put_back(job, sql.FINISH_RETRY, delay=float(after), error=storable_text(error, MAX_ERROR_CHARS),
                        traceback=storable_text(traceback, MAX_TRACEBACK_CHARS, keep="tail")
                        if traceback is not None else None)[0]


# Runs the database may cut off (connection lost, server shut down) before
# further ones count against max_attempts: a job that kills its own database
# (a query that crashes the server) must still end.
FREE_OUTAGES = 5


def retry_or_fail(attempts: int, max_attempts: int) -> str:
    """What becomes of an interrupted run, given the claims counted against its budget.

    The run that was interrupted already counted as an attempt at its claim:

    >>> retry_or_fail(1, 3), retry_or_fail(2, 3), retry_or_fail(3, 3), retry_or_fail(1, 1)
    ('queued', 'queued', 'failed', 'failed')
    """
    return "queued" if attempts < max_attempts else "failed"


def after_interruption(attempts: int, uncounted: int, outages: int, max_attempts: int, *,
                       by_database: bool) -> tuple[str, bool]:
    """``(new status, spared)`` for a run cut off by a dead worker or by the database.

    A crash counts. A run the database cut off is spared (not counted) for the
    first FREE_OUTAGES outages of the job; later ones count like crashes.

    >>> after_interruption(3, 0, 0, 3, by_database=False), after_interruption(3, 0, 0, 3, by_database=True)
    (('failed', False), ('queued', True))
    >>> after_interruption(7, 5, 5, 3, by_database=True)  # spared 5 times already: this one counts
    ('queued', False)
    """
    spared = by_database and outages < FREE_OUTAGES
    counted = attempts - uncounted - (1 if spared else 0)
    return retry_or_fail(counted, max_attempts), spared


def exhausted_error(outages: int) -> str:
    """``error`` of a job out of attempts.

    >>> exhausted_error(0), exhausted_error(3)
    ('max attempts exceeded', 'max attempts exceeded; interrupted by database outages (3)')
    """
    return "max attempts exceeded" + (f"; interrupted by database outages ({outages})" if outages else "")


def interrupt(job: Job, max_attempts: int, *, by_database: bool = False) -> str | None:
    """Put an interrupted run back in the queue, or fail it if it has no attempts left.

    ``by_database``: the worker itself saw the database cut the run off (see
    ``after_interruption``). Back in the queue, the job holds its key again; if a
    newer queued job holds it, this one is folded into that one (``done``,
    ``report.superseded_by``). A job whose cancel was requested fails ``'cancelled'``
    instead. A failure runs ``on_fail`` in the same transaction.
    Returns the new status, or None if the run no longer owned the job.
    """
    with transaction.atomic():
        row = _lock_run(job)
        if row is None:
            return None
        attempts, uncounted, outages, cancel_requested = row
        if cancel_requested:  # its worker vanished (or lost the database) before telling the run
            return "failed" if finish_failed(job, CANCELLED) else None
        outcome, spared = after_interruption(attempts, uncounted, outages, max_attempts, by_database=by_database)
        outage = 1 if by_database else 0
        if outcome == "failed":
            rows.update(sql.FAIL_EXHAUSTED, job, error=exhausted_error(outages + outage), outage=outage)
            call_on_fail(job)
            return "failed"
        return put_back(job, sql.REQUEUE_INTERRUPTED, spared=int(spared), outage=outage)[0]


def hand_back(job: Job) -> str | None:
    """Put back a run its worker gives up through no fault of the run's own (the worker exits for another
    run's handler it cannot stop): its attempt is not counted and no ``on_fail`` runs, whatever attempts remain.

    As in ``interrupt``, a newer queued job holding its key takes it over (folded, ``done``) and a requested
    cancel fails it ``'cancelled'``. Returns the new status, or None if the run no longer owned the job.
    """
    with transaction.atomic():
        row = _lock_run(job)
        if row is None:
            return None
        if row[3]:  # cancel requested: the worker would have failed it 'cancelled' had it finished
            return "failed" if finish_failed(job, CANCELLED) else None
        # Spared as an outage's run is, without counting an outage: the job did nothing to earn one,
        # and a job handed back again and again needs another job stuck each time, charged each time.
        return put_back(job, sql.REQUEUE_INTERRUPTED, spared=1, outage=0)[0]


def _lock_run(job: Job) -> tuple | None:
    """Lock the job while this run still holds it: (attempts, uncounted, outages, cancel requested), or None."""
    with connection.cursor() as cursor:
        cursor.execute(sql.INTERRUPTED_RUN, {"id": job.id, "attempt": job.attempts})
        return cursor.fetchone()


def put_back(job: Job, statement: str, **params):
    """Run a put-back statement, the job taking its key back; ``(status, holder)``.

    If another job holds the key (a queued one, enqueued while this one ran),
    this one is folded into it: ``("done", holder)``. ``(None, None)`` if the run
    no longer owned the job.
    """
    for _ in range(rows.ENQUEUE_TRIES):
        try:
            with transaction.atomic():
                return ("queued" if rows.update(statement, job, **params) else None), None
        except IntegrityError as exc:
            if getattr(exc.__cause__, "sqlstate", None) != rows.UNIQUE_VIOLATION:
                raise
        holder = holder_of(job)
        if holder is not None:
            folded = rows.update(sql.SUPERSEDE, job, holder=str(holder), outage=params.get("outage", 0))
            log.warning("job=%s folded into job=%s, which holds its key %r", job.id, holder, job.enqueued_key)
            return ("done" if folded else None), holder
        # The holder finished meanwhile: the key is free again.
    raise rows.EnqueueRace(f"job {job.id}: its key {job.enqueued_key!r} kept changing hands")


def holder_of(job: Job):
    """The other job holding this job's key, if any."""
    if job.enqueued_key is None:
        job.enqueued_key = Job.objects.filter(pk=job.pk).values_list("enqueued_key", flat=True).first()
    if job.enqueued_key is None:
        return None
    return Job.objects.filter(dedup_key=job.enqueued_key).exclude(pk=job.pk).values_list("pk", flat=True).first()


def call_on_fail(job: Job) -> None:
    """Run the type's ``on_fail`` inside the failing transaction, under a savepoint.

    Its own errors are logged and undo only its own writes, never the failure;
    a lost connection undoes both, and whoever failed the job retries.
    """
    try:
        job_type = registry.get(job.type)
    except registry.UnknownJobType:
        return
    if job_type.on_fail is None:
        return
    try:
        with transaction.atomic():
            job.refresh_from_db()
            job_type.on_fail(job)
    except Exception:
        if connection.needs_rollback:
            # The savepoint could not be restored (the connection is gone), so
            # the failure cannot commit either: let the caller see it.
            raise
        log.exception("job=%s on_fail of %s raised", job.id, job.type)
