"""Tasks run by the worker loop, in-process (burst mode): return values, errors, context, async, options.

After django-tasks-db's DatabaseBackendWorkerTestCase where it applies; real ``runjobs``
processes are in test_tasks_processes.py.
"""

from __future__ import annotations

import os
import socket

import pytest
from django.urls import reverse

from jobs import queue
from jobs.models import Job, JobStatus
from jobs.tasks_compat import TaskResultStatus, default_task_backend, task_finished, task_started
from tests.factories import OrgFactory, UserFactory
from tests.support.processes import run_burst
from tests.support.task_registry import loaded_tasks

pytestmark = pytest.mark.django_db

WORKER_ID = f"{socket.gethostname()}:{os.getpid()}"


@pytest.fixture
def tasks():
    with loaded_tasks() as module:
        yield module


def test_a_task_runs_and_its_return_value_is_read_back(tasks):
    result = tasks.calculate_meaning_of_life.enqueue()
    assert run_burst() == 1

    assert result.status == TaskResultStatus.READY  # a result is a snapshot until refreshed
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.is_finished
    assert result.return_value == 42
    assert result.enqueued_at <= result.started_at <= result.finished_at
    assert result.last_attempted_at == result.started_at
    assert (result.attempts, result.worker_ids, result.errors) == (1, [WORKER_ID], [])
    job = Job.objects.get(pk=result.id)
    assert (job.status, job.report) == (JobStatus.DONE, {"return_value": 42})


def test_arguments_and_return_value_make_the_json_round_trip(tasks):
    result = tasks.echo.enqueue(1, (2, "three"), flag=True, nested={"a": [None, 1.5]})
    run_burst()
    result.refresh()
    assert result.return_value == {"args": [1, [2, "three"]], "kwargs": {"flag": True, "nested": {"a": [None, 1.5]}}}


def test_an_async_task_runs_on_the_processes_event_loop(tasks):
    result = tasks.add_async.enqueue(2, 3)
    other = tasks.noop_task_async.enqueue()
    assert run_burst() == 2
    result.refresh()
    assert result.return_value == {"sum": 5, "loop_thread": "jobs-event-loop"}
    assert default_task_backend.get_result(other.id).status == TaskResultStatus.SUCCESSFUL


def test_a_failing_task_records_its_exception_class_and_traceback(tasks):
    result = tasks.failing_task_value_error.enqueue()
    run_burst()
    result.refresh()

    assert result.status == TaskResultStatus.FAILED
    assert result.started_at <= result.finished_at
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018
    (error,) = result.errors
    assert error.exception_class is ValueError
    assert "ValueError: This task failed due to ValueError\n" in error.traceback
    assert Job.objects.get(pk=result.id).error == "ValueError: This task failed due to ValueError"


def test_a_complex_exception(tasks):
    result = tasks.complex_exception.enqueue()
    run_burst()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class is ValueError
    assert 'ValueError(ValueError("This task failed"))' in result.errors[0].traceback


def test_a_return_value_that_is_not_json_fails_the_task(tasks):
    result = tasks.complex_return_value.enqueue()
    run_burst()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result._return_value is None
    assert result.errors[0].exception_class is TypeError


def test_a_task_raising_system_exit_fails_and_the_worker_goes_on(tasks):
    exiting = tasks.exit_task.enqueue()
    after = tasks.calculate_meaning_of_life.enqueue()
    assert run_burst() == 2
    assert default_task_backend.get_result(exiting.id).errors[0].exception_class is SystemExit
    assert default_task_backend.get_result(after.id).return_value == 42


def test_takes_context_gives_the_result_of_the_run(tasks):
    result = tasks.get_task_id.enqueue()
    attempt = tasks.check_context.enqueue(1)
    run_burst()
    assert default_task_backend.get_result(result.id).return_value == result.id
    checked = default_task_backend.get_result(attempt.id)
    assert checked.status == TaskResultStatus.SUCCESSFUL, checked.errors
    assert checked.return_value == [WORKER_ID]


def test_the_context_reports_progress(tasks):
    result = tasks.progress.enqueue(3)
    run_burst()
    job = Job.objects.get(pk=result.id)
    assert (job.status, job.progress["done"], job.progress["total"]) == (JobStatus.DONE, 3, 3)
    assert "updated_at" in job.progress


def test_a_retry_runs_the_task_again_within_max_attempts(tasks):
    result = tasks.asks_for_retry.enqueue()  # Retry(after=0), max_attempts=2
    assert run_burst() == 2
    result.refresh()
    assert (result.status, result.attempts) == (TaskResultStatus.FAILED, 2)
    assert result.errors[0].exception_class_path == "jobs.errors.Retry"


# Transactional: the retry's run_after is now() + the delay, and inside one transaction now() never passes it.
@pytest.mark.django_db(transaction=True)
def test_retry_on_retries_with_backoff_until_the_task_succeeds(tasks, settings):
    settings.JOBS_RETRY_BASE = 0.001
    settings.JOBS_RETRY_MAX = 0.002
    result = tasks.flaky.enqueue()  # ConnectionError on attempts 1 and 2, retry_on=(ConnectionError,)
    runs = 0
    for _ in range(50):
        runs += run_burst()
        result.refresh()
        if result.is_finished:
            break
    assert runs == 3
    assert (result.status, result.return_value, result.attempts) == (TaskResultStatus.SUCCESSFUL, 3, 3)


@pytest.mark.django_db(transaction=True)
def test_on_fail_is_given_the_failed_result(tasks, executions):
    result = tasks.doomed.enqueue()
    run_burst()
    assert executions("SELECT job_id::text, type, attempt FROM test_executions") == [(result.id, "on_fail", 1)]
    assert default_task_backend.get_result(result.id).status == TaskResultStatus.FAILED


def test_the_run_sends_the_apis_started_and_finished_signals(tasks):
    seen = []

    def started(sender, task_result, **kwargs):
        seen.append(("started", task_result.id, task_result.status))

    def finished(sender, task_result, **kwargs):
        seen.append(("finished", task_result.id, task_result.status))

    task_started.connect(started, dispatch_uid="test_tasks_started", weak=False)
    task_finished.connect(finished, dispatch_uid="test_tasks_finished", weak=False)
    try:
        ok = tasks.noop_task.enqueue()
        bad = tasks.failing_task_value_error.enqueue()
        run_burst()
    finally:
        task_started.disconnect(started, dispatch_uid="test_tasks_started")
        task_finished.disconnect(finished, dispatch_uid="test_tasks_finished")
    for result, end in ((ok, TaskResultStatus.SUCCESSFUL), (bad, TaskResultStatus.FAILED)):
        assert [(what, status) for what, task_id, status in seen if task_id == result.id] == [
            ("started", TaskResultStatus.RUNNING), ("finished", end)]
    assert len(seen) == 4


def test_registered_job_types_and_tasks_share_the_queue(tasks):
    job = queue.enqueue("noop", org_id="acme", payload={"sleep": 0})
    result = tasks.noop_task.enqueue()
    assert run_burst() == 2
    assert Job.objects.get(pk=job.id).report == {"slept": 0}
    assert default_task_backend.get_result(result.id).status == TaskResultStatus.SUCCESSFUL


def test_a_task_job_is_shown_to_its_org_like_any_job(tasks, client):
    client.force_login(UserFactory(org=OrgFactory(id="acme")))
    mine = tasks.calculate_meaning_of_life.using(org_id="acme").enqueue()
    system = tasks.calculate_meaning_of_life.enqueue()
    run_burst()

    response = client.get(f"/jobs/{mine.id}")
    assert response.status_code == 200
    body = response.json()
    assert (body["type"], body["status"], body["report"]) == (
        "tests.support.task_functions.calculate_meaning_of_life", "done", {"return_value": 42})
    assert client.get(f"/jobs/{system.id}").status_code == 404


def test_the_admin_shows_a_task_job_and_its_traceback_to_staff(tasks, admin_client):
    OrgFactory(id="acme")
    result = tasks.failing_task_value_error.using(org_id="acme").enqueue()
    run_burst()

    listing = admin_client.get(reverse("admin:jobs_job_changelist"))
    assert listing.status_code == 200
    assert result.id in {str(job.pk) for job in listing.context["cl"].result_list}
    page = admin_client.get(reverse("admin:jobs_job_change", args=[result.id])).content.decode()
    assert "tests.support.task_functions.failing_task_value_error" in page
    assert "Traceback" in page and "task exception class: builtins.ValueError" in page
