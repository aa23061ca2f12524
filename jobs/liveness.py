"""Whether a live job shows a sign of life, as the pages that list it say it.

A running job is silent by the sweep's rule (``sql.STALE``: its last heartbeat, never counted from before the
database's start, older than its type's ``stale_after``); a queued job that could start waits for a worker
when no ``runjobs`` was seen within ``processes.ALIVE_WITHIN`` for ``NO_WORKER_AFTER`` seconds. ``Clock`` is
read once per page (one query), on the database's clock, and ``stalled`` judges each job by it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection

from . import processes, registry
from .durations import readable_duration
from .models import JobStatus, ProcessKind

# A queued job waits this long for a worker before its page says none is running (a worker claims within a
# second when one runs, so 30 s without one is a stopped runjobs, not a busy queue).
NO_WORKER_AFTER = timedelta(seconds=30)
LIVE = (JobStatus.QUEUED, JobStatus.RUNNING)  # the states ``stalled`` may speak of


@dataclass(frozen=True)
class Clock:
    now: datetime  # the database's now()
    server_start: datetime  # pg_postmaster_start_time(): silence never counts from before it
    worker_running: bool  # a runjobs seen within processes.ALIVE_WITHIN


def read_clock() -> Clock:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT now(), pg_postmaster_start_time(), EXISTS (SELECT 1 FROM jobs_process WHERE kind = %s"
            " AND heartbeat_at >= now() - make_interval(secs => %s))",
            [ProcessKind.RUNJOBS, processes.ALIVE_WITHIN])
        return Clock(*cursor.fetchone())


def stale_after(job_type: str) -> float:
    known = registry.all_types().get(job_type)
    return known.stale_after if known is not None else registry.default_stale_after()


def last_sign_of_life(job) -> datetime | None:
    """The running job's latest heartbeat (``progress.updated_at``), else its start."""
    signs = [job.started_at] if job.started_at is not None else []
    beat = job.progress.get("updated_at") if isinstance(job.progress, dict) else None
    if isinstance(beat, str):
        try:
            signs.append(datetime.fromisoformat(beat))
        except ValueError:
            pass  # not a time: the start is the sign of life, as the sweep's cast would fail on it anyway
    return max(signs) if signs else None


def stalled(job, clock: Clock) -> str | None:
    """What to say instead of the job's status, or None while it is live and well (or finished)."""
    if job is None:
        return None
    if job.status == JobStatus.RUNNING:
        since = last_sign_of_life(job)
        if since is None:
            return None
        silence = clock.now - max(since, clock.server_start)
        if silence > timedelta(seconds=stale_after(job.type)):
            return f"No sign of life for {readable_duration(silence)}"
        return None
    if job.status == JobStatus.QUEUED and not clock.worker_running:
        # A scheduled job, or one backing off before a retry, is not late before its time.
        due = max(job.created_at, job.run_after) if job.run_after is not None else job.created_at
        if clock.now - due > NO_WORKER_AFTER:
            return f"Queued {readable_duration(clock.now - job.created_at)} ago — no worker is running"
    return None
