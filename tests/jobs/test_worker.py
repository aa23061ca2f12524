"""The worker loop in-process (burst mode): outcomes, failures, lost jobs, heartbeats."""

import time

import pytest
from django.db import connection

from jobs import queue, registry, sweep
from jobs.models import Job, JobStatus
from jobs.worker import Worker
from tests.factories import JobFactory


def run_burst(**kwargs) -> int:
    return Worker(burst=True, listen=False, **kwargs).run()


@pytest.fixture
def temporary_type():
    names = []

    def register(name, handler, **options):
        registry.register(name, handler, **options)
        names.append(name)

    yield register
    for name in names:
        registry.unregister(name)


def test_handler_failure_fails_the_job_calls_on_fail_and_the_worker_goes_on(executions):
    bad = queue.enqueue("test_fail", org_id="demo", payload={"name": "broken.csv"})
    good = queue.enqueue("noop", org_id="demo")

    assert run_burst() == 2

    bad = Job.objects.get(pk=bad.id)
    assert bad.status == JobStatus.FAILED
    assert bad.error == "ValueError: bad input in broken.csv"
    assert "Traceback" in bad.report["traceback"]
    assert bad.dedup_key is None and bad.finished_at is not None
    assert [row[1] for row in executions()] == ["on_fail"]
    assert Job.objects.get(pk=good.id).status == JobStatus.DONE


def test_report_of_a_done_job_is_the_handlers_return_value(db):
    job = queue.enqueue("noop", org_id="demo", payload={"sleep": 0.01})
    run_burst()
    job = Job.objects.get(pk=job.id)
    assert job.status == JobStatus.DONE
    assert job.report == {"slept": 0.01}


def test_a_job_of_an_unknown_type_fails_with_a_clear_error(db):
    job = JobFactory(type="vanished_type")
    run_burst()
    job = Job.objects.get(pk=job.id)
    assert job.status == JobStatus.FAILED
    assert "unknown job type 'vanished_type'" in job.error


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


def test_the_worker_heartbeat_keeps_a_long_handler_from_being_swept(transactional_db, settings, temporary_type):
    """stale_after means "the worker is gone", not "the handler was quiet"."""
    settings.JOBS_STALE_AFTER = 0.6

    def quiet_then_sweep(job):
        time.sleep(1.2)  # twice the threshold without reporting progress
        result = sweep.run_once()
        return {"swept": [str(j.id) for j in result.requeued]}

    temporary_type("test_quiet", quiet_then_sweep)
    job = queue.enqueue("test_quiet", org_id="demo")
    run_burst(heartbeat_interval=0.1)
    job = Job.objects.get(pk=job.id)
    assert job.status == JobStatus.DONE
    assert job.report == {"swept": []}
    assert "updated_at" in job.progress


def test_without_heartbeats_the_same_quiet_handler_is_swept(transactional_db, settings, temporary_type):
    """The control for the test above: the sweep does catch a silent run."""
    settings.JOBS_STALE_AFTER = 0.6

    def quiet_then_sweep(job):
        time.sleep(1.2)
        result = sweep.run_once()
        return {"swept": [str(j.id) for j in result.requeued]}

    temporary_type("test_quiet", quiet_then_sweep)
    job = queue.enqueue("test_quiet", org_id="demo")
    Worker(max_jobs=1, listen=False, heartbeat_interval=60).run()
    job = Job.objects.get(pk=job.id)
    assert job.status == JobStatus.QUEUED  # swept back; its late result was discarded
    assert job.report is None
