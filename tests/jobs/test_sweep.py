"""The zombie sweep (README, "Failure and recovery")."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from jobs import registry, sql, sweep
from jobs.models import Job, JobStatus
from tests.factories import JobFactory
from tests.support.processes import run_burst

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

    run_burst()

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


def database_uptime() -> timedelta:
    with connection.cursor() as cursor:
        cursor.execute("SELECT now() - pg_postmaster_start_time()")
        return cursor.fetchone()[0]


# (row, its type, seconds since its start, since its heartbeat, zombie?). Thresholds:
# test_short_fuse 5 s, noop 60 s (JOBS_STALE_AFTER), test_long_fuse the server's uptime + 1800 s.
# Ages are seconds away from every threshold: the few milliseconds the test takes do not matter.
ZOMBIE_TABLE = [
    ("short fuse, silent 20 s", "test_short_fuse", 20, None, True),
    ("short fuse, started 1 s ago", "test_short_fuse", 1, None, False),
    ("short fuse, old but beating", "test_short_fuse", 3600, 1, False),
    ("default, silent an hour", "noop", 3600, None, True),
    ("default, heartbeat 2 min ago", "noop", 3600, 120, True),
    ("default, heartbeat 20 s ago", "noop", 3600, 20, False),
    ("default, started 30 s ago", "noop", 30, None, False),
    # silent since before the server started: its silence counts from the start, under the threshold
    ("long fuse, started before the server", "test_long_fuse", "before the server", None, False),
]


def test_the_admin_lists_exactly_the_zombies_the_sweep_recovers(settings, temporary_type):
    settings.JOBS_STALE_AFTER = 60
    up = database_uptime()
    temporary_type("test_short_fuse", lambda job: None, stale_after=5)
    temporary_type("test_long_fuse", lambda job: None, stale_after=up.total_seconds() + 1800)
    now = timezone.now()
    expected, labels = set(), {}
    for label, job_type, started, beat, zombie in ZOMBIE_TABLE:
        started_at = now - up - timedelta(hours=1) if started == "before the server" else now - timedelta(seconds=started)
        progress = {"updated_at": (now - timedelta(seconds=beat)).isoformat()} if beat is not None else None
        job = JobFactory(type=job_type, running=True, started_at=started_at, progress=progress)
        labels[job.id] = label
        if zombie:
            expected.add(job.id)
    JobFactory(type="noop", failed=True, started_at=now - timedelta(hours=2))  # old, but not running
    JobFactory(type="noop", created_at=now - timedelta(hours=2))  # queued for long: no zombie either

    listed = {job.id for job in Job.objects.stale()}
    requeueable = {job_id for job_id in labels if operator_sees_stale(job_id)}
    result = sweep.run_once()
    swept = {job.id for job in result.requeued + result.failed}

    assert {labels[i] for i in listed} == {labels[i] for i in expected}
    assert swept == listed
    assert requeueable == listed  # the operator's requeue judges each job as the list does


def operator_sees_stale(job_id) -> bool:
    """The verdict of the operator's requeue (sql.OPERATOR_INSPECT) on one job, without acting on it."""
    job_type = registry.get(Job.objects.get(pk=job_id).type)
    with connection.cursor() as cursor:
        cursor.execute(sql.OPERATOR_INSPECT, {"id": job_id, "stale_after": job_type.stale_after})
        return cursor.fetchone()[-1]


def test_the_admin_also_lists_a_type_no_worker_here_knows_after_the_default_threshold(settings):
    """The one difference, on purpose (sql.TYPE_STALE_AFTER): the sweep leaves such a job to the
    workers that know its type, the operator still sees it."""
    settings.JOBS_STALE_AFTER = 60
    unknown = JobFactory(type="added_in_the_next_release", stale=True)
    JobFactory(type="added_in_the_next_release", running=True)
    assert [job.id for job in Job.objects.stale()] == [unknown.id]
    assert not sweep.run_once()


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
