"""Enqueue, claim and heartbeat: the queue's transitions, run through ``jobs.sql``.

``enqueue`` is meant to run inside the caller's transaction: the job exists if
and only if the business row that asked for it does, and workers are notified
only when that transaction commits.

How a run ends lives in ``jobs.finish``, the operator's transitions in
``jobs.operator_actions``; this module re-exports their verbs, so ``jobs.queue`` stays
the one import for callers of the queue.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction

from . import conf, ids, registry, rows, sql, timeouts
from .claim_cursor import ClaimCursor, claim_key
from .finish import finish_done, finish_failed, finish_retry, interrupt
from .models import Job
from .operator_actions import mark_failed, requeue
from .registry import DedupScope
from .rows import EnqueueRace
from .storable import MAX_REPORT_BYTES, storable

__all__ = ["EnqueueRace", "JobLost", "claim", "claim_many", "claim_plan", "enqueue", "enqueue_many", "finish_and_claim",
           "finish_done", "finish_failed", "finish_retry", "heartbeat", "interrupt", "mark_failed", "report_progress", "requeue"]

log = logging.getLogger(__name__)


class JobLost(Exception):
    """This run no longer owns its job: it was swept and re-claimed, or failed by an operator."""


def _check_org(org_id) -> None:
    """A job belongs to an org, named by a non-empty string (the column is text): checked before anything is queued."""
    if not org_id or not isinstance(org_id, str):
        raise ValueError(f"org_id is required: a non-empty string, not {org_id!r}")


def _placement(type: str, run_after: datetime | None, priority: int | None, queue_name: str | None) -> dict:
    """When, how urgently and in which queue a job of ``type`` waits: None takes the type's default.

    Checked here, in the caller, before anything is queued: a naive datetime
    (whose zone the database would guess) or an out-of-range priority is a
    ValueError, not a job that is never claimed.
    """
    job_type = registry.get(type)  # fail early, in the caller, on a typo
    if run_after is not None and (not isinstance(run_after, datetime) or run_after.utcoffset() is None):
        raise ValueError(f"run_after must be an aware datetime, not {run_after!r}")
    return {
        "run_after": run_after,
        "priority": registry.check_priority(job_type.priority if priority is None else priority),
        "queue_name": registry.check_queue(job_type.queue if queue_name is None else queue_name),
    }


def enqueue(type: str, *, org_id: str, payload: dict | None = None, dedup_key: str | None = None,
            run_after: datetime | None = None, priority: int | None = None, queue_name: str | None = None) -> Job:
    """Queue a job of a registered ``type`` and return it.

    ``run_after``: not claimed before then; ``priority`` (-100..100, higher
    first) and ``queue_name`` default to the type's.

    With a ``dedup_key`` (convention ``"<type>:<scope>"``), while a live job holds
    the key, that job is returned instead of a new one. If the holder finishes
    between our conflict and our re-read, the key is free again: insert again
    (bounded: 3 tries, then ``EnqueueRace``) rather than report an error.

    One statement, one round trip (``sql.ENQUEUE``, or ``sql.ENQUEUE_KEYLESS``
    without a key: nothing to arbitrate; their ``_NO_PAYLOAD`` forms without a
    payload: nothing to read back); the job returned is built from what it
    returns and what it was given (``rows.queued_job``), every field set as a
    read of the row would give it.
    """
    placement = _placement(type, run_after, priority, queue_name)
    _check_org(org_id)
    if dedup_key is not None and not isinstance(dedup_key, str):
        raise ValueError(f"dedup_key must be a string or None, not {dedup_key!r}")
    params = {
        "id": ids.new_id(),
        "org_id": org_id,
        "type": type,
        "payload": rows.to_json(payload) if payload else "{}",
        "dedup_key": dedup_key,
        "channel": conf.NOTIFY_CHANNEL,
        **placement,
    }
    if dedup_key is None:
        statement = sql.ENQUEUE_KEYLESS if payload else sql.ENQUEUE_KEYLESS_NO_PAYLOAD
        return rows.queued_job(rows.first(statement, params), params)
    statement = sql.ENQUEUE if payload else sql.ENQUEUE_NO_PAYLOAD
    for _ in range(rows.ENQUEUE_TRIES):
        row = rows.first(statement, params)
        if row is not None:
            return rows.queued_job(row, params)
        job = rows.one(sql.FIND_BY_DEDUP_KEY, params)
        if job is not None:
            return job
    raise EnqueueRace(f"could not enqueue {type} with dedup_key={dedup_key!r} after {rows.ENQUEUE_TRIES} tries")


def enqueue_many(type: str, *, org_id: str, items: list[tuple[dict, str | None]],
                 run_after: datetime | None = None, priority: int | None = None, queue_name: str | None = None) -> int:
    """Queue one job of ``type`` per ``(payload, dedup_key)`` in one statement; returns how many were queued.

    For producers that create many rows in one transaction. An item whose key a
    live job holds is skipped (that job already covers it); unlike ``enqueue``
    there is no re-read, so nothing is returned for it.

    One round trip: ``sql.ENQUEUE_MANY``, or ``sql.ENQUEUE_MANY_KEYLESS`` when no
    item has a key (no ``ON CONFLICT`` to pay for). ``COPY`` measured no faster
    (bench.enqueue_paths, docs/benchmarks.md).
    """
    placement = _placement(type, run_after, priority, queue_name)
    _check_org(org_id)
    if not items:
        return 0
    encode = rows.to_json
    dedup_keys = [dedup_key for _, dedup_key in items]
    params = {
        "org_id": org_id,
        "type": type,
        "ids": ids.new_ids_text(len(items)),
        # A line per payload: to_json writes JSON without a line break of its own (sql.ENQUEUE_MANY).
        "payloads": "\n".join([encode(payload) if payload else "{}" for payload, _ in items]),
        "channel": conf.NOTIFY_CHANNEL,
        **placement,
    }
    if any(key is not None for key in dedup_keys):
        params["dedup_keys"] = encode(dedup_keys)
        statement = sql.ENQUEUE_MANY
    else:
        statement = sql.ENQUEUE_MANY_KEYLESS
    row = rows.first(statement, params)
    return 0 if row is None else row[0]


@dataclass(frozen=True)
class ClaimPlan:
    """What a claim sends, derived from the registry once per registry generation."""

    params: dict
    guards: dict  # type -> its one_running_per key, for the guarded types
    guarded: str | None  # the type-by-type claim (sql.claim_guarded); None: no guarded type


@functools.lru_cache(maxsize=1)
def _plan(generation: int) -> ClaimPlan:
    types = registry.all_types().values()
    guards = {t.name: t.one_running_per for t in types if t.one_running_per}
    # The lists as the arrays' text, made once here, not by psycopg at every claim (rows.array_text).
    params = {
        "types": rows.array_text(t.name for t in types),
        "plain_types": rows.array_text(t.name for t in types if not t.one_running_per),
        "guard_types": rows.array_text(guards),
        "guard_keys": rows.array_text(guards.values()),
        "active_scoped": rows.array_text(t.name for t in types if t.dedup_scope == DedupScope.ACTIVE),
        "queues": None,  # every queue; claim() sets the worker's
        "worker_id": None,
    }
    return ClaimPlan(params, guards, sql.claim_guarded(tuple(guards.items())) if guards else None)


def claim_plan() -> ClaimPlan:
    return _plan(registry.generation())


def _queues(queues: list[str] | None) -> str | None:
    """A worker's queues as the claim's parameter (None: every queue)."""
    return rows.array_text(queues) if queues else None


def claim(queues: list[str] | None = None, worker_id: str | None = None,
          cursor: ClaimCursor | None = None) -> Job | None:
    """Take the first due job (highest priority, then oldest) of a registered type, mark it running, commit.

    None if there is none. ``queues``: only jobs in these queues (None: all);
    ``worker_id`` ("host:pid") is appended to the job's ``worker_ids``;
    ``cursor``: the worker's mark, which may start the claim after its last one
    (``jobs.claim_cursor``; not for one_running_per types, whose claims stay exact).

    Short on purpose: the transaction ends before the handler starts, so no row
    stays locked while work happens. None means nothing is claimable now: a
    claim that loses a guard race looks again (the next statement sees the
    winner running), it never gives up with claimable work queued.
    """
    plan = claim_plan()
    params = {**plan.params, "queues": _queues(queues), "worker_id": worker_id}
    if plan.guarded is None:
        # One statement is its own transaction: no BEGIN/COMMIT round trips.
        claimed = _by_cursor(cursor, sql.CLAIM_UNGUARDED, sql.CLAIM_UNGUARDED_AFTER, params)
        return claimed[0] if claimed else None
    while True:
        with transaction.atomic():
            # The front of the queue first; type by type only when it is all blocked.
            job = rows.one(sql.CLAIM_WINDOWED, params) or rows.one(plan.guarded, params)
            if job is None:
                return None
            key = plan.guards.get(job.type)
            if not key or not _guard_conflict(job, key):
                return job
            # Another worker claimed a job with the same value while our snapshot
            # was taken: give this one back and choose again.
            transaction.set_rollback(True)
            log.info("job=%s claim yielded: a %s with the same %s started meanwhile", job.id, job.type, key)


def claim_many(limit: int, queues: list[str] | None = None, worker_id: str | None = None,
               cursor: ClaimCursor | None = None) -> list[Job]:
    """Claim up to ``limit`` due jobs, as ``claim`` would one by one, for a worker with ``limit`` free slots.

    In claim order; [] if nothing is claimable. Without one_running_per types
    it is one statement (``sql.CLAIM_MANY_UNGUARDED``). With them it is one
    guarded ``claim`` per slot, each committed before the next: a batched
    statement's snapshot sees neither the other rows of its batch nor claims
    committed while it runs, so it could take two jobs of one value, or one
    whose value just started; the guard's advisory-lock recheck is per job.
    That way the guard holds exactly as it does for ``limit`` one-slot workers.
    ``cursor`` as for ``claim``.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit!r}")
    plan = claim_plan()
    if plan.guarded is not None or limit == 1:
        claimed = []
        while len(claimed) < limit:
            job = claim(queues, worker_id, cursor)
            if job is None:
                break
            claimed.append(job)
        return claimed
    params = {**plan.params, "queues": _queues(queues), "worker_id": worker_id, "limit": limit}
    return _by_cursor(cursor, sql.CLAIM_MANY_UNGUARDED, sql.CLAIM_MANY_UNGUARDED_AFTER, params)


def finish_and_claim(finished: list[tuple[Job, str | None]], limit: int, queues: list[str] | None = None,
                     worker_id: str | None = None, cursor: ClaimCursor | None = None) -> tuple[set, list[Job]]:
    """Record done runs and claim up to ``limit`` jobs (0: none), in one statement (``sql.FINISH_AND_CLAIM``).

    ``finished``: ``(job, report)`` per run, the report as ``storable_report``
    made it. Returns the ids of the runs recorded (one missing no longer owned
    its job, as ``finish_done`` returning False) and the jobs claimed, in claim
    order, as ``claim_many`` would claim them. With one_running_per types the
    claim is ``claim_many``'s own, after the finishes: their guard needs its
    own transactions. ``cursor`` as for ``claim``.
    """
    if limit < 0:
        raise ValueError(f"limit must not be negative, not {limit!r}")
    plan = claim_plan()
    params = {
        **plan.params,
        "queues": _queues(queues),
        "worker_id": worker_id,
        "limit": limit if plan.guarded is None else 0,
        "finish_ids": rows.array_text(job.id.hex for job, _ in finished),
        "finish_attempts": rows.array_text(str(job.attempts) for job, _ in finished),
        "finish_reports": rows.array_text(report for _, report in finished),
    }
    if plan.guarded is not None or not limit:
        recorded, _, _ = rows.finished_and_claimed(sql.FINISH_AND_CLAIM, params)  # its limit is 0: finishes only
        return recorded, claim_many(limit, queues, worker_id) if limit else []
    after = _after(cursor)
    if after is not None:
        recorded, claimed, _ = rows.finished_and_claimed(sql.FINISH_AND_CLAIM_AFTER, {**params, **after})
        if claimed:
            cursor.claimed(claim_key(claimed[-1]))
            return recorded, claimed
        # Nothing after the mark: the exact claim on its own (the finishes are recorded) has the last word.
        return recorded, _exact(cursor, sql.CLAIM_MANY_UNGUARDED, params)
    recorded, claimed, took = rows.finished_and_claimed(sql.FINISH_AND_CLAIM, params)
    _exact_claimed(cursor, claimed, took)
    return recorded, claimed


def _after(cursor: ClaimCursor | None) -> dict | None:
    """The bounded claim's parameters while ``cursor`` bounds the claims; None: claim exactly."""
    bound = None if cursor is None else cursor.bound(time.monotonic())
    if bound is None:
        return None
    return {"after_priority": bound[0], "after_created": bound[1], "after_id": bound[2]}


def _exact_claimed(cursor: ClaimCursor | None, claimed: list[Job], took: float | None) -> None:
    """Tell ``cursor`` what an exact claim took, and how long it ran on the server (None: it took nothing)."""
    if cursor is None or not claimed:
        return
    change = cursor.exact_claim_took(took, time.monotonic())
    cursor.claimed(claim_key(claimed[-1]))
    if change == "bounded":
        # Dead entries at the front of the queue's index: a fast drain VACUUM has not caught up with (about a
        # millisecond, an INFO), or a snapshot held open (over SLOW_ALWAYS, and growing: worth a warning).
        log.log(logging.WARNING if took >= cursor.slow_always else logging.INFO,
                "claims are slow (the last exact one ran %.1f ms on the server, the fastest %.2f ms): claiming after "
                "the last job claimed, exactly again every %gs. Dead entries in the queue's index: VACUUM behind, or "
                "a transaction holding a snapshot open (pg_stat_activity: age(backend_xmin))?", took * 1000,
                cursor.fastest_known * 1000, cursor.exact_every)
    elif change == "exact":
        log.info("claims are fast again (the last exact one ran %.2f ms on the server): claiming exactly", took * 1000)


def _by_cursor(cursor: ClaimCursor | None, exact: str, bounded: str, params: dict) -> list[Job]:
    """The jobs the claim ``exact`` takes or, while ``cursor`` bounds the claims, ``bounded``.

    A bounded claim that takes nothing is followed at once by the exact one, so
    "nothing to claim" is always the exact claim's answer: a worker never idles
    or leaves ``--burst`` with a job queued behind its mark.
    """
    after = _after(cursor)
    if after is not None:
        claimed, _ = rows.claimed(bounded, {**params, **after})
        if claimed:
            cursor.claimed(claim_key(claimed[-1]))
            return claimed
    return _exact(cursor, exact, params)


def _exact(cursor: ClaimCursor | None, statement: str, params: dict) -> list[Job]:
    claimed, took = rows.claimed(statement, params)
    _exact_claimed(cursor, claimed, took)
    return claimed


def seconds_to_next_due(queues: list[str] | None = None) -> float | None:
    """Seconds until the soonest scheduled job these queues hold becomes due; None if none is scheduled."""
    params = {**claim_plan().params, "queues": _queues(queues)}
    with connection.cursor() as cursor:
        cursor.execute(sql.NEXT_DUE, params)
        return cursor.fetchone()[0]


def _guard_conflict(job: Job, key: str) -> bool:
    """Under the value's advisory lock, is another job of the type with this value running?"""
    args = {"namespace": sql.GUARD_LOCK_NAMESPACE, "key": key, "id": job.id}
    with connection.cursor() as cursor:
        cursor.execute(sql.GUARD_LOCK, args)
        if cursor.fetchone() is None:
            return False  # no value (missing or null): the guard does not apply
        cursor.execute(sql.GUARD_CONFLICT, args)
        return cursor.fetchone()[0]


def report_progress(job: Job, done: int | None = None, total: int | None = None, **fields) -> None:
    """Merge ``done``/``total``/``fields`` into ``progress`` with a fresh heartbeat; also ``job.report_progress``.

    Call it per batch or step, never per row. Raises ``JobLost`` if this run no
    longer owns the job (swept as a zombie and re-claimed, or failed by an
    operator), so a handler stops instead of racing its successor; after the
    write, ``JobCancelled`` if the job's cancel was requested, ``JobTimedOut``
    if the run is past its type's timeout.
    """
    if done is not None:
        fields["done"] = done
    if total is not None:
        fields["total"] = total
    fields.pop("updated_at", None)  # the database clock writes the heartbeat
    encoded = rows.to_json(storable(fields))
    if len(encoded) > MAX_REPORT_BYTES:
        raise ValueError(f"progress of {len(encoded)} bytes is over the {MAX_REPORT_BYTES} byte limit")
    ours, cancelled = _progress(job, encoded)
    if not ours:
        raise JobLost(f"job {job.id} attempt {job.attempts} is no longer running here")
    job.progress = {**(job.progress or {}), **fields}
    # Written first: a checkpoint is kept for whoever resumes the job.
    timeouts.check(job, cancelled=cancelled)


# Handlers call it as a method of the job they are given (README): the queue
# offers it to the model, so the model never imports the queue. jobs.apps
# imports this module at start-up, before any handler runs.
Job.report_progress = report_progress


def heartbeat(job: Job) -> bool:
    """Refresh ``progress.updated_at`` only. False if the job is no longer ours.

    A cancel requested meanwhile is passed on to the run's handler
    (``timeouts.cancel_requested``): ``JobCancelled`` is raised in its thread,
    here if that is the calling thread (the run's fence).
    """
    ours, cancelled = _progress(job, "{}")
    if cancelled:
        timeouts.cancel_requested(job)
    return ours


def _progress(job: Job, fields: str) -> tuple[bool, bool]:
    """Run the fenced PROGRESS write: (still this run's job, its cancel requested)."""
    with rows.queue_cursor() as cursor:
        cursor.execute(sql.PROGRESS, {"id": job.id, "attempt": job.attempts, "fields": fields})
        row = cursor.fetchone()
    return row is not None, row is not None and row[0] is not None
