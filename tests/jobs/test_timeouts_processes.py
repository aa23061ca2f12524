"""Timeouts with real runjobs processes: a handler running Python past its timeout is stopped (JobTimedOut)
and its worker goes on; one blocked in C cannot be, so its worker records the timeout itself and exits with
jobs.timeouts.EXIT_TIMED_OUT for its process manager to restart it.
"""

import pytest

from jobs import queue
from jobs.models import Job, JobStatus, Process
from jobs.timeouts import EXIT_TIMED_OUT
from tests.support import stoppable_types
from tests.support.processes import runjobs, wait_for
from tests.support.stoppable_types import BLOCKED_TIMEOUT, PYTHON_TIMEOUT, REPORTS_TIMEOUT

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("test_types", "stoppable_types")]

MODULES = stoppable_types.WORKER_MODULES


def status(job) -> str:
    return Job.objects.values_list("status", flat=True).get(pk=job.pk)


def runs_of(executions, job) -> list[tuple[str, int]]:
    return executions("SELECT type, attempt FROM test_executions WHERE job_id = %s ORDER BY id", [job.id])


def test_handlers_running_python_past_their_timeout_are_stopped_and_the_worker_goes_on(processes, executions):
    proc = processes(runjobs, JOBS_HANDLER_MODULES=MODULES, JOBS_RETRY_BASE="0.2")
    looping = queue.enqueue(PYTHON_TIMEOUT, org_id="demo")  # max_attempts=2: retried once
    reporting = queue.enqueue(REPORTS_TIMEOUT, org_id="demo")  # max_attempts=1
    after = queue.enqueue("test_record", org_id="demo")

    wait_for(lambda: [status(j) for j in (looping, reporting, after)] == [JobStatus.FAILED, JobStatus.FAILED,
                                                                          JobStatus.DONE],
             timeout=60, message="both timed out, the next job done")

    looping.refresh_from_db()
    reporting.refresh_from_db()
    assert (looping.error, looping.attempts) == ("timed out", 2)
    assert "sleeps_in_python" in looping.traceback and "TimedOut" in looping.traceback
    assert runs_of(executions, looping) == [(PYTHON_TIMEOUT, 1), (PYTHON_TIMEOUT, 2), ("on_fail", 2)]
    assert (reporting.error, reporting.attempts) == ("timed out", 1)
    assert "reports_in_a_loop" in reporting.traceback and "TimedOut" in reporting.traceback
    assert runs_of(executions, reporting) == [(REPORTS_TIMEOUT, 1), ("on_fail", 1)]
    assert Job.objects.get(pk=after.pk).report == {"pid": proc.pid}
    assert proc.alive()


def test_a_handler_blocked_in_c_past_its_timeout_is_recorded_and_its_worker_exits_to_be_restarted(
        processes, executions):
    proc = processes(runjobs, JOBS_HANDLER_MODULES=MODULES, JOBS_TIMEOUT_GRACE="1")
    job = queue.enqueue(BLOCKED_TIMEOUT, org_id="demo")  # sleeps 60 s in one C call; timeout 1 s

    assert proc.wait(timeout=45) == EXIT_TIMED_OUT

    job.refresh_from_db()
    # Recorded by the exiting worker itself, not left to the zombie sweep: max_attempts=1, so failed.
    assert (job.status, job.error, job.attempts) == (JobStatus.FAILED, "timed out", 1)
    assert "blocks_in_c" in job.traceback  # where the handler was stuck
    assert runs_of(executions, job) == [(BLOCKED_TIMEOUT, 1), ("on_fail", 1)]
    output = proc.output()
    assert "cannot be stopped" in output and f"exiting with code {EXIT_TIMED_OUT}" in output
    assert not Process.objects.filter(pid=proc.pid).exists()

    # What its process manager does next (Restart=always, make run): a fresh worker takes the queue on.
    restarted = processes(runjobs, JOBS_HANDLER_MODULES=MODULES)
    after = queue.enqueue("test_record", org_id="demo")
    wait_for(lambda: status(after) == JobStatus.DONE, timeout=60, message="the restarted worker's job done")
    assert Job.objects.get(pk=after.pk).report == {"pid": restarted.pid}
