"""Enqueue, claim and finish: the queue's transitions, run through ``jobs.sql``.

``enqueue`` is meant to run inside the caller's transaction: the job exists if
and only if the business row that asked for it does, and workers are notified
only when that transaction commits.
"""

from __future__ import annotations

import json
import logging

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction

from . import conf, registry, sql
from .models import DedupScope, Job

log = logging.getLogger(__name__)

ENQUEUE_TRIES = 3
CLAIM_TRIES = 3


class JobLost(Exception):
    """This run no longer owns its job: it was swept and re-claimed, or failed by an operator."""


class EnqueueRace(Exception):
    """The dedup_key kept changing hands between insert and re-read (3 tries)."""


def enqueue(type: str, *, org_id: str, payload: dict | None = None, dedup_key: str | None = None) -> Job:
    """Queue a job of a registered ``type`` and return it.

    With a ``dedup_key`` (convention ``"<type>:<scope>"``), while a live job holds
    the key, that job is returned instead of a new one. If the holder finishes
    between our conflict and our re-read, the key is free again: insert again
    (seed 001: bounded, 3 tries) rather than report an error.
    """
    registry.get(type)  # fail early, in the caller, on a typo
    if not org_id:
        raise ValueError("org_id is required")
    params = {
        "org_id": org_id,
        "type": type,
        "payload": _json(payload or {}),
        "dedup_key": dedup_key,
        "channel": conf.NOTIFY_CHANNEL,
    }
    for _ in range(ENQUEUE_TRIES):
        job = _one(sql.ENQUEUE, params)
        if job is not None:
            return job
        job = _one(sql.FIND_BY_DEDUP_KEY, params)
        if job is not None:
            return job
    raise EnqueueRace(f"could not enqueue {type} with dedup_key={dedup_key!r} after {ENQUEUE_TRIES} tries")


def enqueue_many(type: str, *, org_id: str, items: list[tuple[dict, str | None]]) -> int:
    """Queue one job of ``type`` per ``(payload, dedup_key)`` in one statement; returns how many were queued.

    For producers that create many rows in one transaction. An item whose key a
    live job holds is skipped (that job already covers it); unlike ``enqueue``
    there is no re-read, so nothing is returned for it.
    """
    registry.get(type)
    if not org_id:
        raise ValueError("org_id is required")
    if not items:
        return 0
    params = {
        "org_id": org_id,
        "type": type,
        "payloads": [_json(payload or {}) for payload, _ in items],
        "dedup_keys": [dedup_key for _, dedup_key in items],
        "channel": conf.NOTIFY_CHANNEL,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql.ENQUEUE_MANY, params)
        return len(cursor.fetchall())


def claim() -> Job | None:
    """Take the oldest runnable job of a registered type, mark it running, commit. None if there is none.

    Short on purpose: the transaction ends before the handler starts, so no row
    stays locked while work happens. None means nothing is claimable now: a
    claim that loses a guard race looks again (the next statement sees the
    winner running), it never gives up with claimable work queued.
    """
    types = registry.all_types()
    guarded = tuple((t.name, t.one_running_per) for t in types.values() if t.one_running_per)
    params = {
        "types": list(types),
        "plain_types": [t.name for t in types.values() if not t.one_running_per],
        "active_scoped": [t.name for t in types.values() if t.dedup_scope == DedupScope.ACTIVE],
    }
    if not guarded:
        # One statement is its own transaction: no BEGIN/COMMIT round trips.
        return _one(sql.CLAIM_UNGUARDED, params)
    statement = sql.claim_guarded(guarded)
    while True:
        with transaction.atomic():
            job = _one(statement, params)
            if job is None:
                return None
            key = types[job.type].one_running_per
            if not key or not _guard_conflict(job, key):
                return job
            # Another worker claimed a job with the same value while our snapshot
            # was taken: give this one back and choose again.
            transaction.set_rollback(True)
            log.info("job=%s claim yielded: a %s with the same %s started meanwhile", job.id, job.type, key)


def _guard_conflict(job: Job, key: str) -> bool:
    """Under the value's advisory lock, is another job of the type with this value running?"""
    args = {"namespace": sql.GUARD_LOCK_NAMESPACE, "key": key, "id": job.id}
    with connection.cursor() as cursor:
        cursor.execute(sql.GUARD_LOCK, args)
        if cursor.fetchone() is None:
            return False  # no value (missing or null): the guard does not apply
        cursor.execute(sql.GUARD_CONFLICT, args)
        return cursor.fetchone()[0]


def report_progress(job: Job, done=None, total=None, **fields) -> None:
    if done is not None:
        fields["done"] = done
    if total is not None:
        fields["total"] = total
    fields.pop("updated_at", None)  # the database clock writes the heartbeat
    if not _update(sql.PROGRESS, job, fields=_json(fields)):
        raise JobLost(f"job {job.id} attempt {job.attempts} is no longer running here")
    job.progress = {**(job.progress or {}), **fields}


def heartbeat(job: Job) -> bool:
    """Refresh ``progress.updated_at`` only. False if the job is no longer ours."""
    return _update(sql.PROGRESS, job, fields="{}")


def finish_done(job: Job, report: dict | None) -> bool:
    return _update(sql.FINISH_DONE, job, report=_json(report) if report is not None else None)


def finish_failed(job: Job, error: str, report: dict | None = None) -> bool:
    return _update(sql.FINISH_FAILED, job, error=error[:2000],
                   report=_json(report) if report is not None else None)


def retry_or_fail(attempts: int, max_attempts: int) -> str:
    """What becomes of an interrupted run (zombie, lost connection).

    The run that was interrupted already counted as an attempt at its claim:

    >>> retry_or_fail(1, 3), retry_or_fail(2, 3), retry_or_fail(3, 3), retry_or_fail(1, 1)
    ('queued', 'queued', 'failed', 'failed')
    """
    return "queued" if attempts < max_attempts else "failed"


def interrupt(job: Job, max_attempts: int) -> str | None:
    """Put an interrupted run back in the queue, or fail it if it has no attempts left.

    Returns the new status, or None if the run no longer owned the job.
    """
    outcome = retry_or_fail(job.attempts, max_attempts)
    statement = sql.REQUEUE_INTERRUPTED if outcome == "queued" else sql.FAIL_EXHAUSTED
    return outcome if _update(statement, job) else None


def call_on_fail(job: Job) -> None:
    """Run the type's ``on_fail`` best-effort: its errors are logged, never raised."""
    try:
        job_type = registry.get(job.type)
    except registry.UnknownJobType:
        return
    if job_type.on_fail is None:
        return
    try:
        job.refresh_from_db()
        job_type.on_fail(job)
    except Exception:
        log.exception("job=%s on_fail of %s raised", job.id, job.type)


def requeue(job_ids) -> list:
    """Operator action: failed jobs start afresh; stale running jobs (zombies) go back now.

    Returns the ids that changed; others (done, queued, or running and alive) are left alone.
    """
    ids = [str(i) for i in job_ids]
    stale = list(Job.objects.stale().filter(pk__in=ids).values_list("pk", "attempts"))
    with transaction.atomic():
        changed = _ids(sql.OPERATOR_REQUEUE_FAILED, {"ids": ids})
        changed += _ids(sql.OPERATOR_REQUEUE_STALE,
                        {"ids": [str(pk) for pk, _ in stale], "attempts": [a for _, a in stale]})
    return changed


def mark_failed(job_ids, reason: str) -> list:
    """Operator action: fail queued or running jobs with ``reason``; ``on_fail`` runs for each."""
    with transaction.atomic():
        changed = _ids(sql.OPERATOR_FAIL, {"ids": [str(i) for i in job_ids], "error": reason[:2000]})
    for job in Job.objects.filter(pk__in=changed):
        call_on_fail(job)
    return changed


def _ids(statement: str, params: dict) -> list:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return [row[0] for row in cursor.fetchall()]


def _update(statement: str, job: Job, **params) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(statement, {"id": job.id, "attempt": job.attempts, **params})
        return cursor.rowcount == 1


_JOB_FIELDS = [c.strip() for c in sql.JOB_COLUMNS.split(",")]


def _one(statement: str, params: dict) -> Job | None:
    """The row a statement returns (``sql.JOB_COLUMNS`` first, in order) as a Job, or None.

    Not ``Job.objects.raw``: it maps columns and looks up converters on every
    call, about 0.1 ms of CPU per claim and per enqueue (bench/queue_bench.py).
    """
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        row = cursor.fetchone()
    if row is None:
        return None
    values = []
    for name, value in zip(_JOB_FIELDS, row):
        field = Job._meta.get_field(name)
        if value is not None and hasattr(field, "from_db_value"):
            value = field.from_db_value(value, None, connection)
        values.append(value)
    return Job.from_db(connection.alias, _JOB_FIELDS, values)


def _json(value) -> str:
    return json.dumps(value, cls=DjangoJSONEncoder)
