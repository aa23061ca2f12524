"""Job types used by the tests, declared here and registered by whoever needs them: per test
in the pytest process (the ``test_types`` and ``guarded_type`` fixtures, tests/jobs/conftest.py),
for a process's life in worker subprocesses (tests/support/worker_types.py, loaded through
JOBS_HANDLER_MODULES). Importing this module registers nothing.

Handlers that matter for concurrency write to ``test_executions`` — a record
of what actually ran, independent of the statuses the queue reports.
"""

import logging
import os
import time

from django.db import connection

from jobs.registry import JobType

EXECUTIONS_DDL = """
CREATE TABLE IF NOT EXISTS test_executions (
    id bigserial PRIMARY KEY,
    job_id uuid NOT NULL,
    type text NOT NULL,
    attempt integer NOT NULL,
    pid integer NOT NULL,
    site_id text,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at timestamptz
)
"""


def record_start(job) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO test_executions (job_id, type, attempt, pid, site_id) VALUES (%s, %s, %s, %s, %s) RETURNING id",
            [job.id, job.type, job.attempts, os.getpid(), (job.payload or {}).get("site_id")],
        )
        return cursor.fetchone()[0]


def record_finish(execution_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("UPDATE test_executions SET finished_at = clock_timestamp() WHERE id = %s", [execution_id])


def _sleep_from(job):
    seconds = float((job.payload or {}).get("sleep") or 0)
    if seconds:
        time.sleep(seconds)


def run_recorded(job) -> None:
    """Record the run's start, sleep ``payload.sleep``, record its end."""
    execution = record_start(job)
    _sleep_from(job)
    record_finish(execution)


def record(job):
    """Records its execution, optionally sleeps ``payload.sleep``."""
    run_recorded(job)
    return {"pid": os.getpid()}


def guarded(job):
    run_recorded(job)


def active(job):
    run_recorded(job)


def _mark_on_fail(job):
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO test_executions (job_id, type, attempt, pid) VALUES (%s, 'on_fail', %s, %s)",
            [job.id, job.attempts, os.getpid()],
        )


def fail(job):
    raise ValueError(f"bad input in {job.payload.get('name', 'job')}")


def slow(job):
    """Records, then sleeps: the victim of kill -9 tests."""
    run_recorded(job)


def _slow_on_fail(job):
    """An on_fail that takes ``payload.on_fail_sleep`` seconds, announced in the log (it may run
    inside the failing transaction, where a row it writes is not visible yet)."""
    logging.getLogger(__name__).warning("job=%s slow on_fail started", job.id)
    time.sleep(float((job.payload or {}).get("on_fail_sleep") or 0))


def slow_on_fail(job):
    """Records, then sleeps: as a zombie at its one attempt, the sweep fails it and runs the slow on_fail."""
    run_recorded(job)


def exits(job):
    """Calls sys.exit(): a handler's SystemExit fails its job, never the worker."""
    raise SystemExit(4)


# Registered per test by the ``test_types`` fixture. None is guarded, as none of
# the apps' types is: with these alone a claim takes the unguarded statement.
TYPES = (
    JobType("test_record", record),
    JobType("test_active", active, dedup_scope="active"),
    JobType("test_fail", fail, on_fail=_mark_on_fail),
    JobType("test_slow", slow, max_attempts=2, on_fail=_mark_on_fail),
    JobType("test_slow_on_fail", slow_on_fail, max_attempts=1, on_fail=_slow_on_fail),
    JobType("test_exit", exits),
)

# One running job per site_id: registered by the ``guarded_type`` fixture, so
# only the tests of the guard take the guarded claim.
GUARDED = JobType("test_guarded", guarded, one_running_per="site_id")
