"""Job types that run beside a handler stuck in C (tests/jobs/test_timeouts_bystanders_processes.py): when
that handler's worker exits, they must not be charged for it. Registered per test in the pytest process,
for a worker subprocess's life through tests/support/bystander_worker_types.py. Importing registers nothing.

Each records its runs in ``test_executions`` (start and finish) and its ``on_fail`` as a row of type 'on_fail'.
"""

import time

from jobs.registry import JobType
from tests.support.handlers import record_finish, record_start
from tests.support.stoppable_types import mark_on_fail

# What a worker subprocess loads (JOBS_HANDLER_MODULES): these types and the stoppable ones.
WORKER_MODULES = "tests.support.stoppable_worker_types,tests.support.bystander_worker_types"


def sleeps_then_ends(job):
    """Sleeps ``payload.first`` seconds on the job's first claim, ``payload.later`` on any later one, in short
    Python sleeps, then ends done: a healthy handler, told nothing."""
    execution = record_start(job)
    payload = job.payload or {}
    seconds = float(payload.get("first" if job.attempts == 1 else "later", 0))
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        time.sleep(0.05)
    record_finish(execution)
    return {"attempt": job.attempts}


BYSTANDER = "test_bystander"

# One attempt and an on_fail: a run charged for another's fault fails for good.
TYPES = (JobType(BYSTANDER, sleeps_then_ends, max_attempts=1, on_fail=mark_on_fail),)
