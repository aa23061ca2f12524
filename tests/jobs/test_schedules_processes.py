"""Periodic jobs under real worker processes: each period is enqueued exactly once however many race for it.

The workers load tests/support/periodic_worker_types.py and look for due periods every 0.5 s (the duties'
tick), so three of them meet at every period boundary. What was enqueued is read from the jobs table, per period.
"""

from collections import Counter
from datetime import datetime, timedelta

import pytest
from django.db import connection

from jobs.models import Job, Schedule
from jobs.system import SYSTEM_ORG
from tests.support.periodic_types import EVERY_2S, HOURLY
from tests.support.processes import runjobs, wait_for

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

MODULES = "tests.support.worker_types,tests.support.periodic_worker_types"


def periodic_worker():
    return runjobs(JOBS_HANDLER_MODULES=MODULES, JOBS_SCHEDULE_CHECK_INTERVAL="0.5")


def periods_of(job_type: str) -> Counter:
    return Counter(Job.objects.filter(type=job_type).values_list("payload__period", flat=True))


def database_now() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


def test_three_workers_enqueue_each_two_second_period_exactly_once(processes):
    workers = [processes(periodic_worker) for _ in range(3)]
    wait_for(lambda: all("worker started" in w.output() for w in workers), timeout=60, message="three workers")
    # Five periods: about 8 s of three workers meeting at every boundary.
    wait_for(lambda: len(periods_of(EVERY_2S)) >= 5, timeout=40, message="five periods enqueued")
    for worker in workers:
        worker.stop()

    counted = periods_of(EVERY_2S)
    assert len(counted) >= 5
    assert set(counted.values()) == {1}, {p: n for p, n in counted.items() if n > 1}
    starts = sorted(datetime.fromisoformat(p) for p in counted)
    assert all(start.timestamp() % 2 == 0 for start in starts)  # on the epoch's 2 s grid
    assert Job.objects.filter(type=EVERY_2S).exclude(org_id=SYSTEM_ORG).count() == 0
    row = Schedule.objects.get(name=EVERY_2S)
    assert row.last_period == starts[-1]
    assert str(row.last_job_id) in {str(i) for i in Job.objects.filter(type=EVERY_2S).values_list("id", flat=True)}
    # The workers ran them too: nothing left queued but, at most, the periods of the last instants.
    assert Job.objects.filter(type=EVERY_2S, status="done").count() >= len(counted) - 2


def test_after_downtime_two_workers_enqueue_the_latest_missed_period_once(processes):
    Schedule.objects.create(name=HOURLY, last_period=database_now() - timedelta(days=30))
    workers = [processes(periodic_worker) for _ in range(2)]
    wait_for(lambda: all("worker started" in w.output() for w in workers), timeout=60, message="two workers")
    wait_for(lambda: Job.objects.filter(type=HOURLY, status="done").exists(), timeout=30,
             message="the catch-up job run")
    seen = Schedule.objects.get(name=HOURLY).updated_at
    # A few more looks by both workers (0.5 s apart) after the period was taken.
    wait_for(lambda: database_now() - seen > timedelta(seconds=2), timeout=30, message="2 s more")
    for worker in workers:
        worker.stop()

    jobs = list(Job.objects.filter(type=HOURLY))
    now = database_now()
    latest_hour = now.replace(minute=0, second=0, microsecond=0)
    assert len(jobs) == 1, [j.payload for j in jobs]
    assert datetime.fromisoformat(jobs[0].payload["period"]) in {latest_hour, latest_hour - timedelta(hours=1)}
