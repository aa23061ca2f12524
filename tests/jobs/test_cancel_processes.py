"""Cancellation with real runjobs processes: a queued job never starts; a running one is told at its next
report_progress or heartbeat, ends failed 'cancelled' with on_fail, and its worker goes on.

The workers load tests/support/stoppable_types.py, whose handlers never end on their own within a test's
patience: a run that ends was stopped.
"""

import pytest

import jobs
from jobs import queue
from jobs.models import Job, JobStatus
from tests.support import stoppable_types
from tests.support.processes import runjobs, wait_for
from tests.support.stoppable_types import REPORTS, SLEEPS

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("test_types", "stoppable_types")]

MODULES = stoppable_types.WORKER_MODULES


def worker(processes, **env):
    proc = processes(runjobs, JOBS_HANDLER_MODULES=MODULES, **env)
    wait_for(lambda: "worker started" in proc.output(), timeout=60, message="the worker started")
    return proc


def status(job) -> str:
    return Job.objects.values_list("status", flat=True).get(pk=job.pk)


def runs_of(executions, job) -> list[str]:
    return [t for (t,) in executions("SELECT type FROM test_executions WHERE job_id = %s ORDER BY id", [job.id])]


def assert_runs_the_next_job(proc) -> None:
    """The same worker process goes on: a job enqueued now is done, by its pid."""
    after = queue.enqueue("test_record", org_id="demo")
    wait_for(lambda: status(after) == JobStatus.DONE, message="the next job done")
    assert Job.objects.get(pk=after.pk).report == {"pid": proc.pid}


def test_a_cancelled_queued_job_never_starts_and_its_on_fail_runs(processes, executions):
    job = queue.enqueue(REPORTS, org_id="demo", dedup_key="stop:once")
    assert jobs.cancel(job.id) is True
    job.refresh_from_db()
    assert (job.status, job.error, job.attempts, job.dedup_key) == (JobStatus.FAILED, "cancelled", 0, None)
    assert job.finished_at is not None and job.cancel_requested_at is not None
    assert runs_of(executions, job) == ["on_fail"]

    proc = worker(processes)
    # Enqueued after it: a worker that could start the cancelled job would have started it first.
    after = queue.enqueue("test_record", org_id="demo")
    wait_for(lambda: status(after) == JobStatus.DONE, message="the job enqueued after it done")

    assert status(job) == JobStatus.FAILED
    assert runs_of(executions, job) == ["on_fail"]  # no run
    assert Job.objects.get(pk=after.pk).report == {"pid": proc.pid}


def test_a_running_job_that_reports_is_cancelled_at_its_next_report_and_its_worker_goes_on(processes, executions):
    # A heartbeat too rare to come first: report_progress is what tells this run.
    proc = worker(processes, JOBS_HEARTBEAT_INTERVAL="30", JOBS_STALE_AFTER="120")
    job = queue.enqueue(REPORTS, org_id="demo")
    wait_for(lambda: (Job.objects.get(pk=job.pk).progress or {}).get("done", 0) >= 3, message="the job reporting")

    assert jobs.cancel(job.id) is True
    wait_for(lambda: status(job) == JobStatus.FAILED, message="the cancelled job failed")

    job.refresh_from_db()
    assert (job.error, job.attempts) == ("cancelled", 1)
    assert "report_progress" in job.traceback and "jobs.errors.JobCancelled" in job.traceback
    assert runs_of(executions, job) == [REPORTS, "on_fail"]
    assert_runs_the_next_job(proc)
    assert proc.alive()


def test_a_running_job_that_never_reports_is_told_by_the_heartbeat(processes, executions):
    proc = worker(processes)  # heartbeat every 0.5 s (tests/support/processes.py)
    job = queue.enqueue(SLEEPS, org_id="demo")
    wait_for(lambda: runs_of(executions, job), message="the job running")

    assert jobs.cancel(job.id) is True
    wait_for(lambda: status(job) == JobStatus.FAILED, message="the cancelled job failed")

    job.refresh_from_db()
    assert (job.error, job.attempts) == ("cancelled", 1)
    # Raised into the handler's own loop, from the heartbeat's thread.
    assert "sleeps_in_python" in job.traceback and "jobs.timeouts.Cancelled" in job.traceback
    assert runs_of(executions, job) == [SLEEPS, "on_fail"]
    assert_runs_the_next_job(proc)
