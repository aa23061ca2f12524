"""The zombie sweep (seed 001 §2.5)."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from jobs import sweep
from jobs.models import Job, JobStatus
from jobs.worker import Worker
from tests.factories import JobFactory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("zombies_possible", "test_types")]  # zombies: tests/conftest.py


def test_a_zombie_with_attempts_left_is_requeued_and_the_next_claim_counts_again():
    zombie = JobFactory(type="test_record", stale=True, attempts=1, progress={"done": 40, "total": 100})
    result = sweep.run_once()
    assert [j.id for j in result.requeued] == [zombie.id]
    zombie.refresh_from_db()
    assert (zombie.status, zombie.started_at, zombie.attempts) == (JobStatus.QUEUED, None, 1)
    assert zombie.progress["done"] == 40  # the checkpoint survives for the next run

    from jobs import queue

    assert queue.claim().attempts == 2


def test_a_zombie_at_max_attempts_fails_for_good_and_the_queue_goes_on(executions):
    zombie = JobFactory(type="test_slow", stale=True, attempts=2, dedup_key="slow:1")  # test_slow: max_attempts=2
    behind = JobFactory(type="noop")

    Worker(burst=True, listen=False).run()

    zombie.refresh_from_db()
    assert zombie.status == JobStatus.FAILED
    assert zombie.error == "max attempts exceeded"
    assert zombie.dedup_key is None and zombie.finished_at is not None
    assert [(row[0], row[1]) for row in executions()] == [(zombie.id, "on_fail")]
    assert Job.objects.get(pk=behind.id).status == JobStatus.DONE


def test_a_recent_heartbeat_keeps_an_old_job_alive(settings):
    settings.JOBS_STALE_AFTER = 60
    long_running = JobFactory(
        stale=True, progress={"done": 1, "updated_at": timezone.now().isoformat()}
    )
    silent = JobFactory(stale=True)
    result = sweep.run_once()
    assert [j.id for j in result.requeued] == [silent.id]
    assert Job.objects.get(pk=long_running.id).status == JobStatus.RUNNING


def test_the_threshold_is_per_type(settings, temporary_type):
    settings.JOBS_STALE_AFTER = 3600
    temporary_type("test_short_fuse", lambda job: None, stale_after=5)
    ten_seconds_ago = timezone.now() - timedelta(seconds=10)
    short = JobFactory(type="test_short_fuse", running=True, started_at=ten_seconds_ago)
    default = JobFactory(type="noop", running=True, started_at=ten_seconds_ago)
    result = sweep.run_once()
    assert [j.id for j in result.requeued] == [short.id]
    assert Job.objects.get(pk=default.id).status == JobStatus.RUNNING
    assert list(Job.objects.stale()) == []  # the admin's view agrees with the sweep


def test_the_admin_zombie_queryset_matches_the_sweep(settings):
    settings.JOBS_STALE_AFTER = 60
    stale = JobFactory(stale=True)
    JobFactory(running=True)
    assert [j.id for j in Job.objects.stale()] == [stale.id]


T = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
GAP = timedelta(seconds=40)


@pytest.mark.parametrize("previous, counted_from, lost, expected", [
    (None, None, False, None),                                          # first sweep of the process
    (T - timedelta(seconds=30), None, False, None),                     # sweeping on schedule
    (T - timedelta(seconds=41), None, False, T),                        # a gap: it was out of touch
    (T - timedelta(seconds=30), None, True, T),                         # the last sweep failed
    (None, None, True, T),                                              # reconnected after failing at once
    (T - timedelta(seconds=30), T - timedelta(seconds=50), False, T - timedelta(seconds=50)),  # still counting
    (T - timedelta(seconds=90), T - timedelta(seconds=200), False, T),  # a new gap moves it again
])
def test_counting_from(previous, counted_from, lost, expected):
    assert sweep.counting_from(T, previous, counted_from, lost, GAP) == expected


def test_silence_is_not_counted_from_before_not_before(settings):
    settings.JOBS_STALE_AFTER = 60
    zombie = JobFactory(stale=True)  # started an hour ago, never heartbeated
    assert sweep.run_once(not_before=timezone.now() - timedelta(seconds=30)).requeued == []
    assert [j.id for j in sweep.run_once(not_before=timezone.now() - timedelta(seconds=90)).requeued] == [zombie.id]


def test_silence_is_not_counted_from_before_the_database_started(settings):
    with connection.cursor() as cursor:
        cursor.execute("SELECT now() - pg_postmaster_start_time()")
        (up,) = cursor.fetchone()
    settings.JOBS_STALE_AFTER = 60
    # Started (by the clock) before the server did, and silent since: its silence counts from the start.
    JobFactory(running=True, started_at=timezone.now() - up - timedelta(hours=1))
    settings.JOBS_STALE_AFTER = up.total_seconds() + 1800  # silent 1800 s longer than that, by its start
    assert sweep.run_once().requeued == []


def test_a_type_this_worker_does_not_know_is_not_swept():
    JobFactory(type="added_in_the_next_release", stale=True)
    assert not sweep.run_once()
