"""The task backend's API without a worker: enqueue, get_result, refresh, validation.

After django-tasks-db's DatabaseBackendTestCase, for what applies to a database backend; the
runs themselves are in test_tasks_worker.py (in-process) and test_tasks_processes.py (runjobs).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import pytest
from asgiref.sync import async_to_sync
from django.db import connections, transaction
from django.utils import timezone

from jobs import registry
from jobs.models import Job, JobStatus
from jobs.queue import enqueue
from jobs.system import SYSTEM_ORG
from jobs.tasks import PostgresBackend, PostgresTask
from jobs.tasks_compat import (
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultMismatch,
    TaskResultStatus,
    default_task_backend,
    task_backends,
    task_enqueued,
)
from tests.support.task_registry import loaded_tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def tasks():
    with loaded_tasks() as module:
        yield module


@pytest.fixture
def enqueued_signals():
    received = []

    def capture(sender, task_result, **kwargs):
        received.append((sender, task_result))

    task_enqueued.connect(capture, dispatch_uid="test_tasks_enqueued", weak=False)
    yield received
    task_enqueued.disconnect(capture, dispatch_uid="test_tasks_enqueued")


def jobs_seen_by_another_connection() -> int:
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM jobs")
            return cursor.fetchone()[0]
    finally:
        other.close()


# -- the backend ----------------------------------------------------------------------

def test_the_projects_default_backend_is_the_queue():
    assert default_task_backend == task_backends["default"]
    backend = task_backends["default"]
    assert isinstance(backend, PostgresBackend) and backend.alias == "default"
    assert (backend.supports_defer, backend.supports_async_task, backend.supports_get_result,
            backend.supports_priority) == (True, True, True, True)
    assert list(backend.check()) == []


def test_a_task_is_a_job_type_named_by_its_import_path(tasks):
    job_type = registry.get("tests.support.task_functions.with_options")
    assert (job_type.max_attempts, job_type.timeout, job_type.stale_after) == (5, 30, 90)
    assert registry.get(tasks.flaky.module_path).retry_on == (ConnectionError,)
    assert registry.get(tasks.per_site.module_path).one_running_per == "site_id"
    assert registry.get(tasks.singleton.module_path).dedup_scope == "active"
    assert registry.get(tasks.doomed.module_path).on_fail is not None
    assert registry.get(tasks.noop_task.module_path).on_fail is None


# -- enqueue --------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["noop_task", "noop_task_async"])
def test_enqueue_inserts_one_row_and_returns_a_ready_result(tasks, name, enqueued_signals,
                                                             django_assert_num_queries):
    task = getattr(tasks, name)
    with django_assert_num_queries(1):
        result = task.enqueue(1, two=3)

    assert uuid.UUID(result.id).version == 7
    assert result.status == TaskResultStatus.READY and not result.is_finished
    assert result.started_at is None and result.last_attempted_at is None and result.finished_at is None
    assert result.enqueued_at is not None
    with pytest.raises(ValueError, match="Task has not finished yet"):
        result.return_value  # noqa: B018
    assert result.task == task
    assert (result.args, result.kwargs, result.attempts, result.worker_ids, result.errors) == ([1], {"two": 3}, 0, [],
                                                                                              [])
    assert enqueued_signals == [(PostgresBackend, result)]

    job = Job.objects.get(pk=result.id)
    assert (job.type, job.status, job.org_id) == (task.module_path, JobStatus.QUEUED, SYSTEM_ORG)
    assert job.payload == {"args": [1], "kwargs": {"two": 3}}
    assert job.created_at == result.enqueued_at


def test_aenqueue_and_aget_result(tasks):
    result = async_to_sync(tasks.noop_task_async.aenqueue)("a")
    assert result.status == TaskResultStatus.READY and result.args == ["a"]
    assert async_to_sync(default_task_backend.aget_result)(result.id) == result


def test_priority_queue_and_run_after_are_the_rows_columns(tasks, settings):
    settings.TASKS = {"default": {"BACKEND": "jobs.tasks.PostgresBackend", "QUEUES": ["default", "reports"]}}
    later = timezone.now() + timedelta(hours=1)
    result = tasks.echo.using(priority=-7, queue_name="reports", run_after=later).enqueue()

    job = Job.objects.get(pk=result.id)
    assert (job.priority, job.queue_name, job.run_after) == (-7, "reports", later)
    # Scheduled for later is still READY.
    assert default_task_backend.get_result(result.id).status == TaskResultStatus.READY
    # The decorator's priority is the default.
    assert Job.objects.get(pk=tasks.echo.enqueue().id).priority == 5


def test_arguments_are_stored_as_json(tasks):
    result = tasks.echo.enqueue(1, (2, 3), b"bytes", key={"nested": [None, True, 1.5]})
    assert (result.args, result.kwargs) == ([1, [2, 3], "bytes"], {"key": {"nested": [None, True, 1.5]}})
    assert Job.objects.get(pk=result.id).payload == {"args": result.args, "kwargs": result.kwargs}


def test_arguments_that_are_not_json_are_refused_before_anything_is_queued(tasks):
    with pytest.raises(TypeError):
        tasks.echo.enqueue(object())
    with pytest.raises(TypeError):
        tasks.echo.enqueue(when=datetime.now())
    assert not Job.objects.exists()


def test_org_id_files_the_job_under_that_org(tasks):
    result = tasks.noop_task.using(org_id="acme").enqueue()
    assert Job.objects.get(pk=result.id).org_id == "acme"
    assert default_task_backend.get_result(result.id).task == tasks.noop_task.using(org_id="acme")


def test_a_dedup_key_returns_the_live_job_holding_it(tasks):
    first = tasks.sync_site.enqueue(7)
    again = tasks.sync_site.enqueue(site_id=7)
    other = tasks.sync_site.enqueue(8)

    assert again.id == first.id and again.args == [7]
    assert other.id != first.id
    assert Job.objects.get(pk=first.id).dedup_key == "tests.support.task_functions.sync_site:site:7"
    # A key given per enqueue, with using().
    assert tasks.noop_task.using(dedup_key="x").enqueue().id == tasks.noop_task.using(dedup_key="x").enqueue().id


def test_one_running_per_puts_the_arguments_value_where_the_claims_guard_reads_it(tasks):
    by_keyword = tasks.per_site.enqueue(site_id="a")
    by_position = tasks.per_site.enqueue("b", 0.5)
    assert Job.objects.get(pk=by_keyword.id).payload["site_id"] == "a"
    assert Job.objects.get(pk=by_position.id).payload == {"args": ["b", 0.5], "kwargs": {}, "site_id": "b"}


@pytest.mark.django_db(transaction=True)
def test_enqueue_is_part_of_the_callers_transaction(tasks):
    with transaction.atomic():
        result = tasks.noop_task.enqueue()
        assert Job.objects.filter(pk=result.id).exists()
        assert jobs_seen_by_another_connection() == 0
    assert jobs_seen_by_another_connection() == 1

    with pytest.raises(RuntimeError), transaction.atomic():
        rolled_back = tasks.noop_task.enqueue()
        raise RuntimeError("the caller's transaction fails")
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(rolled_back.id)
    assert jobs_seen_by_another_connection() == 1


# -- get_result / refresh -------------------------------------------------------------

def test_get_result_reads_the_row_in_one_query(tasks, django_assert_num_queries):
    result = tasks.noop_task.enqueue()
    with django_assert_num_queries(1):
        again = default_task_backend.get_result(result.id)
    assert again == result
    assert tasks.noop_task.get_result(result.id) == result


def test_refresh_reads_what_the_worker_wrote(tasks, django_assert_num_queries):
    result = tasks.calculate_meaning_of_life.enqueue()
    now = timezone.now()
    Job.objects.filter(pk=result.id).update(status=JobStatus.DONE, started_at=now, finished_at=now, attempts=1,
                                            report={"return_value": 42}, worker_ids=["host:1"])
    assert result.status == TaskResultStatus.READY and result.attempts == 0

    with django_assert_num_queries(1):
        result.refresh()

    assert result.status == TaskResultStatus.SUCCESSFUL and result.is_finished
    assert result.started_at == result.last_attempted_at == now and result.finished_at == now
    assert (result.return_value, result.attempts, result.worker_ids) == (42, 1, ["host:1"])
    async_to_sync(result.arefresh)()
    assert result.return_value == 42


@pytest.mark.parametrize(("status", "expected"), [
    (JobStatus.QUEUED, TaskResultStatus.READY),
    (JobStatus.RUNNING, TaskResultStatus.RUNNING),
    (JobStatus.DONE, TaskResultStatus.SUCCESSFUL),
    (JobStatus.FAILED, TaskResultStatus.FAILED),
])
def test_each_job_status_is_a_task_status(tasks, status, expected):
    result = tasks.noop_task.enqueue()
    now = timezone.now()
    Job.objects.filter(pk=result.id).update(
        status=status, started_at=None if status == JobStatus.QUEUED else now,
        finished_at=now if status in (JobStatus.DONE, JobStatus.FAILED) else None)
    assert default_task_backend.get_result(result.id).status == expected


def test_an_error_the_queue_wrote_has_a_class_too(tasks):
    result = tasks.noop_task.enqueue()
    Job.objects.filter(pk=result.id).update(status=JobStatus.FAILED, started_at=timezone.now(),
                                            finished_at=timezone.now(), error="max attempts exceeded")
    result.refresh()
    (error,) = result.errors
    assert error.exception_class_path == "jobs.tasks.TaskRunFailed"
    assert error.traceback == "max attempts exceeded"
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018


@pytest.mark.parametrize("result_id", ["0b7f3f9e-4c1d-4a8e-9e55-2f0d6c1b7a10", "123", ""])  # fixed ids: every xdist process collects alike
def test_get_result_of_no_such_job(result_id):
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(result_id)


def test_get_result_of_a_job_that_is_not_a_task():
    job = enqueue("noop", org_id="acme")
    with pytest.raises(TaskResultDoesNotExist, match="not a task"):
        default_task_backend.get_result(str(job.id))


def test_a_tasks_get_result_refuses_another_tasks_result(tasks):
    result = tasks.noop_task.enqueue()
    with pytest.raises(TaskResultMismatch):
        tasks.calculate_meaning_of_life.get_result(result.id)


# -- validation -----------------------------------------------------------------------

def test_a_queue_the_backend_does_not_list_is_refused(tasks, settings):
    settings.TASKS = {"default": {"BACKEND": "jobs.tasks.PostgresBackend", "QUEUES": ["unknown_queue"]}}
    task = tasks.noop_task.using(queue_name="unknown_queue")
    settings.TASKS = {"default": {"BACKEND": "jobs.tasks.PostgresBackend"}}
    with pytest.raises(InvalidTask, match="Queue 'unknown_queue' is not valid for backend"):
        task.enqueue()
    assert not Job.objects.exists()


@pytest.mark.parametrize(("options", "message"), [
    ({"priority": 101}, "priority must be a whole number"),
    ({"run_after": datetime(2030, 1, 1)}, "run_after must be an aware datetime"),
    ({"takes_context": True}, "first argument of 'context'"),
    ({"max_attempts": 0}, "max_attempts must be at least 1"),
    ({"retry_on": ("not an exception",)}, "retry_on must be a tuple of exception classes"),
    ({"timeout": -1}, "timeout must be a positive number"),
    ({"dedup_scope": "forever"}, "dedup_scope must be one of"),
    ({"one_running_per": "site"}, "one_running_per='site' is not a parameter"),
    ({"on_fail": "not callable"}, "on_fail must be callable"),
    ({"org_id": ""}, "org_id must be a non-empty string"),
    ({"dedup_key": 3}, "dedup_key must be a string or a function"),
])
def test_options_the_queue_would_refuse_are_invalid_tasks(tasks, options, message):
    before = registry.get(tasks.sync_site.module_path)
    with pytest.raises(InvalidTask, match=message):
        PostgresTask(func=tasks.sync_site.func, **options)
    assert registry.get(tasks.sync_site.module_path) == before


def test_a_function_that_is_not_at_module_level_is_refused():
    def local():
        pass

    with pytest.raises(InvalidTask, match="module level"):
        PostgresTask(func=local)


def test_a_task_may_not_take_the_name_of_a_registered_job_type(tasks):
    registry.unregister(tasks.noop_task.module_path)
    registry.register(tasks.noop_task.module_path, lambda job: None)
    try:
        with pytest.raises(InvalidTask, match="already registered"):
            tasks.noop_task.enqueue()
    finally:
        registry.unregister(tasks.noop_task.module_path)
    assert not Job.objects.exists()
