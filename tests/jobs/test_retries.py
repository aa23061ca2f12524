"""Retries (issue 21 §2.3): jobs.Retry and retry_on put a run back with a delay, within max_attempts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection

import jobs
from jobs import finish, queue
from jobs.models import Job, JobStatus
from tests.support.processes import run_burst

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("test_types")]


class Flaky(Exception):
    pass


@pytest.mark.parametrize("attempt, base, cap, rand, expected", [
    (1, 2, 600, 1.0, 2.0),
    (1, 2, 600, 0.0, 1.0),  # never at once: at least half the wait
    (2, 2, 600, 1.0, 4.0),
    (3, 2, 600, 0.5, 6.0),
    (10, 2, 600, 1.0, 600.0),  # capped
    (60, 2, 600, 0.0, 300.0),  # a huge attempt is still the cap, not an overflow
])
def test_retry_delay_doubles_with_jitter_up_to_the_cap(attempt, base, cap, rand, expected):
    assert finish.retry_delay(attempt, base, cap, rand) == expected


def db_now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


def make_due(job):
    """Time passing: the retried job's run_after moved into the database's past."""
    Job.objects.filter(pk=job.pk).update(run_after=db_now() - timedelta(seconds=1))


def test_a_retry_waits_its_delay_then_runs_again_with_attempt_two_and_ends_done(temporary_type):
    def handler(job):
        if job.attempts == 1:
            raise jobs.Retry("remote busy", after=3600)
        return {"attempt": job.attempts}

    temporary_type("test_retry_after", handler)
    job = queue.enqueue("test_retry_after", org_id="demo")
    before = db_now()
    assert run_burst() == 1
    job.refresh_from_db()
    assert (job.status, job.attempts, job.error) == (JobStatus.QUEUED, 1, "Retry: remote busy")
    assert before + timedelta(seconds=3590) < job.run_after < db_now() + timedelta(seconds=3610)
    assert run_burst() == 0  # not due yet
    make_due(job)
    assert run_burst() == 1
    job.refresh_from_db()
    assert (job.status, job.attempts, job.report) == (JobStatus.DONE, 2, {"attempt": 2})


def test_a_retry_on_exception_is_retried_with_the_default_backoff_and_an_unlisted_one_fails_at_once(
        temporary_type, settings):
    settings.JOBS_RETRY_BASE, settings.JOBS_RETRY_MAX = 1000.0, 5000.0  # the backoff's first wait: 500..1000 s
    temporary_type("test_retry_on", lambda job: (_ for _ in ()).throw(Flaky("try later")), retry_on=(Flaky,))
    temporary_type("test_unlisted", lambda job: (_ for _ in ()).throw(ValueError("bad input")), retry_on=(Flaky,))
    listed = queue.enqueue("test_retry_on", org_id="demo")
    unlisted = queue.enqueue("test_unlisted", org_id="demo")
    assert run_burst() == 2
    listed.refresh_from_db()
    unlisted.refresh_from_db()
    assert listed.status == JobStatus.QUEUED and "Flaky: try later" in listed.error
    now = db_now()
    assert now + timedelta(seconds=490) < listed.run_after < now + timedelta(seconds=1001)
    assert (unlisted.status, unlisted.attempts, unlisted.error) == (JobStatus.FAILED, 1, "ValueError: bad input")


def test_once_the_attempts_are_spent_the_job_fails_with_the_last_error_and_on_fail_runs(temporary_type):
    failed = []

    def handler(job):
        raise jobs.Retry(f"still busy at attempt {job.attempts}", after=0)

    temporary_type("test_retry_spent", handler, max_attempts=3, on_fail=lambda job: failed.append(job.id))
    job = queue.enqueue("test_retry_spent", org_id="demo")
    assert run_burst() == 3  # after=0: due again at once, so one burst runs all three attempts
    job.refresh_from_db()
    assert (job.status, job.attempts, job.error) == (JobStatus.FAILED, 3, "Retry: still busy at attempt 3")
    assert failed == [job.id]
