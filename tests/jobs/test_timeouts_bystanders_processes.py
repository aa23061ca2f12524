"""A worker that exits because one handler is blocked in C past its timeout (jobs.timeouts.EXIT_TIMED_OUT)
charges that run only: its other runs, healthy, finish within JOBS_EXIT_GRACE, and those that cannot are
handed back to the queue with their attempt not counted and no on_fail, for the next worker to run.
Real ``runjobs --concurrency 8`` processes; the bystanders have one attempt and an on_fail.
"""

import pytest

from jobs import queue, registry
from jobs.models import Job, JobStatus
from jobs.timeouts import EXIT_TIMED_OUT
from tests.support import bystander_types as bystander
from tests.support.bystander_types import BYSTANDER
from tests.support.processes import runjobs
from tests.support.stoppable_types import BLOCKED_TIMEOUT

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("stoppable_types", "bystander_types")]

MODULES = bystander.WORKER_MODULES
BYSTANDERS = 7  # with the stuck one, every slot of --concurrency 8 busy from the first claim


@pytest.fixture
def bystander_types():
    with registry.registered(*bystander.TYPES):
        yield


def enqueue_stuck_and_bystanders(payload: dict) -> tuple[Job, list[Job]]:
    """The stuck job first, so the worker's first claim (all 8 slots) takes it with every bystander."""
    stuck = queue.enqueue(BLOCKED_TIMEOUT, org_id="demo")  # sleeps 60 s in one C call; timeout 1 s
    return stuck, [queue.enqueue(BYSTANDER, org_id="demo", payload=payload) for _ in range(BYSTANDERS)]


def runs_of(executions, job) -> list[tuple[str, int, bool]]:
    """``(type, attempt, finished)`` of each run of ``job``, and of its on_fail."""
    return executions("SELECT type, attempt, finished_at IS NOT NULL FROM test_executions WHERE job_id = %s "
                      "ORDER BY id", [job.id])


def assert_stuck_charged(executions, stuck: Job) -> None:
    stuck.refresh_from_db()
    assert (stuck.status, stuck.error, stuck.attempts) == (JobStatus.FAILED, "timed out", 1)
    assert runs_of(executions, stuck) == [(BLOCKED_TIMEOUT, 1, False), ("on_fail", 1, False)]


def test_the_other_runs_of_a_worker_exiting_for_a_stuck_handler_finish_within_the_exit_grace(
        processes, executions):
    stuck, bystanders = enqueue_stuck_and_bystanders({"first": 4})
    proc = processes(runjobs, "--concurrency", "8", JOBS_HANDLER_MODULES=MODULES, JOBS_TIMEOUT_GRACE="1",
                     JOBS_EXIT_GRACE="30")

    assert proc.wait(timeout=60) == EXIT_TIMED_OUT

    assert_stuck_charged(executions, stuck)
    for job in bystanders:
        job.refresh_from_db()
        assert (job.status, job.error, job.attempts, job.report) == (JobStatus.DONE, None, 1, {"attempt": 1})
        assert runs_of(executions, job) == [(BYSTANDER, 1, True)]  # ran once, to its end; no on_fail
    assert "cannot be stopped" in proc.output()


def test_the_runs_that_cannot_finish_within_the_exit_grace_go_back_uncharged_and_the_next_worker_runs_them(
        processes, executions):
    stuck, bystanders = enqueue_stuck_and_bystanders({"first": 60, "later": 0.2})
    proc = processes(runjobs, "--concurrency", "8", JOBS_HANDLER_MODULES=MODULES, JOBS_TIMEOUT_GRACE="1",
                     JOBS_EXIT_GRACE="1")

    assert proc.wait(timeout=60) == EXIT_TIMED_OUT

    assert_stuck_charged(executions, stuck)
    output = proc.output()
    for job in bystanders:
        job.refresh_from_db()
        # Back in the queue with the attempt the exit cut short not counted: one of one still to run.
        assert (job.status, job.error, job.attempts, job.uncounted_attempts) == (JobStatus.QUEUED, None, 1, 1)
        assert runs_of(executions, job) == [(BYSTANDER, 1, False)]  # cut short; no on_fail
        assert f"job={job.id} type={BYSTANDER} handed back to the queue" in output  # the log names each one

    second = processes(runjobs, "--concurrency", "8", "--burst", JOBS_HANDLER_MODULES=MODULES)
    assert second.wait(timeout=60) == 0
    for job in bystanders:
        job.refresh_from_db()
        assert (job.status, job.error, job.report) == (JobStatus.DONE, None, {"attempt": 2})
        assert runs_of(executions, job) == [(BYSTANDER, 1, False), (BYSTANDER, 2, True)]
