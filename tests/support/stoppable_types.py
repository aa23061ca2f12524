"""Job types that must be stopped from outside: cancelled (tests/jobs/test_cancel*.py) or timed out
(tests/jobs/test_timeouts*.py). Declared here, registered by whoever needs them: per test in the pytest
process (``stoppable_types`` fixtures), for a worker subprocess's life through
tests/support/stoppable_worker_types.py (JOBS_HANDLER_MODULES). Importing this module registers nothing.

Each records its runs in ``test_executions`` (tests/support/handlers.py) and its ``on_fail`` as a row of
type 'on_fail'. None ends on its own within a test's patience (a minute): only a cancel or a timeout
ends it.
"""

import os
import time

from django.db import connection

from jobs.registry import JobType
from tests.support.handlers import record_start

# What a worker subprocess loads (JOBS_HANDLER_MODULES) to know these types and the usual test types.
WORKER_MODULES = "tests.support.worker_types,tests.support.stoppable_worker_types"

# Longer than any test waits: a run that ends before this was stopped.
PATIENCE = 60.0


def mark_on_fail(job):
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO test_executions (job_id, type, attempt, pid) VALUES (%s, 'on_fail', %s, %s)",
                       [job.id, job.attempts, os.getpid()])


def reports_in_a_loop(job):
    """Reports progress every 50 ms: told of a cancel or its timeout by ``report_progress``."""
    record_start(job)
    ends = time.monotonic() + PATIENCE
    step = 0
    while time.monotonic() < ends:
        step += 1
        job.report_progress(done=step)
        time.sleep(0.05)
    return {"ran_out": True}


def sleeps_in_python(job):
    """Short sleeps in a Python loop, never reporting: only the heartbeat or the watchdog can tell it."""
    record_start(job)
    ends = time.monotonic() + PATIENCE
    while time.monotonic() < ends:
        time.sleep(0.02)
    return {"ran_out": True}


def blocks_in_c(job):
    """One long sleep in C: an exception raised into its thread lands only when the sleep returns."""
    record_start(job)
    time.sleep(PATIENCE)
    return {"ran_out": True}


REPORTS = "test_stop_reports"
SLEEPS = "test_stop_sleeps"
REPORTS_TIMEOUT = "test_timeout_reports"
PYTHON_TIMEOUT = "test_timeout_python"
BLOCKED_TIMEOUT = "test_timeout_blocked"

TYPES = (
    JobType(REPORTS, reports_in_a_loop, on_fail=mark_on_fail),
    JobType(SLEEPS, sleeps_in_python, on_fail=mark_on_fail),
    JobType(REPORTS_TIMEOUT, reports_in_a_loop, timeout=1, max_attempts=1, on_fail=mark_on_fail),
    # Retried once (attempts remain after the first timeout), then failed.
    JobType(PYTHON_TIMEOUT, sleeps_in_python, timeout=1, max_attempts=2, on_fail=mark_on_fail),
    JobType(BLOCKED_TIMEOUT, blocks_in_c, timeout=1, max_attempts=1, on_fail=mark_on_fail),
)
