"""Periodic jobs (jobs.schedules): the period rule as a table, then the database's part in this process.

Real worker processes racing for the same periods: tests/jobs/test_schedules_processes.py.
"""

import threading
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.db import connection, transaction

from jobs import duties, registry, schedules
from jobs.models import Job, Schedule
from jobs.system import SYSTEM_ORG
from tests.support.processes import wait_for


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


PARIS = ZoneInfo("Europe/Paris")
S2, HOUR, DAY, WEEK = timedelta(seconds=2), timedelta(hours=1), timedelta(days=1), timedelta(weeks=1)


# (case, schedule, last_period, now, due, next, tz)
PLANS = [
    ("first look: the current period at once", {"every": S2}, None, "2026-01-01 10:00:03.5",
     "2026-01-01 10:00:02", "2026-01-01 10:00:04", UTC),
    ("within the period already taken", {"every": S2}, "2026-01-01 10:00:02", "2026-01-01 10:00:03.999",
     None, "2026-01-01 10:00:04", UTC),
    ("a period's first instant is in it", {"every": S2}, "2026-01-01 10:00:02", "2026-01-01 10:00:04",
     "2026-01-01 10:00:04", "2026-01-01 10:00:06", UTC),
    ("hours start on the hour", {"every": HOUR}, None, "2026-06-30 23:59:59",
     "2026-06-30 23:00", "2026-07-01 00:00", UTC),
    ("every 90 min from the epoch, not from midnight", {"every": timedelta(minutes=90)}, None,
     "2026-01-01 01:00", "2026-01-01 00:00", "2026-01-01 01:30", UTC),
    ("weeks start on Thursdays, as 1970-01-01 did", {"every": WEEK}, None, "2026-01-07 12:00",
     "2026-01-01 00:00", "2026-01-08 00:00", UTC),
    ("a day is a UTC day: the zone is for cron only", {"every": DAY}, None, "2026-03-29 12:00",
     "2026-03-29 00:00", "2026-03-30 00:00", PARIS),
    ("downtime: only the latest missed hour, once", {"every": HOUR}, "2026-01-01 00:00", "2026-01-31 17:42",
     "2026-01-31 17:00", "2026-01-31 18:00", UTC),
    ("a last period from a clock that was ahead is not run again", {"every": HOUR}, "2026-01-01 15:00",
     "2026-01-01 12:30", None, "2026-01-01 16:00", UTC),
    ("a last period off the grid (every was changed)", {"every": timedelta(seconds=5)}, "2026-01-01 10:00:11",
     "2026-01-01 10:00:16", "2026-01-01 10:00:15", "2026-01-01 10:00:20", UTC),
    ("cron: yesterday's 03:00 before today's", {"cron": "0 3 * * *"}, None, "2026-01-02 02:59:59.9",
     "2026-01-01 03:00", "2026-01-02 03:00", UTC),
    ("cron: the fire time itself is due", {"cron": "0 3 * * *"}, "2026-01-01 03:00", "2026-01-02 03:00",
     "2026-01-02 03:00", "2026-01-03 03:00", UTC),
    ("cron: taken, waiting for tomorrow", {"cron": "0 3 * * *"}, "2026-01-02 03:00", "2026-01-02 03:00:00.1",
     None, "2026-01-03 03:00", UTC),
    ("cron: the 31st skips short months, only the latest runs", {"cron": "0 0 31 * *"}, "2026-01-31 00:00",
     "2026-04-15 08:00", "2026-03-31 00:00", "2026-05-31 00:00", UTC),
    ("cron: the last day of February in a leap year", {"cron": "0 0 L * *"}, "2028-01-31 00:00",
     "2028-03-10 00:00", "2028-02-29 00:00", "2028-03-31 00:00", UTC),
    ("cron: future last period, next fire after it", {"cron": "0 3 * * *"}, "2026-01-10 03:00",
     "2026-01-05 12:00", None, "2026-01-11 03:00", UTC),
    ("cron in Paris: 03:00 is 02:00 UTC in winter", {"cron": "0 3 * * *"}, "2026-01-01 02:00",
     "2026-01-02 02:00", "2026-01-02 02:00", "2026-01-03 02:00", PARIS),
    ("cron in Paris: 02:30 does not exist on 2026-03-29, cronsim runs it at 03:00 CEST",
     {"cron": "30 2 * * *"}, "2026-03-28 01:30", "2026-03-29 12:00", "2026-03-29 01:00",
     "2026-03-30 00:30", PARIS),
]


@pytest.mark.parametrize("case, schedule, last_period, now, due, next_start, tz", PLANS, ids=[p[0] for p in PLANS])
def test_plan(case, schedule, last_period, now, due, next_start, tz):
    result = schedules.plan(**schedule, last_period=last_period and at(last_period), now=at(now), tz=tz)

    assert result == schedules.Plan(due and at(due), at(next_start))
    assert result.due is None or result.due.tzinfo == UTC  # stored and shown in UTC


@pytest.mark.parametrize("every", [S2, timedelta(minutes=7), DAY])
def test_every_period_start_is_on_the_grid_and_the_next_one_follows_it(every):
    now = at("2026-05-17 13:37:21.123456")
    latest = schedules.latest_start(every=every, cron=None, at=now)
    assert latest <= now < latest + every
    assert (latest - schedules.EPOCH) % every == timedelta(0)
    assert schedules.next_start(every=every, cron=None, after=latest, tz=UTC) == latest + every


def test_describe_and_dedup_key():
    from jobs.registry import JobType

    assert schedules.describe(JobType("a", print, every=S2)) == "every 0:00:02"
    assert schedules.describe(JobType("b", print, cron="0 3 * * *")) == 'cron "0 3 * * *" (UTC)'
    assert schedules.dedup_key("a", at("2026-01-01 03:00")) == "schedule:a:2026-01-01T03:00:00+00:00"


def test_every_worker_runs_the_schedule_duty():
    assert "jobs.enqueue_due_periods" in {d.name for d in duties.all_duties()}


def test_no_periodic_type_is_registered_for_the_whole_test_process():
    """A periodic type left registered makes every long-running Worker a test starts enqueue it from its
    duty thread, on that thread's own connection: committed jobs that other tests' workers then run."""
    assert [t.name for t in schedules.periodic_types()] == [], (
        "register a periodic test type for one test (the temporary_type fixture, registry.registered), "
        "and a worker subprocess's through JOBS_HANDLER_MODULES (tests/support/periodic_worker_types.py); "
        "never at the import of a module the pytest process loads")


# -- With the database, in this process ---------------------------------------------------------------------


def noop(job):
    return None


def database_now() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


@pytest.fixture
def hourly(temporary_type):
    temporary_type("test_hourly", noop, every=HOUR)
    return registry.get("test_hourly")


@pytest.mark.django_db
def test_a_due_period_is_enqueued_once_for_the_system_org(hourly):
    first = schedules.enqueue_due([hourly])
    again = schedules.enqueue_due([hourly])

    assert len(first) == 1 and again == []
    job = Job.objects.get(type=hourly.name)
    period = schedules.latest_start(every=HOUR, cron=None, at=database_now())
    assert (job.org_id, job.payload, job.dedup_key) == (SYSTEM_ORG, {"period": period.isoformat()},
                                                        schedules.dedup_key(hourly.name, period))
    row = Schedule.objects.get(name=hourly.name)
    assert (row.last_period, row.last_job_id, row.next_run_at) == (period, job.id, period + HOUR)


@pytest.mark.django_db
def test_the_duty_takes_the_periodic_types_from_the_registry(hourly):
    assert hourly in schedules.periodic_types()
    assert [job.type for job in schedules.enqueue_due() if job.type == hourly.name] == [hourly.name]


@pytest.mark.django_db
def test_after_downtime_exactly_one_job_is_enqueued_for_the_latest_period(hourly):
    Schedule.objects.create(name=hourly.name, last_period=at("2020-01-01 00:00"))

    queued = schedules.enqueue_due([hourly]) + schedules.enqueue_due([hourly])

    assert len(queued) == 1
    assert Job.objects.filter(type=hourly.name).count() == 1
    latest = schedules.latest_start(every=HOUR, cron=None, at=database_now())
    assert Schedule.objects.get(name=hourly.name).last_period == latest


@pytest.mark.django_db
def test_a_period_another_worker_took_is_not_taken_again(hourly):
    """The guarded upsert refuses, whatever the dedup key would do: no second job, not even the first one back."""
    current = schedules.plan_for(hourly, None, database_now())

    assert schedules.take_period(hourly, current) is not None
    Job.objects.filter(type=hourly.name).update(status="done", finished_at=database_now(), dedup_key=None)
    assert schedules.take_period(hourly, current) is None
    earlier = schedules.Plan(current.due - HOUR, current.due)
    assert schedules.take_period(hourly, earlier) is None  # never backwards
    assert Job.objects.filter(type=hourly.name).count() == 1


@pytest.mark.django_db
def test_a_rolled_back_enqueue_gives_the_period_back(hourly):
    current = schedules.plan_for(hourly, None, database_now())

    with pytest.raises(RuntimeError), transaction.atomic():
        schedules.take_period(hourly, current)
        raise RuntimeError("the caller's transaction fails after the period was taken")

    assert not Schedule.objects.filter(name=hourly.name).exists()
    assert not Job.objects.filter(type=hourly.name).exists()
    assert schedules.take_period(hourly, current) is not None


@pytest.mark.django_db
def test_the_duty_costs_no_query_without_periodic_types_and_one_when_nothing_is_due(
        django_assert_num_queries, temporary_type):
    with django_assert_num_queries(0):
        assert schedules.enqueue_due([]) == []

    temporary_type("test_nightly", noop, cron="0 3 * * *")
    Schedule.objects.create(name="test_nightly", last_period=at("2100-01-01 03:00"))  # taken, far ahead
    with django_assert_num_queries(1):
        assert schedules.enqueue_due([registry.get("test_nightly")]) == []


def test_cron_is_read_in_the_configured_zone_and_every_in_utc_whatever_it_is(settings):
    from jobs.registry import JobType

    nightly, hourly = JobType("n", noop, cron="0 3 * * *"), JobType("h", noop, every=HOUR)
    now = at("2026-07-01 12:00")
    settings.JOBS_SCHEDULE_TIMEZONE = "Europe/Paris"
    assert schedules.plan_for(nightly, None, now).due == at("2026-07-01 01:00")  # 03:00 CEST
    assert schedules.describe(nightly) == 'cron "0 3 * * *" (Europe/Paris)'

    settings.JOBS_SCHEDULE_TIMEZONE = "Nowhere/Atlantis"
    assert schedules.plan_for(hourly, None, now).due == now
    with pytest.raises(ValueError, match="JOBS_SCHEDULE_TIMEZONE='Nowhere/Atlantis' is not a time zone"):
        schedules.plan_for(nightly, None, now)


@pytest.mark.django_db
def test_a_bad_zone_stops_the_cron_schedules_only(settings, temporary_type, hourly, caplog):
    temporary_type("test_nightly", noop, cron="0 3 * * *")
    settings.JOBS_SCHEDULE_TIMEZONE = "Nowhere/Atlantis"

    queued = schedules.enqueue_due([registry.get("test_nightly"), hourly])

    assert [job.type for job in queued] == [hourly.name]
    assert not Schedule.objects.filter(name="test_nightly").exists()
    assert "schedule test_nightly: JOBS_SCHEDULE_TIMEZONE='Nowhere/Atlantis'" in caplog.text


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("row", ["missing", "behind"])
def test_a_worker_arriving_during_anothers_take_waits_for_it_and_then_takes_nothing(hourly, row):
    """The race itself, on two connections: the second upsert waits for the first transaction, re-reads, refuses."""
    if row == "behind":
        Schedule.objects.create(name=hourly.name, last_period=at("2020-01-01 00:00"))
    current = schedules.plan_for(hourly, None if row == "missing" else at("2020-01-01 00:00"), database_now())
    second = {}

    def other_worker():
        try:
            second["job"] = schedules.take_period(hourly, current)
        finally:
            connection.close()

    with transaction.atomic():
        assert schedules.take_period(hourly, current) is not None
        thread = threading.Thread(target=other_worker)
        thread.start()
        wait_for(lambda: lock_waits() > 0, timeout=10, message="the second worker waiting for the first")
    thread.join(timeout=10)

    assert second == {"job": None}
    assert Job.objects.filter(type=hourly.name).count() == 1


def lock_waits() -> int:
    """Backends waiting for a lock this connection holds. pg_locks, not pg_stat_activity: the latter is
    read once per transaction, and this is polled inside the transaction holding the lock."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted AND pg_backend_pid() = ANY(pg_blocking_pids(pid))")
        return cursor.fetchone()[0]
