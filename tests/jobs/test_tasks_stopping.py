"""Tasks cancelled (jobs.cancel) and timed out (@task(timeout=...)), in-process: what their results say.

How cancellation and timeouts stop a handler is tested with plain job types (test_cancel.py,
test_timeouts.py); here, that a task's result names the right exception, and that an async task
waiting on the event loop is stopped too.
"""

from __future__ import annotations

import pytest

import jobs
from jobs.models import Job
from jobs.tasks_compat import TaskResultStatus
from tests.support.processes import run_burst
from tests.support.task_registry import loaded_tasks

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def tasks():
    with loaded_tasks() as module:
        yield module


def test_a_cancelled_queued_task_never_runs_and_its_error_is_job_cancelled(tasks):
    result = tasks.calculate_meaning_of_life.enqueue()
    assert jobs.cancel(result.id)
    assert run_burst() == 0
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and result.started_at is None
    assert issubclass(result.errors[0].exception_class, jobs.JobCancelled)


@pytest.mark.parametrize("name", ["overrun", "overrun_async"])
def test_a_task_past_its_timeout_ends_failed_timed_out(tasks, name):
    result = getattr(tasks, name).enqueue()  # timeout=0.5, max_attempts=1
    assert run_burst() == 1
    result.refresh()
    assert result.status == TaskResultStatus.FAILED, result.errors
    assert Job.objects.get(pk=result.id).error == "timed out"
    assert issubclass(result.errors[0].exception_class, jobs.JobTimedOut)
