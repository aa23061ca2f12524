"""The queue under real OS processes: `manage.py runjobs` workers against the test database.

What ran is read from ``test_executions`` (written by the test handlers), never
inferred from job statuses alone. Workers run with JOBS_STALE_AFTER=3,
JOBS_HEARTBEAT_INTERVAL=0.5, JOBS_SWEEP_INTERVAL=1, JOBS_POLL_INTERVAL=0.5
(tests/support/processes.py).
"""

from __future__ import annotations

import random
import signal
import subprocess
from collections import Counter, defaultdict
from datetime import timedelta
from itertools import pairwise

import pytest
from django.db import connection, transaction
from django.utils import timezone

from jobs.models import Job, JobStatus
from jobs.queue import enqueue
from tests.support.pgproxy import PgProxy
from tests.support.processes import database_url, runjobs, wait_for

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("test_types")]

ORG = "proc"


def enqueue_batch(type: str, payloads: list[dict]) -> list:
    """Enqueue in one transaction (one commit, one wake-up); returns the job ids."""
    with transaction.atomic():
        return [enqueue(type, org_id=ORG, payload=p).id for p in payloads]


def enqueue_one(type: str, **payload):
    """Enqueue in a transaction of its own, so its created_at orders it after earlier ones."""
    return enqueue(type, org_id=ORG, payload=payload).id


def job(job_id) -> Job:
    return Job.objects.get(pk=job_id)


def runs_of(executions, job_id) -> list[tuple]:
    """(attempt, pid, started_at, finished_at) of each run of a job, oldest first."""
    return executions(
        "SELECT attempt, pid, started_at, finished_at FROM test_executions"
        " WHERE job_id = %s AND type <> 'on_fail' ORDER BY started_at",
        [job_id],
    )


def started(proc) -> bool:
    return "worker started" in proc.output()


def with_application_name(name: str) -> str:
    """The test database's URL, naming the worker's sessions so pg_stat_activity can tell them apart."""
    return f"{database_url()}?application_name={name}"


def backends(application_name: str) -> list[tuple]:
    """(pid, state, query, backend_start, state_change) of the sessions with that name."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, state, query, backend_start, state_change FROM pg_stat_activity"
            " WHERE application_name = %s AND datname = current_database()",
            [application_name],
        )
        return cursor.fetchall()


def idle_after_listening(application_name: str) -> bool:
    """Has the worker LISTENed, then run a claim that found nothing?

    Its loop is sweep, LISTEN, claim, wait. Its main connection going idle after the
    LISTEN connection was opened is the claim's commit (the sweep's came before), so
    from here on a new job reaches it only through NOTIFY or its next poll. (A
    notification sent before the wait begins is buffered, not lost.)
    """
    rows = backends(application_name)
    listening = [r for r in rows if r[2].upper().startswith("LISTEN") and r[1] == "idle"]
    if not listening:
        return False
    listen_pid, listen_start = listening[0][0], listening[0][3]
    return any(r[0] != listen_pid and r[1] == "idle" and r[4] > listen_start for r in rows)


# -- many jobs, two workers: each runs once --------------------------------------------

def test_two_workers_drain_3000_jobs_and_never_run_one_twice(executions, processes):
    n = 3000
    ids = []
    for _ in range(3):
        ids += enqueue_batch("test_record", [{} for _ in range(n // 3)])

    # --burst: each exits when it finds the queue empty, so exiting is the drain signal.
    a = processes(runjobs, "--burst")
    b = processes(runjobs, "--burst")
    # A bound for a stuck drain, not a speed goal: 2 cores shared with other test runs.
    assert a.wait(timeout=180) == 0
    assert b.wait(timeout=180) == 0

    per_job = Counter(row[0] for row in executions("SELECT job_id FROM test_executions"))
    twice = {job_id: count for job_id, count in per_job.items() if count != 1}
    assert not twice, f"{len(twice)} job(s) ran more than once, e.g. {list(twice.items())[:5]}"
    assert set(per_job) == set(ids)
    assert sum(per_job.values()) == n

    per_pid = Counter(row[0] for row in executions("SELECT pid FROM test_executions"))
    assert set(per_pid) == {a.pid, b.pid}, f"work per pid: {dict(per_pid)} (workers {a.pid}, {b.pid})"

    statuses = Counter(Job.objects.values_list("status", flat=True))
    assert statuses == {JobStatus.DONE: n}
    assert set(Job.objects.values_list("attempts", flat=True)) == {1}


# -- kill -9: the zombie sweep ---------------------------------------------------------

def test_job_of_a_killed_worker_is_swept_and_run_again_by_another(executions, processes):
    a = processes(runjobs)
    victim = enqueue_one("test_slow", sleep=30)
    wait_for(lambda: runs_of(executions, victim), timeout=20, message="worker A to start the job")
    b = processes(runjobs)
    a.kill9()
    # Attempt 1 would have slept 30 s, so it certainly died mid-job; let the rescue run be quick.
    Job.objects.filter(pk=victim).update(payload={"sleep": 0})

    wait_for(lambda: job(victim).status == JobStatus.DONE, timeout=30, message="the job to be done")

    rescued = job(victim)
    assert rescued.attempts == 2
    (first, second) = runs_of(executions, victim)
    assert (first[0], first[1]) == (1, a.pid)
    assert first[3] is None, "attempt 1 should have been killed before it finished"
    assert (second[0], second[1]) == (2, b.pid)
    assert second[3] is not None
    # Re-queued only once the heartbeat was JOBS_STALE_AFTER (3 s) old, not while A could be alive.
    assert second[2] - first[2] > timedelta(seconds=2.5)
    assert "zombie re-queued" in b.output()


def test_job_whose_every_worker_dies_fails_and_the_queue_goes_on(executions, processes):
    poison = enqueue_one("test_slow", sleep=30)  # max_attempts=2

    a = processes(runjobs)
    wait_for(lambda: len(runs_of(executions, poison)) == 1, timeout=20, message="attempt 1 to start")
    b = processes(runjobs)
    a.kill9()
    wait_for(lambda: len(runs_of(executions, poison)) == 2, timeout=30, message="attempt 2 to start")
    c = processes(runjobs)
    b.kill9()

    wait_for(lambda: job(poison).status == JobStatus.FAILED, timeout=30, message="the job to fail")
    failed = job(poison)
    assert failed.error == "max attempts exceeded"
    assert failed.attempts == 2
    assert failed.finished_at is not None and failed.dedup_key is None
    assert [(r[0], r[1]) for r in runs_of(executions, poison)] == [(1, a.pid), (2, b.pid)]
    on_fail = wait_for(
        lambda: executions("SELECT pid, attempt FROM test_executions WHERE type = 'on_fail' AND job_id = %s",
                           [poison]),
        timeout=10, message="on_fail to be called",
    )
    assert on_fail == [(c.pid, 2)], "on_fail runs once, in the worker whose sweep failed the job"

    after = enqueue_one("test_record")
    wait_for(lambda: job(after).status == JobStatus.DONE, timeout=15, message="the next job to be done")
    assert [r[1] for r in runs_of(executions, after)] == [c.pid]
    assert c.alive()


# -- SIGTERM: graceful stop ------------------------------------------------------------

def test_sigterm_finishes_the_current_job_and_starts_no_other(executions, processes):
    worker = processes(runjobs)
    current = enqueue_one("test_record", sleep=2)
    behind = enqueue_one("test_record")
    wait_for(lambda: runs_of(executions, current), timeout=20, message="the first job to start")
    assert job(current).status == JobStatus.RUNNING
    signalled_at = executions("SELECT clock_timestamp()")[0][0]
    worker.signal(signal.SIGTERM)

    assert worker.wait(timeout=20) == 0
    assert "SIGTERM received" in worker.output()
    finished = job(current)
    assert finished.status == JobStatus.DONE
    ((_, _, _, finished_at),) = runs_of(executions, current)
    assert finished_at > signalled_at, "the job should have been running when SIGTERM arrived"
    queued = job(behind)
    assert (queued.status, queued.attempts, queued.started_at) == (JobStatus.QUEUED, 0, None)
    assert runs_of(executions, behind) == []
    assert not Job.objects.running().exists()


def test_sigterm_stops_an_idle_listening_worker_without_waiting_out_its_poll(processes):
    worker = processes(runjobs, "--poll-interval", "30", DATABASE_URL=with_application_name("idle-worker"))
    wait_for(lambda: idle_after_listening("idle-worker"), timeout=20, message="the worker to be idle, listening")

    worker.signal(signal.SIGTERM)
    try:
        code = worker.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail("SIGTERM did not stop an idle worker within 10 s: Waker.wait must return when the "
                    "stop event is set, not only on NOTIFY or at the poll timeout (20-40 s here)")
    assert code == 0
    assert "worker stopped after 0 job(s)" in worker.output()


# -- one_running_per -------------------------------------------------------------------

def test_one_running_per_site_never_overlaps_but_sites_run_in_parallel(executions, processes, guarded_type):
    a = processes(runjobs)
    b = processes(runjobs)
    wait_for(lambda: started(a) and started(b), timeout=20, message="both workers to start")

    # Pairs of the same site back to back: without the guard, the two idle workers
    # woken together would take both jobs of a pair at once.
    rng = random.Random(20240601)
    sites = ["site-a", "site-a", "site-b", "site-b", "site-c", "site-c"] * 5
    ids = [enqueue_one("test_guarded", site_id=s, sleep=round(rng.uniform(0.05, 0.2), 3)) for s in sites]

    wait_for(lambda: Job.objects.filter(pk__in=ids, status=JobStatus.DONE).count() == len(ids),
             timeout=45, message="all guarded jobs to be done")

    rows = executions("SELECT site_id, pid, started_at, finished_at FROM test_executions ORDER BY started_at")
    assert len(rows) == len(ids)
    assert all(r[3] is not None for r in rows)
    by_site = defaultdict(list)
    for site, _, start, end in rows:
        by_site[site].append((start, end))
    for site, runs in by_site.items():
        for (_, prev_end), (next_start, _) in pairwise(runs):
            assert next_start >= prev_end, f"two {site} jobs overlapped: one started at {next_start}, " \
                                           f"before the previous one finished at {prev_end}"
    parallel = [
        (x[0], y[0]) for i, x in enumerate(rows) for y in rows[i + 1:]
        if x[0] != y[0] and y[2] < x[3] and x[2] < y[3]
    ]
    assert parallel, "different sites never ran at the same time: the guard serialised everything"
    assert {r[1] for r in rows} == {a.pid, b.pid}


def test_one_running_per_holds_when_claims_race(executions, processes, guarded_type):
    workers = [processes(runjobs) for _ in range(3)]
    wait_for(lambda: all(started(w) for w in workers), timeout=20, message="the workers to start")

    # Short jobs on two sites, woken by one commit: claims for the same site keep
    # colliding, which only the claim's advisory-lock re-check resolves.
    rng = random.Random(7)
    ids = enqueue_batch("test_guarded", [{"site_id": rng.choice(["site-a", "site-b"]), "sleep": 0.005}
                                         for _ in range(300)])
    wait_for(lambda: Job.objects.filter(pk__in=ids, status=JobStatus.DONE).count() == len(ids),
             timeout=60, message="all guarded jobs to be done")

    rows = executions("SELECT site_id, started_at, finished_at FROM test_executions ORDER BY started_at")
    assert len(rows) == len(ids)
    by_site = defaultdict(list)
    for site, start, end in rows:
        by_site[site].append((start, end))
    overlaps = [(site, b[0]) for site, runs in by_site.items() for a, b in pairwise(runs) if b[0] < a[1]]
    assert not overlaps, f"{len(overlaps)} run(s) started while another of the same site ran: {overlaps[:3]}"
    yielded = sum(w.output().count("claim yielded") for w in workers)
    assert yielded, "no claim ever collided with another: this run did not exercise the guard's re-check"


# -- waking up: polling and LISTEN/NOTIFY ----------------------------------------------

def test_worker_without_listen_drains_jobs_by_polling(executions, processes):
    worker = processes(runjobs, "--no-listen", DATABASE_URL=with_application_name("poll-worker"))
    wait_for(lambda: started(worker) and backends("poll-worker"), timeout=20, message="the worker to connect")

    ids = enqueue_batch("test_record", [{} for _ in range(20)])
    wait_for(lambda: Job.objects.filter(pk__in=ids, status=JobStatus.DONE).count() == len(ids),
             timeout=20, message="the jobs to be done by polling")

    assert {r[3] for r in executions()} == {worker.pid}
    assert "listen=False" in worker.output()
    assert not [b for b in backends("poll-worker") if b[2].upper().startswith("LISTEN")]


def test_listening_worker_is_woken_by_notify_not_by_its_poll(executions, processes):
    # Polls every 20-40 s (30 s ±33 %): a pick-up within 10 s can only come from NOTIFY.
    worker = processes(runjobs, "--poll-interval", "30", DATABASE_URL=with_application_name("listen-worker"))
    wait_for(lambda: idle_after_listening("listen-worker"), timeout=20, message="the worker to be idle, listening")

    woken = enqueue_one("test_record")
    wait_for(lambda: job(woken).status == JobStatus.DONE, timeout=10, message="NOTIFY to wake the worker")
    assert [r[1] for r in runs_of(executions, woken)] == [worker.pid]
    assert "listen=True" in worker.output()


# -- the sweep keeps its own time --------------------------------------------------------

def test_a_zombie_is_recovered_while_every_worker_is_busy_with_a_long_job(executions, processes):
    worker = processes(runjobs)
    long_job = enqueue_one("test_record", sleep=40)
    wait_for(lambda: runs_of(executions, long_job), timeout=20, message="the long job to start")
    # A worker that died an hour ago left this one running.
    zombie = Job.objects.create(type="test_record", org_id=ORG, status=JobStatus.RUNNING, attempts=1,
                                started_at=timezone.now() - timedelta(hours=1))

    # stale_after (3 s) + sweep interval (1 s), with room: far less than the long job's 40 s.
    wait_for(lambda: job(zombie.id).status == JobStatus.QUEUED, timeout=15,
             message="the zombie to be re-queued while the only worker is busy")
    assert job(long_job).status == JobStatus.RUNNING
    # The line is written after the re-queue commits.
    wait_for(lambda: f"job={zombie.id} type=test_record zombie re-queued" in worker.output(), timeout=10,
             message="the re-queue to be logged")
    worker.kill9()  # its 40 s job is not the point: the teardown need not wait 15 s for a graceful stop


# -- SIGTERM: never a new job after it ---------------------------------------------------

def test_sigterm_during_the_sweep_starts_no_job(executions, processes):
    """The start-up sweep fails a zombie and its on_fail takes 3 s; SIGTERM lands meanwhile."""
    Job.objects.create(type="test_slow_on_fail", org_id=ORG, status=JobStatus.RUNNING, attempts=1,
                       payload={"on_fail_sleep": 3}, started_at=timezone.now() - timedelta(hours=1))
    waiting = enqueue_one("test_record")
    worker = processes(runjobs)
    wait_for(lambda: "slow on_fail started" in worker.output(), timeout=20, message="the sweep's on_fail to start")
    signalled_at = executions("SELECT clock_timestamp()")[0][0]
    worker.signal(signal.SIGTERM)

    assert worker.wait(timeout=20) == 0
    late = [r for r in runs_of(executions, waiting) if r[2] > signalled_at]
    assert not late, f"a job started {late[0][2] - signalled_at} after SIGTERM"


def test_sigterm_during_a_connect_starts_no_job(executions, processes):
    """The worker lost its connections and is reconnecting through a proxy that holds the connect."""
    with PgProxy(connection.settings_dict["HOST"], int(connection.settings_dict["PORT"] or 5432)) as proxy:
        worker = processes(runjobs, DATABASE_URL=proxy.url(connection.settings_dict["NAME"]))
        wait_for(lambda: started(worker) and proxy.accepted >= 2, timeout=20, message="the worker to connect")
        proxy.hold_new()
        proxy.drop()  # the connections it had are gone; its reconnection is held
        wait_for(lambda: proxy.held >= 1, timeout=20, message="the worker to be inside a connect")
        waiting = enqueue_one("test_record")
        worker.signal(signal.SIGTERM)
        wait_for(lambda: "SIGTERM received" in worker.output(), timeout=10, message="the signal to be handled")
        proxy.restore()

        assert worker.wait(timeout=20) == 0
    assert runs_of(executions, waiting) == [], "a job started after SIGTERM"
    assert job(waiting).status == JobStatus.QUEUED
