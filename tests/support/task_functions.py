"""@task functions for the task-backend tests (tests/jobs/test_tasks*.py), most after django-tasks' own test tasks.

Importing this module registers a job type per task (jobs.tasks.PostgresBackend.validate_task), so
the pytest process imports it only in the ``tasks`` fixture (tests/jobs/test_tasks.py), which
unregisters them afterwards; worker subprocesses load it through JOBS_HANDLER_MODULES.

Runs that matter are written to ``test_executions`` (tests/support/handlers.py): what really ran,
and in which process, independent of what the queue says.
"""

import asyncio
import os
import time

from django.db import connection

import jobs
from jobs.tasks import PostgresTaskContext, task


def record(job_id, type, attempt, site_id=None) -> None:
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO test_executions (job_id, type, attempt, pid, site_id) VALUES (%s, %s, %s, %s, %s)",
                       [job_id, type, attempt, os.getpid(), site_id])


@task
def noop_task(*args, **kwargs):
    return None


@task
async def noop_task_async(*args, **kwargs):
    return None


@task
def calculate_meaning_of_life():
    return 42


@task(priority=5)
def echo(*args, **kwargs):
    """Returns what it was given: the JSON round trip of arguments and return value."""
    return {"args": args, "kwargs": kwargs}


@task
async def add_async(a, b):
    await asyncio.sleep(0)
    return {"sum": a + b, "loop_thread": _thread_name()}


def _thread_name():
    import threading

    return threading.current_thread().name


@task
async def nap(seconds):
    """Sleeps on the event loop; says which loop, thread and process, and when."""
    started = time.time()
    await asyncio.sleep(seconds)
    return {"loop": id(asyncio.get_running_loop()), "thread": _thread_name(), "pid": os.getpid(), "started": started,
            "ended": time.time()}


@task
def failing_task_value_error():
    raise ValueError("This task failed due to ValueError")


@task
def complex_exception():
    raise ValueError(ValueError("This task failed"))


@task
def complex_return_value():
    return {1, 2}  # a set: not JSON


@task
def exit_task():
    raise SystemExit(3)


@task(takes_context=True)
def get_task_id(context):
    return context.task_result.id


@task(takes_context=True)
def check_context(context, attempt):
    """Fails unless it got the queue's context with the expected attempt."""
    if not isinstance(context, PostgresTaskContext) or context.attempt != attempt:
        raise AssertionError(f"context {context!r}, attempt {context.attempt} != {attempt}")
    return context.task_result.worker_ids


@task(takes_context=True)
def progress(context, steps):
    for done in range(1, steps + 1):
        context.report_progress(done=done, total=steps)
    return steps


@task(takes_context=True, max_attempts=2)
def slow_first_attempt(context):
    """Records its run; the first attempt then sleeps a minute (the kill -9 tests' victim), later ones return."""
    record(context.task_result.id, "slow_first_attempt", context.attempt)
    if context.attempt == 1:
        time.sleep(60)
    return context.attempt


@task(takes_context=True)
def recorded(context):
    record(context.task_result.id, "recorded", context.attempt)


@task(takes_context=True, retry_on=(ConnectionError,), max_attempts=3)
def flaky(context):
    """Fails with a retryable error on its first two attempts."""
    if context.attempt < 3:
        raise ConnectionError(f"attempt {context.attempt}: downstream unavailable")
    return context.attempt


@task(takes_context=True, max_attempts=2)
def asks_for_retry(context):
    raise jobs.Retry("not yet", after=0)


def _on_fail(result):
    record(result.id, "on_fail", result.attempts)


@task(on_fail=_on_fail)
def doomed():
    raise RuntimeError("doomed")


@task(dedup_key=lambda site_id: f"site:{site_id}")
def sync_site(site_id):
    return site_id


@task(dedup_key="the-one", dedup_scope="active")
def singleton():
    return None


@task(takes_context=True, one_running_per="site_id")
def per_site(context, site_id, seconds=0.0):
    record(context.task_result.id, "per_site", context.attempt, site_id)
    time.sleep(seconds)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE test_executions SET finished_at = clock_timestamp() WHERE job_id = %s",
                       [context.task_result.id])
    return site_id


@task(max_attempts=5, timeout=30, stale_after=90)
def with_options():
    return None


@task(takes_context=True, timeout=0.5, max_attempts=1)
def overrun(context):
    """Reports progress for up to 20 s: its timeout (0.5 s) ends it at a report."""
    for step in range(400):
        context.report_progress(done=step)
        time.sleep(0.05)


@task(timeout=0.5, max_attempts=1)
async def overrun_async():
    """Sleeps 20 s on the event loop, past its timeout: stopped while its worker thread waits for it."""
    await asyncio.sleep(20)
