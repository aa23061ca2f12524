"""One statement per turn of the worker: its done runs recorded with its next claim (``queue.finish_and_claim``).

The statement against the database (fences, claim order, all or nothing), the
hand-over between slots and the main thread (``DoneRuns``), the waker's poke,
and in-process workers counting their statements. Real runjobs processes,
kill -9 included, are in test_concurrency_processes.py and test_processes.py.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import psycopg
import pytest
from django.db import DataError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs import conf, queue
from jobs import worker as worker_module
from jobs.models import Job, JobStatus
from jobs.pool import DoneRun, DoneRuns
from jobs.worker import Waker
from tests.factories import JobFactory
from tests.support.processes import run_burst

WORKER = "host-b:77"


def queued(age=0.0, **fields) -> Job:
    return JobFactory(type="noop", created_at=timezone.now() - timedelta(seconds=age), **fields)


def claimed(count: int) -> list[Job]:
    jobs = queue.claim_many(count, worker_id=WORKER)
    assert len(jobs) == count
    return jobs


def statuses(*jobs) -> list[str]:
    return [Job.objects.get(pk=job.id).status for job in jobs]


# -- the statement -------------------------------------------------------------------

@pytest.mark.django_db
def test_done_runs_are_recorded_and_the_next_jobs_claimed_in_one_statement():
    first, second = queued(age=90, dedup_key="noop:a"), queued(age=80)
    runs = claimed(2)
    low, urgent, old, new = queued(age=50, priority=-1), queued(age=1, priority=5), queued(age=40), queued(age=30)

    with CaptureQueriesContext(connection) as statements:
        recorded, jobs = queue.finish_and_claim([(runs[0], '{"rows": 3}'), (runs[1], None)], 3, worker_id=WORKER)

    assert len(statements) == 1
    assert recorded == {first.id, second.id}
    assert [j.id for j in jobs] == [urgent.id, old.id, new.id]
    assert statuses(low) == ["queued"]
    done = Job.objects.get(pk=first.id)
    assert (done.status, done.report, done.dedup_key, done.finished_at is not None) == ("done", {"rows": 3}, None, True)
    assert Job.objects.get(pk=second.id).report is None
    for job in jobs:
        row = Job.objects.get(pk=job.id)
        assert (job.status, row.status, row.attempts, row.worker_ids) == ("running", "running", 1, [WORKER])


@pytest.mark.django_db
def test_a_run_that_lost_its_job_is_not_recorded_and_its_job_is_left_alone():
    queued(age=2), queued(age=1)
    mine, taken = claimed(2)
    # The sweep put `taken` back and another worker claimed it: a new attempt, not this run's.
    Job.objects.filter(pk=taken.id).update(attempts=taken.attempts + 1)

    recorded, jobs = queue.finish_and_claim([(mine, None), (taken, '{"stale": true}')], 0)

    assert (recorded, jobs) == ({mine.id}, [])
    row = Job.objects.get(pk=taken.id)
    assert (row.status, row.report) == ("running", None)


@pytest.mark.django_db
def test_limit_zero_only_finishes_and_no_finishes_only_claims():
    queued(age=5)
    run = claimed(1)[0]
    waiting = queued(age=1)

    assert queue.finish_and_claim([(run, None)], 0) == ({run.id}, [])
    assert statuses(waiting) == ["queued"]
    recorded, jobs = queue.finish_and_claim([], 4)
    assert recorded == set() and [j.id for j in jobs] == [waiting.id]
    assert queue.finish_and_claim([], 4) == (set(), [])
    with pytest.raises(ValueError):
        queue.finish_and_claim([], -1)


@pytest.mark.django_db
def test_all_or_nothing_a_refused_report_records_no_run_and_claims_no_job():
    queued(age=2), queued(age=1)
    good, bad = claimed(2)
    waiting = queued()

    with pytest.raises(DataError), transaction.atomic():
        queue.finish_and_claim([(good, "{}"), (bad, "not json")], 1)

    assert statuses(good, bad, waiting) == ["running", "running", "queued"]


@pytest.mark.django_db
def test_with_a_guarded_type_the_claim_is_the_guarded_ones(guarded_type):
    queued(age=2)
    runs = claimed(1)
    site_busy = JobFactory(type="test_guarded", payload={"site_id": 7}, status=JobStatus.RUNNING, attempts=1,
                           started_at=timezone.now())
    blocked = JobFactory(type="test_guarded", payload={"site_id": 7}, created_at=timezone.now() - timedelta(hours=1))
    free = queued()

    recorded, jobs = queue.finish_and_claim([(runs[0], None)], 2)

    assert recorded == {runs[0].id}
    assert [j.id for j in jobs] == [free.id]
    assert statuses(site_busy, blocked) == ["running", "queued"]


# -- workers -------------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_worker_records_each_done_run_with_its_next_claim(concurrency):
    jobs = [queue.enqueue("noop", org_id="demo") for _ in range(12)]
    sent = []

    def count(execute, sql, params, many, context):
        sent.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        assert run_burst(concurrency=concurrency) == 12

    assert set(statuses(*jobs)) == {"done"}
    if concurrency == 1:
        # This thread's claims: the first, then one per job with its finish (the last one finds
        # nothing, and the burst ends there). No finish of its own.
        assert sum("FOR UPDATE SKIP LOCKED" in q for q in sent) == 13
        assert not [q for q in sent if q.lstrip().startswith("UPDATE jobs\nSET status = 'done'")]


@pytest.mark.django_db(transaction=True)
def test_with_slots_a_report_that_is_not_json_fails_its_own_job_only(temporary_type):
    temporary_type("test_reporting", lambda job: {"seen": {1, 2}} if job.payload.get("bad") else {"ok": True})
    bad = queue.enqueue("test_reporting", org_id="demo", payload={"bad": True})
    good = [queue.enqueue("test_reporting", org_id="demo") for _ in range(6)]

    assert run_burst(concurrency=3) == 7

    assert set(statuses(*good)) == {"done"}
    assert {Job.objects.get(pk=job.id).report["ok"] for job in good} == {True}
    failed = Job.objects.get(pk=bad.id)
    assert failed.status == "failed" and failed.error.startswith("handler returned a report that is not JSON")


@pytest.mark.django_db(transaction=True)
def test_with_max_jobs_no_job_is_claimed_past_the_limit():
    jobs = [queue.enqueue("noop", org_id="demo") for _ in range(5)]

    assert run_burst(max_jobs=3) == 3

    assert sorted(statuses(*jobs)) == ["done"] * 3 + ["queued"] * 2


# -- the hand-over -------------------------------------------------------------------

def done_run(n: int) -> DoneRun:
    return DoneRun(Job(id=f"00000000-0000-0000-0000-00000000000{n}", attempts=1), None, None, 0.0)


def test_a_posted_run_waits_for_the_main_thread_and_pokes_it():
    pokes = []
    runs = DoneRuns(lambda: pokes.append(1))
    first, second = done_run(1), done_run(2)
    assert runs.post(first) and runs.post(second)
    assert len(pokes) == 2
    assert runs.take() == [first, second]
    assert runs.take() == []


def test_once_closed_the_waiting_runs_come_back_and_no_more_are_taken():
    runs = DoneRuns(lambda: None)
    waiting = done_run(3)
    runs.post(waiting)
    assert runs.close() == [waiting]
    assert runs.post(done_run(4)) is False  # the slot records it itself
    assert runs.take() == []


def test_a_gather_ends_when_enough_runs_wait_or_at_the_window():
    runs = DoneRuns(lambda: None)
    threading.Timer(0.1, lambda: [runs.post(done_run(n)) for n in (5, 6)]).start()
    started = time.monotonic()
    assert len(runs.gather(2, within=30)) == 2
    assert time.monotonic() - started < 10
    runs.post(done_run(7))
    started = time.monotonic()
    assert len(runs.gather(3, within=0.2)) == 1  # the other two never came: the window ends it
    assert time.monotonic() - started >= 0.2


def test_a_wake_ends_a_gather_at_once_and_one_made_before_ends_the_next_one():
    """A slot that ends without handing a run over wakes the loop waiting on the runs (every slot was busy)."""
    runs = DoneRuns(lambda: None)
    threading.Timer(0.1, runs.wake).start()
    started = time.monotonic()
    assert runs.gather(1, within=30) == []
    assert time.monotonic() - started < 10
    runs.wake()  # nobody gathering: the next gather returns at once, once
    started = time.monotonic()
    assert runs.gather(1, within=30) == []
    assert runs.gather(1, within=0.2) == []
    assert 0.2 <= time.monotonic() - started < 10


@pytest.mark.django_db(transaction=True)
def test_runs_whose_shared_finish_is_refused_are_recorded_one_by_one(monkeypatch):
    jobs = [queue.enqueue("noop", org_id="demo") for _ in range(9)]
    real, refusals = queue.finish_and_claim, []

    def refuse_the_first_finish(finished, limit, *args):
        if finished and not refusals:
            refusals.append([job.id for job, _ in finished])
            raise psycopg.errors.InvalidTextRepresentation("a report the database refused")
        return real(finished, limit, *args)

    monkeypatch.setattr(queue, "finish_and_claim", refuse_the_first_finish)

    assert run_burst(concurrency=3) == 9

    assert refusals and set(statuses(*jobs)) == {"done"}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("listen", [False, True])
def test_a_poke_ends_the_wakers_wait_at_once(listen):
    waker = Waker(listen)
    if listen:
        waker.ensure_listening()
    try:
        threading.Timer(0.2, waker.poke).start()
        started = time.monotonic()
        waker.wait(30, threading.Event())
        assert time.monotonic() - started < 10
        # Pokes made while nobody waited end the next wait, once.
        waker.poke()
        waker.poke()
        started = time.monotonic()
        waker.wait(30, threading.Event())
        waker.wait(0.3, threading.Event())
        assert 0.3 <= time.monotonic() - started < 10
    finally:
        waker.shutdown()
    waker.poke()  # after the shutdown: nothing, no error


@pytest.mark.django_db(transaction=True)
def test_a_busy_worker_reads_off_the_notifications_it_does_not_wait_for(monkeypatch):
    """Unread, they would fill the LISTEN connection's socket and block the server process behind it."""
    monkeypatch.setattr(worker_module, "DISCARD_EVERY", 0.0)
    waker = Waker(True)
    waker.ensure_listening()
    try:
        with connection.cursor() as cursor:
            for _ in range(200):
                cursor.execute("SELECT pg_notify(%s, '')", [conf.NOTIFY_CHANNEL])
        time.sleep(0.2)
        waker.read_off()  # a turn of a busy loop: no wait, the pending ones read off
        started = time.monotonic()
        waker.wait(0.3, threading.Event())
        assert time.monotonic() - started >= 0.3  # none was left to end the wait early
    finally:
        waker.shutdown()
