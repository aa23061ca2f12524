"""runjobs --concurrency N inside one process: the batched claim, and the slots the worker hands its jobs to.

The claim is tested against the database (k free slots, k rows, in claim order,
queues honoured, no guard conflict); the slots with an in-process Worker whose
handlers say which thread and which database session ran them. Real runjobs
processes are in test_concurrency_processes.py.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from types import SimpleNamespace

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs import queue, sql
from jobs.models import Job, JobStatus
from jobs.pool import Slots
from jobs.worker import Worker
from tests.factories import JobFactory
from tests.support.job_rows import add_finished_jobs
from tests.support.processes import database_url, run_burst, wait_for

WORKER = "host-a:4242"


def queued(type="noop", age=0.0, **fields) -> Job:
    """A queued job created ``age`` seconds ago (older ones are claimed first among equal priorities)."""
    return JobFactory(type=type, created_at=timezone.now() - timedelta(seconds=age), **fields)


# -- the batched claim ---------------------------------------------------------------

@pytest.mark.django_db
def test_k_free_slots_claim_k_jobs_in_one_statement_highest_priority_then_oldest():
    low_old = queued(age=50, priority=-5)
    plain_old = queued(age=40)
    urgent_new = queued(age=1, priority=10)
    plain_new = queued(age=30)
    plain_newest = queued(age=20)
    not_due = queued(age=60, priority=50, run_after=timezone.now() + timedelta(hours=1))

    with CaptureQueriesContext(connection) as statements:
        claimed = queue.claim_many(3, worker_id=WORKER)

    assert len(statements) == 1, [q["sql"] for q in statements]
    assert [j.id for j in claimed] == [urgent_new.id, plain_old.id, plain_new.id]
    for job in claimed:
        assert (job.status, job.attempts) == (JobStatus.RUNNING, 1)
        row = Job.objects.get(pk=job.id)
        assert (row.status, row.attempts, row.worker_ids) == (JobStatus.RUNNING, 1, [WORKER])
        assert row.started_at is not None
    left = set(Job.objects.queued().values_list("id", flat=True))
    assert left == {low_old.id, plain_newest.id, not_due.id}


@pytest.mark.django_db
def test_a_batch_takes_what_is_there_when_slots_outnumber_the_jobs():
    first, second = queued(age=2), queued(age=1)
    assert [j.id for j in queue.claim_many(8)] == [first.id, second.id]
    assert queue.claim_many(8) == []


@pytest.mark.django_db
def test_a_batch_takes_only_the_workers_queues():
    mail = queued(age=3, queue_name="mail")
    queued(age=2)  # default
    imports = queued(age=1, queue_name="imports")
    queued(age=0, queue_name="reports")

    claimed = queue.claim_many(5, queues=["mail", "imports"])

    assert [j.id for j in claimed] == [mail.id, imports.id]
    assert Job.objects.queued().count() == 2


@pytest.mark.django_db
def test_a_batch_releases_a_queue_scoped_key_and_keeps_an_active_one(test_types):
    released = queued(type="noop", age=2, dedup_key="noop:a", enqueued_key="noop:a")
    kept = queued(type="test_active", age=1, dedup_key="test_active:a", enqueued_key="test_active:a")
    claimed = {j.id: j for j in queue.claim_many(2)}
    assert claimed[released.id].dedup_key is None
    assert claimed[kept.id].dedup_key == "test_active:a"


@pytest.mark.django_db
def test_a_batch_skips_unknown_types():
    queued(type="shipped_in_the_next_release", age=5)
    known = queued(age=1)
    assert [j.id for j in queue.claim_many(4)] == [known.id]


@pytest.mark.django_db
@pytest.mark.usefixtures("guarded_type")
def test_with_a_guarded_type_a_batch_never_holds_two_jobs_of_one_value_nor_one_whose_value_runs():
    JobFactory(type="test_guarded", running=True, payload={"site_id": "busy"})
    site_a_first = queued(type="test_guarded", age=50, payload={"site_id": "a"})
    queued(type="test_guarded", age=40, payload={"site_id": "a"})
    queued(type="test_guarded", age=30, payload={"site_id": "busy"})
    site_b = queued(type="test_guarded", age=20, payload={"site_id": "b"})
    plain = queued(type="noop", age=10)

    claimed = queue.claim_many(5)

    assert [j.id for j in claimed] == [site_a_first.id, site_b.id, plain.id]
    values = [j.payload.get("site_id") for j in claimed if j.type == "test_guarded"]
    assert len(values) == len(set(values)) and "busy" not in values
    running = Job.objects.running().filter(type="test_guarded")
    per_site = sorted(running.values_list("payload__site_id", flat=True))
    assert per_site == ["a", "b", "busy"], "one running job per site at most"


@pytest.mark.django_db
def test_a_limit_under_one_is_a_bug_of_the_caller():
    with pytest.raises(ValueError):
        queue.claim_many(0)


def test_a_batch_skips_the_rows_another_worker_has_locked(transactional_db):
    jobs = [queued(age=age) for age in (4, 3, 2, 1)]
    with psycopg.connect(database_url()) as other:
        # Another worker's claim, caught between its lock and its commit.
        other.execute("SELECT id FROM jobs WHERE id = %s FOR UPDATE", [jobs[0].id])
        claimed = queue.claim_many(2)
    assert [j.id for j in claimed] == [jobs[1].id, jobs[2].id]
    assert Job.objects.get(pk=jobs[0].id).status == JobStatus.QUEUED


@pytest.mark.django_db
def test_the_batched_claim_reads_the_partial_index_not_the_table():
    add_finished_jobs()
    queued()
    plan = queue.claim_plan()
    assert plan.guarded is None
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql.CLAIM_MANY_UNGUARDED, {**plan.params, "limit": 4})
        explained = "\n".join(row[0] for row in cursor.fetchall())
    assert "jobs_queued_claim_order" in explained, explained
    assert "Seq Scan on jobs" not in explained, explained


# -- the slots -----------------------------------------------------------------------

def where_it_ran(job):
    """Which thread and which database session ran the handler; sleeps ``payload.sleep``."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    time.sleep(float(job.payload.get("sleep", 0)))
    return {"thread": threading.current_thread().name, "backend": backend}


def backends_alive(pids) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [list(pids)])
        return cursor.fetchone()[0]


def test_concurrency_1_runs_the_handler_in_the_workers_own_thread(transactional_db, temporary_type):
    temporary_type("test_where", where_it_ran)
    job = queue.enqueue("test_where", org_id="demo")
    assert run_burst() == 1
    assert Job.objects.get(pk=job.id).report["thread"] == threading.current_thread().name


def test_slots_run_their_jobs_in_threads_of_their_own_each_on_its_own_connection_closed_at_the_end(
        transactional_db, temporary_type):
    temporary_type("test_where", where_it_ran)
    ids = [queue.enqueue("test_where", org_id="demo", payload={"sleep": 0.5}).id for _ in range(4)]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        own = cursor.fetchone()[0]

    assert run_burst(concurrency=2) == 4

    reports = [Job.objects.get(pk=i).report for i in ids]
    threads = {r["thread"] for r in reports}
    backends = {r["backend"] for r in reports}
    assert threads == {"job-slot-1", "job-slot-2"}, reports
    assert len(backends) == 2 and own not in backends, reports
    wait_for(lambda: backends_alive(backends) == 0, timeout=10, message="the slots' sessions to end")


def test_max_jobs_with_slots_claims_no_more_than_asked(transactional_db):
    for _ in range(6):
        queue.enqueue("noop", org_id="demo")
    assert Worker(max_jobs=4, listen=False, concurrency=3).run() == 4
    assert Job.objects.queued().count() == 2
    assert Job.objects.filter(status=JobStatus.DONE).count() == 4


def test_a_burst_worker_with_slots_waits_for_a_running_job_that_queues_more(transactional_db, temporary_type):
    def queues_a_follow_up(job):
        time.sleep(0.5)
        queue.enqueue("noop", org_id="demo", payload={"after": str(job.id)})

    temporary_type("test_follow_up", queues_a_follow_up)
    first = queue.enqueue("test_follow_up", org_id="demo")

    assert run_burst(concurrency=3) == 2
    follow_up = Job.objects.get(type="noop")
    assert (follow_up.status, follow_up.payload) == (JobStatus.DONE, {"after": str(first.id)})


def test_a_failing_handler_fails_its_job_only(executions, test_types):
    bad = queue.enqueue("test_fail", org_id="demo", payload={"name": "row 3"})
    good = [queue.enqueue("noop", org_id="demo", payload={"sleep": 0.2}).id for _ in range(3)]
    assert run_burst(concurrency=4) == 4
    failed = Job.objects.get(pk=bad.id)
    assert (failed.status, failed.error) == (JobStatus.FAILED, "ValueError: bad input in row 3")
    assert [row[1] for row in executions()] == ["on_fail"]
    assert set(Job.objects.filter(pk__in=good).values_list("status", flat=True)) == {JobStatus.DONE}


def test_a_slot_outlives_an_error_that_escapes_a_run():
    ran, done = [], threading.Event()
    first, second = SimpleNamespace(id="first"), SimpleNamespace(id="second")

    def run(job, claim_sent):
        ran.append(job.id)
        if job is first:
            raise RuntimeError("a bug in the worker")
        done.set()

    ended = threading.Event()
    slots = Slots(1, run, on_end=ended.set)
    slots.start()
    slots.hand([first], 0.0)
    assert ended.wait(10) and slots.free() == 1
    slots.hand([second], 0.0)
    assert done.wait(10)
    slots.close()
    assert ran == ["first", "second"]


def test_slots_never_take_more_jobs_than_they_have_free():
    release = threading.Event()

    def run(job, sent):
        release.wait(10)
        return False  # the slot frees itself (no main thread recorded its run)

    slots = Slots(2, run)
    slots.start()
    slots.hand([SimpleNamespace(id="a")], 0.0)
    assert slots.free() == 1
    with pytest.raises(RuntimeError):
        slots.hand([SimpleNamespace(id="b"), SimpleNamespace(id="c")], 0.0)
    release.set()
    slots.close()
    assert slots.free() == 2


def test_runjobs_refuses_a_concurrency_under_one():
    with pytest.raises(CommandError, match="--concurrency must be at least 1"):
        call_command("runjobs", "--concurrency", "0")
    with pytest.raises(ValueError):
        Worker(concurrency=0)
