"""Timeouts (issue 21 §2): the watchdog's decisions as tables, and handlers that run Python stopped in this
process. A handler blocked in C, which only its worker's exit ends, runs in a real worker:
tests/jobs/test_timeouts_processes.py.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from types import SimpleNamespace

import pytest

import jobs
from jobs import queue, timeouts
from jobs.errors import JobCancelled, JobTimedOut
from jobs.models import JobStatus
from tests.support.processes import ROOT, run_burst

CANCELLED, TIMED_OUT = timeouts.CANCELLED, timeouts.TIMED_OUT
WAIT, EXPIRE, ABANDON = timeouts.WAIT, timeouts.EXPIRE, timeouts.ABANDON


@pytest.mark.parametrize("now, deadline, expired_at, grace, step", [
    (100.0, None, None, 5, WAIT),  # no timeout
    (100.0, 101.0, None, 5, WAIT),  # in time
    (101.0, 101.0, None, 5, EXPIRE),  # at the deadline: told, the grace starts
    (140.0, 101.0, None, 5, EXPIRE),  # a watchdog late by far still tells first
    (105.9, 101.0, 101.0, 5, WAIT),  # told, within the grace
    (106.0, 101.0, 101.0, 5, ABANDON),  # the grace is over: it cannot be stopped
    (103.0, 101.0, 102.5, 0.5, ABANDON),  # the grace counts from when it was told
])
def test_the_watchdogs_next_step(now, deadline, expired_at, grace, step):
    assert timeouts.next_step(now, deadline, expired_at, grace) == step


@pytest.mark.parametrize("raised, told, verdict", [
    (None, None, None),  # returned in time
    (None, CANCELLED, None),  # returned after being told: its work is done, its result stands
    (None, TIMED_OUT, None),
    (ValueError("x"), None, None),  # an ordinary failure stays one
    (JobCancelled("x"), None, CANCELLED),  # raised by report_progress, or by the handler itself
    (timeouts.Cancelled(), None, CANCELLED),
    (JobTimedOut("x"), None, TIMED_OUT),
    (ValueError("cleanup"), CANCELLED, CANCELLED),  # told, it raised something else on the way out
    (jobs.Retry("later"), CANCELLED, CANCELLED),  # a cancelled job is never retried
    (KeyError("k"), TIMED_OUT, TIMED_OUT),
    (JobCancelled("x"), TIMED_OUT, CANCELLED),  # a cancel wins over a timeout
    (JobTimedOut("x"), CANCELLED, CANCELLED),
])
def test_what_ends_a_run_that_was_told_to_stop(raised, told, verdict):
    assert timeouts.stop_verdict(raised, told) == verdict


def test_a_cancel_fails_and_a_timeout_is_retried_while_attempts_remain():
    from jobs.worker import Outcome

    cancelled, timed_out = Outcome.stopped(CANCELLED, "tb"), Outcome.stopped(TIMED_OUT, "tb")
    assert (cancelled.status, cancelled.error, cancelled.traceback) == ("failed", "cancelled", "tb")
    # "retry": finish_retry queues it again, or fails it once its attempts are spent.
    assert (timed_out.status, timed_out.error, timed_out.report) == ("retry", "timed out", None)


def run_all_script():
    spec = importlib.util.spec_from_file_location("run_all", ROOT / "scripts" / "run_all.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name, code, restarted", [
    ("worker", timeouts.EXIT_TIMED_OUT, True),
    ("worker", 0, False),  # stopped on purpose, or a clean exit: everything stops
    ("worker", 1, False),  # a crash is not hidden by restarting
    ("web", timeouts.EXIT_TIMED_OUT, False),
    ("poller", timeouts.EXIT_TIMED_OUT, False),
])
def test_make_run_restarts_only_a_worker_that_exited_on_a_timeout(name, code, restarted):
    script = run_all_script()
    assert script.WORKER_TIMED_OUT == timeouts.EXIT_TIMED_OUT
    assert script.restarts(name, code) is restarted


def job_stub():
    return SimpleNamespace(pk=object(), id="stub", type="test_stub", attempts=1)


def in_thread(target) -> dict:
    """Run ``target`` in a thread of its own; what it returned or raised."""
    result = {}

    def run():
        try:
            result["returned"] = target()
        except BaseException as exc:  # noqa: BLE001 - what the thread ended with is the result
            result["raised"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "the thread was never stopped"
    return result


def test_the_watchdog_raises_job_timed_out_into_a_handler_running_python_past_its_deadline(settings):
    settings.JOBS_TIMEOUT_GRACE = 60.0  # never abandoned here: that would end this process
    job = job_stub()

    def handler(job):
        ends = time.monotonic() + 20
        while time.monotonic() < ends:
            time.sleep(0.01)
        return "ran out"

    result = in_thread(lambda: timeouts.watch(job, 0.2).call(handler, job))

    assert isinstance(result.get("raised"), JobTimedOut), result
    assert timeouts.watched(job) is None


def test_a_run_is_told_once_and_only_while_its_handler_runs(settings):
    settings.JOBS_TIMEOUT_GRACE = 60.0
    job = job_stub()
    run = timeouts.watch(job, None)
    assert run.tell(CANCELLED) is False  # not started: nothing to tell
    told = []

    def handler(job):
        told.append(run.tell(CANCELLED))  # from its own thread: marked, the caller raises
        told.append(run.tell(TIMED_OUT))
        return "returned"

    assert run.call(handler, job) == "returned"
    assert told == [True, False] and run.told == CANCELLED
    assert run.tell(TIMED_OUT) is False  # over


@pytest.mark.django_db
def test_report_progress_past_the_deadline_raises_job_timed_out_after_writing_the_checkpoint(settings):
    settings.JOBS_TIMEOUT_GRACE = 60.0
    queue.enqueue("noop", org_id="demo")
    job = queue.claim()
    run = timeouts.watch(job, 30)
    # Its time is up, and the watchdog (in its grace, for this test's length) will not tell it first.
    run.deadline = run.expired_at = time.monotonic()
    caught = []

    def handler(job):
        try:
            job.report_progress(done=7)
        except JobTimedOut as exc:
            caught.append(exc)

    run.call(handler, job)
    job.refresh_from_db()
    assert len(caught) == 1 and job.progress["done"] == 7


@pytest.mark.django_db
def test_a_job_past_its_timeout_is_retried_then_failed_timed_out_and_the_worker_runs_the_next(
        temporary_type, settings):
    settings.JOBS_TIMEOUT_GRACE = 60.0
    # No backoff: the retry is due at once (the test's transaction has one now()), one burst runs both attempts.
    settings.JOBS_RETRY_BASE = 0.0
    failed = []

    def spins(job):
        ends = time.monotonic() + 20
        while time.monotonic() < ends:
            sum(range(100))
        return {"ran": "out"}

    temporary_type("test_spins", spins, timeout=0.3, max_attempts=2, on_fail=lambda job: failed.append(job.id))
    job = queue.enqueue("test_spins", org_id="demo")
    after = queue.enqueue("noop", org_id="demo")

    assert run_burst() == 3

    job.refresh_from_db()
    after.refresh_from_db()
    assert (job.status, job.error, job.attempts) == (JobStatus.FAILED, "timed out", 2)
    assert "TimedOut" in job.traceback and "spins" in job.traceback
    assert failed == [job.id]
    assert after.status == JobStatus.DONE
