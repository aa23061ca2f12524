"""A task's values are the caller's data: arguments JSON (jsonb) would not give back unchanged, or too large, are
refused at enqueue before any SQL; such a return value fails its run. Nothing is rewritten on the way.
"""

from __future__ import annotations

import json
import math
import re
import uuid

import pytest
from django.db import transaction
from django.urls import reverse

from jobs.admin.display import PREVIEW_CHARS
from jobs.models import Job, JobStatus
from jobs.storable import JSONRoundTripError
from jobs.tasks_compat import InvalidTask, TaskResultStatus, task_finished
from tests.factories import JobFactory
from tests.support.processes import run_burst
from tests.support.task_registry import loaded_tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def tasks():
    with loaded_tasks() as module:
        yield module


@pytest.fixture
def returns(tasks):
    from tests.support import task_values

    return task_values.returns


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


# -- arguments ------------------------------------------------------------------------

UNFAITHFUL_ARGUMENTS = [
    ("nan", (math.nan,), {}, r"\['args'\]\[0\] is nan, which JSON cannot hold"),
    ("infinity in kwargs", (), {"ratio": {"top": math.inf}}, r"\['kwargs'\]\['ratio'\]\['top'\] is inf"),
    ("minus infinity", ([1.0, -math.inf],), {}, r"\['args'\]\[0\]\[1\] is -inf"),
    ("nul", ("a\x00b",), {}, "holds a NUL character"),
    ("lone surrogate", ("caf\udce9",), {}, "holds a lone surrogate"),
    ("int key", ({1: "one"},), {}, r"has the key 1: JSON keys are strings, so it would come back as '1'"),
    ("too deep", (_nested(100),), {}, "nested deeper than 64 levels"),
]


@pytest.mark.parametrize(("case", "args", "kwargs", "message"), UNFAITHFUL_ARGUMENTS,
                         ids=[c[0] for c in UNFAITHFUL_ARGUMENTS])
def test_an_argument_json_would_change_is_refused_before_any_sql_and_the_callers_transaction_goes_on(
        tasks, case, args, kwargs, message, django_assert_num_queries):
    with transaction.atomic():
        with django_assert_num_queries(0), pytest.raises(InvalidTask, match=message) as refused:
            tasks.echo.enqueue(*args, **kwargs)
        # The caller's transaction is still usable: no statement failed in it.
        result = tasks.echo.enqueue("fine")
        assert Job.objects.filter(type=tasks.echo.module_path).count() == 1

    assert str(refused.value).startswith(f"{tasks.echo.module_path}: the task's arguments at ")
    assert Job.objects.get().payload == {"args": ["fine"], "kwargs": {}}
    assert Job.objects.get().pk == uuid.UUID(result.id)


def test_arguments_over_the_limit_are_refused_before_any_sql(tasks, settings, django_assert_num_queries):
    with django_assert_num_queries(0), pytest.raises(InvalidTask, match="over the 1000000 byte limit"):
        tasks.echo.enqueue("x" * 1_000_000)  # the default JOBS_TASK_MAX_ARGS_BYTES, with its quotes and brackets
    settings.JOBS_TASK_MAX_ARGS_BYTES = 1000
    args, kwargs = ("é" * 490,), {}  # é is two bytes of UTF-8: about 520 characters, 1010 bytes
    size = len(json.dumps({"args": list(args), "kwargs": kwargs}, ensure_ascii=False).encode())
    assert size > 1000 > len(json.dumps({"args": list(args), "kwargs": kwargs}, ensure_ascii=False))
    with django_assert_num_queries(0), pytest.raises(InvalidTask, match=f": {size} bytes of JSON, over the 1000 byte"):
        tasks.echo.enqueue(*args, **kwargs)
    with pytest.raises(InvalidTask, match="over the 1000 byte limit"):
        tasks.echo.enqueue(list(range(1000)))
    assert not Job.objects.exists()

    within = tasks.echo.enqueue("x" * 900)
    assert Job.objects.get().payload["args"] == within.args == ["x" * 900]


# -- return values --------------------------------------------------------------------

@pytest.fixture
def finished_signals():
    received = []

    def capture(sender, task_result, **kwargs):
        received.append(task_result.status)

    task_finished.connect(capture, dispatch_uid="test_task_values_finished", weak=False)
    yield received
    task_finished.disconnect(capture, dispatch_uid="test_task_values_finished")


RETURNED = [
    ("nan", r"the return value at \['ratio'\] is nan, which JSON cannot hold"),
    ("infinity", r"the return value at \[1\] is inf"),
    ("minus infinity", r"the return value at \['low'\] is -inf"),
    ("nul", r"the return value at \['name'\] holds a NUL character"),
    ("nul in a key", r"the return value has the key 'key\\x00'"),
    ("lone surrogate", "the return value holds a lone surrogate"),
    ("int keys", "the return value has the key 1: JSON keys are strings, so it would come back as '1'"),
    ("too deep", "the return value at .* is nested deeper than 64 levels"),
]


@pytest.mark.parametrize(("kind", "message"), RETURNED, ids=[r[0] for r in RETURNED])
def test_a_return_value_json_would_change_fails_the_run_saying_why(returns, kind, message, finished_signals):
    result = returns.enqueue(kind)
    assert run_burst() == 1
    result.refresh()

    assert result.status == TaskResultStatus.FAILED
    assert finished_signals == [TaskResultStatus.FAILED]
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018
    (error,) = result.errors
    assert error.exception_class is JSONRoundTripError
    job = Job.objects.get(pk=result.id)
    assert job.status == JobStatus.FAILED and job.report is None
    assert job.error.startswith("JSONRoundTripError: the return value")
    assert re.search(message, job.error), job.error


def test_a_return_value_within_the_rules_is_read_back_as_returned(tasks):
    result = tasks.echo.enqueue(1.5, "é", {"nested": [None, True, -0.25]}, key="\u2603")
    run_burst()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"args": [1.5, "é", {"nested": [None, True, -0.25]}], "kwargs": {"key": "\u2603"}}


# -- the admin ------------------------------------------------------------------------

def test_the_admin_shows_a_bounded_preview_of_a_huge_payload(admin_client):
    # A row enqueued before the bound (or through jobs.queue.enqueue, which a task does not use).
    job = JobFactory(payload={"args": ["x" * 3_000_000], "kwargs": {}})

    response = admin_client.get(reverse("admin:jobs_job_change", args=[job.pk]))
    html = response.content.decode()

    assert response.status_code == 200
    assert html.count("x" * 1000) < (PREVIEW_CHARS // 1000) + 1
    assert len(html) < 200_000
    assert f"The first {PREVIEW_CHARS:,} of 3,000,042 characters are shown." in html


def test_a_limit_of_zero_is_a_system_check_error(settings):
    from jobs.checks import check_values

    settings.JOBS_TASK_MAX_ARGS_BYTES = 0
    assert [(e.id, e.msg) for e in check_values()] == [("jobs.E003", "JOBS_TASK_MAX_ARGS_BYTES is 0; it must be above zero.")]
