"""The worker loop in-process (burst mode): outcomes, failures, lost jobs, heartbeats."""

import threading
import time

import pytest
from django.db import connection

import tests.support.handlers
from jobs import queue, sweep
from jobs.heartbeat import fence_after
from jobs.models import Job, JobStatus
from jobs.worker import Worker
from tests.factories import JobFactory
from tests.support.processes import run_burst

pytestmark = pytest.mark.usefixtures("test_types")


def test_handler_failure_fails_the_job_calls_on_fail_and_the_worker_goes_on(executions):
    bad = queue.enqueue("test_fail", org_id="demo", payload={"name": "broken.csv"})
    good = queue.enqueue("noop", org_id="demo")

    assert run_burst() == 2

    bad = Job.objects.get(pk=bad.id)
    assert bad.status == JobStatus.FAILED
    assert bad.error == "ValueError: bad input in broken.csv"
    assert "Traceback" in bad.traceback
    assert bad.dedup_key is None and bad.finished_at is not None
    assert [row[1] for row in executions()] == ["on_fail"]
    assert Job.objects.get(pk=good.id).status == JobStatus.DONE


def test_report_of_a_done_job_is_the_handlers_return_value(db):
    job = queue.enqueue("noop", org_id="demo", payload={"sleep": 0.01})
    run_burst()
    job = Job.objects.get(pk=job.id)
    assert job.status == JobStatus.DONE
    assert job.report == {"slept": 0.01}


def test_a_job_of_a_type_the_worker_does_not_know_is_left_queued_for_one_that_does(db):
    """A rolling deploy: the new type waits for a new worker instead of failing for good on an old one."""
    job = JobFactory(type="added_in_the_next_release")
    known = queue.enqueue("noop", org_id="demo")
    assert run_burst() == 1
    job = Job.objects.get(pk=job.id)
    assert (job.status, job.attempts, job.error) == (JobStatus.QUEUED, 0, None)
    assert Job.objects.get(pk=known.id).status == JobStatus.DONE


def test_a_report_that_is_not_a_dict_fails_the_job(db, temporary_type):
    temporary_type("test_returns_list", lambda job: [1, 2])
    temporary_type("test_returns_unserialisable", lambda job: {"when": object()})
    a = queue.enqueue("test_returns_list", org_id="demo")
    b = queue.enqueue("test_returns_unserialisable", org_id="demo")
    run_burst()
    assert Job.objects.get(pk=a.id).error == "handler returned list, expected a dict or None"
    assert "not JSON" in Job.objects.get(pk=b.id).error


def test_a_handler_stopped_by_job_lost_leaves_the_operators_decision(db, temporary_type):
    def gives_up_midway(job):
        queue.mark_failed([job.id], "marked failed by ops")
        job.report_progress(done=1)
        return {"unreachable": True}

    temporary_type("test_loses_its_job", gives_up_midway)
    job = queue.enqueue("test_loses_its_job", org_id="demo")
    run_burst()
    job = Job.objects.get(pk=job.id)
    assert (job.status, job.error, job.report) == (JobStatus.FAILED, "marked failed by ops", None)


def test_losing_the_database_connection_requeues_the_job_instead_of_failing_it(transactional_db, temporary_type):
    def kills_its_own_connection(job):
        if job.attempts == 1:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return {"attempt": job.attempts}

    temporary_type("test_connection_dies", kills_its_own_connection)
    job = queue.enqueue("test_connection_dies", org_id="demo")
    assert run_burst() == 2
    job = Job.objects.get(pk=job.id)
    assert (job.status, job.attempts, job.report) == (JobStatus.DONE, 2, {"attempt": 2})


def test_max_jobs_stops_the_worker(db):
    for _ in range(3):
        queue.enqueue("noop", org_id="demo")
    assert Worker(max_jobs=2, listen=False).run() == 2
    assert Job.objects.queued().count() == 1


def sweep_from_another_worker() -> list:
    """Run a sweep on a connection of its own, as another worker's sweeper would; returns the ids it re-queued."""
    found = []

    def sweep_there():
        try:
            found.extend(str(j.id) for j in sweep.run_once().requeued)
        finally:
            connection.close()

    thread = threading.Thread(target=sweep_there)
    thread.start()
    thread.join(timeout=30)
    return found


def run_one_without_heartbeats() -> int:
    """One job in this process, its heartbeat too slow to land before the test's stale_after."""
    return Worker(max_jobs=1, listen=False, heartbeat_interval=60).run()


def quiet_then_swept(job):
    time.sleep(1.2)  # twice the threshold without reporting progress
    return {"swept": sweep_from_another_worker()}


def test_the_worker_heartbeat_keeps_a_long_handler_from_being_swept(transactional_db, settings, temporary_type):
    """stale_after means "the worker is gone", not "the handler was quiet"."""
    settings.JOBS_STALE_AFTER = 0.6
    temporary_type("test_quiet", quiet_then_swept)
    job = queue.enqueue("test_quiet", org_id="demo")
    run_burst(heartbeat_interval=0.1)
    job = Job.objects.get(pk=job.id)
    assert job.status == JobStatus.DONE
    assert job.report == {"swept": []}
    assert "updated_at" in job.progress


def test_without_heartbeats_the_same_quiet_handler_is_swept(transactional_db, settings, temporary_type):
    """The control for the test above: the sweep does catch a silent run."""
    settings.JOBS_STALE_AFTER = 0.6
    temporary_type("test_quiet", quiet_then_swept)
    job = queue.enqueue("test_quiet", org_id="demo")
    run_one_without_heartbeats()
    job = Job.objects.get(pk=job.id)
    assert job.status == JobStatus.QUEUED  # swept back; its late result was discarded
    assert job.report is None


def test_a_run_that_could_not_heartbeat_and_was_swept_writes_nothing_more(executions, settings, temporary_type):
    """Its heartbeats did not land (here: none sent), another worker swept the job: the handler's next
    statement raises JobLost instead of writing, whatever the handler does between report_progress calls."""
    settings.JOBS_STALE_AFTER = 0.6
    outcome = {}

    def writes_after_being_swept(job):
        time.sleep(1.2)
        outcome["swept"] = sweep_from_another_worker()
        try:
            tests.support.handlers.record_start(job)  # a domain write, no report_progress
        except queue.JobLost as exc:
            outcome["stopped"] = str(exc)
            raise

    temporary_type("test_late_writer", writes_after_being_swept)
    job = queue.enqueue("test_late_writer", org_id="demo")
    run_one_without_heartbeats()
    assert outcome["swept"] == [str(job.id)]
    assert "taken from this run" in outcome.get("stopped", ""), "the late write was not stopped"
    assert executions() == [], "the swept run wrote after losing its job"
    assert Job.objects.get(pk=job.id).status == JobStatus.QUEUED


def test_a_run_whose_heartbeats_were_late_but_kept_its_job_goes_on(executions, settings, temporary_type):
    """The fence re-proves ownership instead of giving up: a job nobody took is still this run's."""
    settings.JOBS_STALE_AFTER = 0.6

    def late_but_ours(job):
        time.sleep(1.2)
        tests.support.handlers.record_start(job)
        return {"wrote": True}

    temporary_type("test_late_but_ours", late_but_ours)
    job = queue.enqueue("test_late_but_ours", org_id="demo")
    run_one_without_heartbeats()
    assert Job.objects.get(pk=job.id).status == JobStatus.DONE
    assert len(executions()) == 1


@pytest.mark.parametrize("stale_after, heartbeat, expected", [(60, 10, 50), (3, 0.5, 2.5), (60, 40, 30), (10, 5, 5)])
def test_fence_after(stale_after, heartbeat, expected):
    assert fence_after(stale_after, heartbeat) == expected


def test_a_handler_raising_an_exception_whose_chain_loops_fails_its_job_and_the_worker_goes_on(transactional_db,
                                                                                             temporary_type):
    """Each walk of an exception's chain (is it a lost database? which SQLSTATE?) sees each exception once."""
    def looping(job):
        outer, inner = RuntimeError("outer"), ValueError("inner")
        outer.__context__, inner.__context__ = inner, outer
        raise outer

    temporary_type("test_looping_chain", looping, max_attempts=1)
    job = queue.enqueue("test_looping_chain", org_id="demo")
    ran = []
    # In a thread: a walk that loops would never return, and the test must end to say so.
    worker = threading.Thread(target=lambda: ran.append(run_burst()), daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "the worker is stuck walking the exception's chain"
    assert ran == [1]
    job = Job.objects.get(pk=job.id)
    assert (job.status, job.error) == (JobStatus.FAILED, "RuntimeError: outer")
