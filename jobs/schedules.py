"""Periodic jobs: a type registered with ``every=`` or ``cron=`` is enqueued once per period.

Periods. For ``every=timedelta(...)`` the periods start at the Unix epoch (UTC) and follow in steps
of ``every`` (``every=timedelta(hours=1)`` starts on the hour, a week starts on a Thursday, as
1970-01-01 did). For ``cron=`` they are the expression's fire times in ``JOBS_SCHEDULE_TIMEZONE``
(UTC unless set; cronsim decides what a fire time in a skipped or repeated hour of a DST change
means). The job's payload is ``{"period": "<start, ISO 8601, UTC>"}``.

Exactly once. Every long-running worker runs the duty ``enqueue_due`` every
``JOBS_SCHEDULE_CHECK_INTERVAL`` seconds; the ``jobs_schedule`` row of the type decides which
of them enqueues a period: the one whose upsert moves ``last_period`` forward, in the transaction
that inserts the job. A worker that finds ``last_period`` already there changes nothing.

No backfill. After downtime only the latest period that has begun runs, once; the missed
ones before it are skipped. A type seen for the first time runs its current period at once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from django.db import connection, transaction

from . import conf, registry
from .models import Job
from .queue import enqueue
from .system import SYSTEM_ORG

log = logging.getLogger(__name__)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Plan:
    """What a schedule should do now: enqueue ``due`` (None: nothing), and when its next period starts."""

    due: datetime | None
    next: datetime | None  # None: the cron never fires again


def plan(*, every: timedelta | None = None, cron: str | None = None, last_period: datetime | None,
         now: datetime, tz=UTC) -> Plan:
    """The period to enqueue at ``now``, if any, and the start of the next one; pure.

    ``due`` is the latest period start <= ``now`` that is after ``last_period``: one period
    however many were missed. A ``last_period`` in the future (the clock was ahead when it was
    taken, then set back) is never run again: nothing is due until a period starts after it.

    >>> t = datetime(2026, 1, 1, 10, 0, 3, tzinfo=UTC)
    >>> plan(every=timedelta(seconds=2), last_period=None, now=t).due.second
    2
    >>> plan(every=timedelta(seconds=2), last_period=t.replace(second=2), now=t).due is None
    True
    """
    latest = latest_start(every=every, cron=cron, at=now, tz=tz)
    due = latest if latest is not None and (last_period is None or latest > last_period) else None
    after = now if last_period is None else max(now, last_period)
    return Plan(due, next_start(every=every, cron=cron, after=after, tz=tz))


def latest_start(*, every: timedelta | None, cron: str | None, at: datetime, tz=UTC) -> datetime | None:
    """The latest period start <= ``at``, in UTC (None: a cron that never fired before ``at``)."""
    if every is not None:
        return EPOCH + every * ((at - EPOCH) // every)
    from cronsim import CronSim

    # cronsim's reverse walk yields times strictly before its start; fire times are whole
    # seconds, so "before the next whole second" is "at or before ``at``".
    start = (at.astimezone(UTC).replace(microsecond=0) + timedelta(seconds=1)).astimezone(tz)
    return _first(CronSim(_cron(cron), start, reverse=True))


def next_start(*, every: timedelta | None, cron: str | None, after: datetime, tz=UTC) -> datetime | None:
    """The first period start strictly after ``after``, in UTC."""
    if every is not None:
        return EPOCH + every * ((after - EPOCH) // every + 1)
    from cronsim import CronSim

    return _first(CronSim(_cron(cron), after.astimezone(tz)))


def _cron(expression: str | None) -> str:
    if expression is None:
        raise ValueError("a schedule needs every= or cron=")
    return expression


def _first(times) -> datetime | None:
    try:
        return next(times).astimezone(UTC)
    except StopIteration:
        return None


def schedule_timezone():
    """The zone cron expressions are read in (JOBS_SCHEDULE_TIMEZONE); ``every=`` is always UTC."""
    name = conf.get("JOBS_SCHEDULE_TIMEZONE")
    try:
        return ZoneInfo(name)
    except (ValueError, KeyError):  # KeyError: ZoneInfoNotFoundError
        raise ValueError(f"JOBS_SCHEDULE_TIMEZONE={name!r} is not a time zone this machine knows") from None


def plan_for(job_type: registry.JobType, last_period: datetime | None, now: datetime) -> Plan:
    # The zone is read only for cron: a bad JOBS_SCHEDULE_TIMEZONE never stops an every= type.
    tz = schedule_timezone() if job_type.cron is not None else UTC
    return plan(every=job_type.every, cron=job_type.cron, last_period=last_period, now=now, tz=tz)


def describe(job_type: registry.JobType) -> str:
    """How the type repeats, for people: 'every 0:00:02', 'cron "0 3 * * *" (UTC)'."""
    if job_type.every is not None:
        return f"every {job_type.every}"
    return f'cron "{job_type.cron}" ({conf.get("JOBS_SCHEDULE_TIMEZONE")})'


def dedup_key(name: str, period: datetime) -> str:
    return f"schedule:{name}:{period.isoformat()}"


# These statements keep the schedule's own row; the job itself is inserted by jobs.queue.enqueue
# (jobs.sql.ENQUEUE), so they live here, not among the job transitions of jobs.sql.
#
# Where each periodic type stands, and the database's clock, in one round trip: the duty's
# whole cost when nothing is due. A type without a row yet reads as last_period NULL.
STATES = """
SELECT t.name, s.last_period, now()
FROM unnest(%(names)s::text[]) AS t(name)
LEFT JOIN jobs_schedule AS s ON s.name = t.name
"""

# Take a period: insert the row if it is missing, else move last_period forward, never back.
# The statement that changes the row locks it; a concurrent worker's statement waits for that
# transaction and then re-reads the row, so when the first one committed, its period is no
# longer after last_period and nothing is returned: exactly one worker gets a row back, and
# it enqueues the job in the same transaction (a rollback gives the period back).
TAKE_PERIOD = """
INSERT INTO jobs_schedule AS s (name, last_period, next_run_at, updated_at)
VALUES (%(name)s, %(period)s, %(next)s, now())
ON CONFLICT (name) DO UPDATE
SET last_period = EXCLUDED.last_period, next_run_at = EXCLUDED.next_run_at, updated_at = now()
WHERE s.last_period IS NULL OR s.last_period < EXCLUDED.last_period
RETURNING s.name
"""

# The job that period enqueued, for the admin's list.
RECORD_JOB = "UPDATE jobs_schedule SET last_job_id = %(job_id)s WHERE name = %(name)s AND last_period = %(period)s"


def periodic_types() -> list[registry.JobType]:
    return [t for t in registry.all_types().values() if t.periodic]


def enqueue_due(job_types: list[registry.JobType] | None = None) -> list[Job]:
    """The duty: enqueue the due period of every periodic type this worker knows; returns the jobs it queued.

    ``job_types`` (tests) limits it to those. Judged on the database's clock, so workers with
    skewed clocks agree. No periodic type: no query at all; none due: one.
    """
    types = {t.name: t for t in (periodic_types() if job_types is None else job_types)}
    if not types:
        return []
    with connection.cursor() as cursor:
        cursor.execute(STATES, {"names": list(types)})
        states = cursor.fetchall()
    queued = []
    for name, last_period, now in states:
        try:
            current = plan_for(types[name], last_period, now)
        except ValueError as exc:
            # A misconfiguration (the zone) stops this schedule only, not the other types' periods.
            log.error("schedule %s: %s", name, exc)
            continue
        if current.due is not None:
            job = take_period(types[name], current)
            if job is not None:
                queued.append(job)
    return queued


def take_period(job_type: registry.JobType, current: Plan) -> Job | None:
    """Enqueue ``current.due`` unless another worker has; None when it had (or a later period was taken)."""
    period = current.due
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(TAKE_PERIOD, {"name": job_type.name, "period": period, "next": current.next})
            if cursor.fetchone() is None:
                return None
            # A key per period besides: while its job is live, the period cannot be queued twice
            # even if the schedule's row is deleted (an operator resetting it).
            job = enqueue(job_type.name, org_id=SYSTEM_ORG, payload={"period": period.isoformat()},
                          dedup_key=dedup_key(job_type.name, period))
            cursor.execute(RECORD_JOB, {"job_id": job.id, "name": job_type.name, "period": period})
    log.info("job=%s schedule %s enqueued period %s", job.id, job_type.name, period.isoformat())
    return job
