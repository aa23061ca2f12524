"""A `runjobs` worker whose database goes away: sessions terminated, then a real server restart.

The worker must wait the outage out and finish the queue; a job cut off by the
lost connection goes back to the queue (an interruption, not a failure).
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import timedelta

import psycopg
import pytest
from django.db import connection

from jobs.models import Job, JobStatus
from jobs.queue import enqueue
from tests.support.handlers import EXECUTIONS_DDL
from tests.support.pgproxy import PgProxy
from tests.support.postgres import private_server
from tests.support.processes import runjobs, wait_for

pytestmark = [pytest.mark.processes, pytest.mark.usefixtures("test_types")]


def terminate_other_sessions() -> int:
    """Terminate every client session of the test database but ours; returns how many."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )
        return cursor.fetchone()[0]


# The heartbeat thread survived the outage: the re-run (claimed after it) was heartbeated.
HEARTBEAT_AFTER_START = "SELECT (progress ->> 'updated_at')::timestamptz > started_at FROM jobs WHERE id = %s"


def done_count(ids) -> int:
    return Job.objects.filter(pk__in=ids, status=JobStatus.DONE).count()


@pytest.mark.django_db(transaction=True)
def test_worker_survives_its_sessions_being_terminated_again_and_again(executions, processes):
    # One transaction per job: distinct created_at, so a job put back in the queue is
    # the oldest one and is claimed next (never interrupted again by a later round).
    victim = enqueue("test_record", org_id="outage", payload={"sleep": 1.5}).id
    ids = [victim] + [enqueue("test_record", org_id="outage", payload={"sleep": 0.02}).id for _ in range(250)]
    worker = processes(runjobs)

    def victim_runs():
        return executions("SELECT attempt, finished_at FROM test_executions WHERE job_id = %s ORDER BY id",
                          [victim])

    wait_for(victim_runs, timeout=20, message="the long job to start")
    assert terminate_other_sessions() >= 1
    wait_for(lambda: Job.objects.get(pk=victim).status == JobStatus.DONE, timeout=30,
             message="the interrupted job to be re-run")

    for n in range(1, 6):
        assert Job.objects.queued().exists(), f"the queue was drained before termination round {n}"
        assert terminate_other_sessions() >= 1
        # Progress since the termination: the worker reconnected and went on working.
        # (+3, not +1: a finish already in flight may still commit after the count.)
        before = done_count(ids)
        wait_for(lambda before=before: done_count(ids) >= min(before + 3, len(ids)), timeout=30,
                 message=f"progress after termination round {n}")

    wait_for(lambda: done_count(ids) == len(ids), timeout=60, message="every job to be done")
    assert Counter(Job.objects.values_list("status", flat=True)) == {JobStatus.DONE: len(ids)}
    assert Job.objects.get(pk=victim).attempts == 2
    assert executions(HEARTBEAT_AFTER_START, [victim]) == [(True,)], "no heartbeat after the terminations"
    (first, second) = victim_runs()
    assert first == (1, None), "attempt 1 should have lost its connection before recording its finish"
    assert second[0] == 2 and second[1] is not None
    finished = executions("SELECT count(DISTINCT job_id) FROM test_executions WHERE finished_at IS NOT NULL")
    assert finished == [(len(ids),)]
    assert worker.alive()
    assert f"job={victim} type=test_record interrupted by lost database connection" in worker.output()


# -- a real restart, on a server of our own --------------------------------------------

DB = "seoinsight_outage"


@pytest.fixture
def outage_server(request):
    """A private server with a migrated database; its log is shown if the test fails."""
    with private_server() as server:
        server.create_database(DB)
        server.migrate(DB)
        with server.connect(DB) as conn:
            conn.execute(EXECUTIONS_DDL)
        yield server
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            print(f"\n----- PostgreSQL log -----\n{server.log()[-6000:]}")


def query(server, statement: str, params=None):
    """Rows of ``statement``, or None while the server cannot be reached."""
    try:
        with server.connect(DB) as conn:
            return conn.execute(statement, params).fetchall()
    except psycopg.OperationalError:
        return None


def execute(server, statement: str, params=None) -> None:
    with server.connect(DB) as conn:
        conn.execute(statement, params)


def enqueue_with_a_long_job(server, n: int, long_n: int):
    """n test_record jobs claimed in order (created_at 1 ms apart); number long_n sleeps 2 s.

    Returns the long job's id: the one the outage will cut off.
    """
    execute(server, """
        INSERT INTO jobs (org_id, type, payload, created_at)
        SELECT 'outage', 'test_record',
               jsonb_build_object('n', i, 'sleep', CASE WHEN i = %(long_n)s THEN 2 ELSE 0.02 END),
               now() - (%(n)s - i) * interval '1 millisecond'
        FROM generate_series(1, %(n)s) AS i
    """, {"n": n, "long_n": long_n})
    ((job_id,),) = query(server, "SELECT id FROM jobs WHERE (payload ->> 'n')::int = %s", [long_n])
    return job_id


def assert_drained_with_the_long_job_rerun(server, worker, n: int, long_job) -> None:
    def all_done():
        rows = query(server, "SELECT count(*) FROM jobs WHERE status = 'done'")
        return rows is not None and rows[0][0] == n

    wait_for(all_done, timeout=60, message="every job to be done after the outage")
    assert query(server, "SELECT status, count(*) FROM jobs GROUP BY status") == [("done", n)]
    assert query(server, "SELECT attempts FROM jobs WHERE id = %s", [long_job]) == [(2,)]
    # Issue 9 item 11: the run the database cut off is not charged to max_attempts.
    assert query(server, "SELECT outages, attempts - uncounted_attempts FROM jobs WHERE id = %s",
                 [long_job]) == [(1, 1)], "the cut-off run should not count against the budget"
    runs = query(server, "SELECT attempt, finished_at IS NOT NULL FROM test_executions WHERE job_id = %s"
                         " ORDER BY id", [long_job])
    assert runs == [(1, False), (2, True)], "the cut-off run should have been re-queued and run again"
    assert query(server, HEARTBEAT_AFTER_START, [long_job]) == [(True,)], "no heartbeat after the outage"
    assert worker.alive()
    assert f"job={long_job} type=test_record interrupted by lost database connection" in worker.output()


def test_worker_rides_out_a_database_restart(outage_server, processes):
    server, n = outage_server, 150
    long_job = enqueue_with_a_long_job(server, n, long_n=40)
    ((started_before,),) = query(server, "SELECT pg_postmaster_start_time()")
    worker = processes(runjobs, DATABASE_URL=server.url(DB))
    wait_for(lambda: query(server, "SELECT 1 FROM test_executions WHERE job_id = %s", [long_job]),
             timeout=30, message="the long job to start")

    server.restart()  # back within a fraction of a second, while the long job still sleeps

    ((started_after,),) = wait_for(lambda: query(server, "SELECT pg_postmaster_start_time()"), timeout=30,
                                   message="the server to accept connections")
    assert started_after > started_before, "the server did not restart"
    assert_drained_with_the_long_job_rerun(server, worker, n, long_job)


def test_worker_waits_out_a_stopped_database(outage_server, processes):
    server, n = outage_server, 100
    long_job = enqueue_with_a_long_job(server, n, long_n=30)
    worker = processes(runjobs, DATABASE_URL=server.url(DB))
    wait_for(lambda: query(server, "SELECT 1 FROM test_executions WHERE job_id = %s", [long_job]),
             timeout=30, message="the long job to start")

    server.stop()
    # The long job's end finds no database; the worker keeps retrying with backoff.
    wait_for(lambda: worker.output().count("database unavailable") >= 2, timeout=20,
             message="the worker to report the outage twice")
    assert worker.alive()
    server.start()

    assert_drained_with_the_long_job_rerun(server, worker, n, long_job)


# -- an outage longer than stale_after: nobody runs a live job twice -------------------
#
# Worker A runs a LONG (20 s) job; an outage (a restart, a partition) keeps it from
# heartbeating for longer than stale_after (STALE, 10 s here). What may happen after
# depends on who could see what: see README "Failure and recovery".

STALE = 10
OUTAGE = STALE + 2
LONG = 20


def worker_env(url: str) -> dict:
    return {"DATABASE_URL": url, "JOBS_STALE_AFTER": STALE}


def start_long_job(server, processes, url: str):
    """Queue the long job and start worker A on ``url``; returns (A, job id) once it runs."""
    execute(server, "INSERT INTO jobs (org_id, type, payload) VALUES ('outage', 'test_record', %s)",
            [f'{{"sleep": {LONG}}}'])
    ((job_id,),) = query(server, "SELECT id FROM jobs")
    a = processes(runjobs, **worker_env(url))
    wait_for(lambda: query(server, "SELECT 1 FROM test_executions WHERE job_id = %s", [job_id]),
             timeout=30, message="worker A to start the long job")
    return a, job_id


def runs(server, job_id) -> list[tuple]:
    """(attempt, pid, started_at, finished_at) of each run of the job."""
    return query(server, "SELECT attempt, pid, started_at, finished_at FROM test_executions"
                         " WHERE job_id = %s ORDER BY started_at", [job_id])


def test_after_a_restart_a_new_worker_does_not_judge_silence_from_before_it(outage_server, processes):
    """The database restarts; worker A is still cut off when worker B starts and sweeps.

    B must count A's silence from the database's start, not from A's last heartbeat
    before the outage: A gets stale_after to come back, and does, 2 s in.
    """
    server = outage_server
    with PgProxy(server.socket_dir) as a_link:
        a, job_id = start_long_job(server, processes, a_link.url(DB))
        # A keeps its copy of the payload; the re-run after A's interrupted run has nothing to wait for.
        execute(server, "UPDATE jobs SET payload = '{\"sleep\": 0}' WHERE id = %s", [job_id])
        server.stop()
        a_link.blackhole()  # after the stop: a held connection would make the stop wait for it
        time.sleep(OUTAGE)  # the outage itself, not a wait for a condition
        server.start()
        b = processes(runjobs, **worker_env(server.url(DB)))
        wait_for(lambda: "worker started" in b.output(), timeout=30, message="worker B to start")
        time.sleep(1)  # B's start-up sweep has run; A is still cut off
        a_link.restore()

        def finished():
            rows = query(server, "SELECT status FROM jobs WHERE id = %s", [job_id])
            return rows == [("done",)]

        wait_for(finished, timeout=60, message="the job to be done")
    first, *later = runs(server, job_id)
    assert first[:2] == (1, a.pid)
    # A's handler was asleep until LONG s after its start; its connection died with the
    # restart, so the job went back to the queue when the handler ended, not before.
    early = [r for r in later if r[2] < first[2] + timedelta(seconds=LONG)]
    assert not early, f"attempt {early[0][0]} started {early[0][2] - first[2]} into attempt 1, while A still ran it"


def test_after_a_partition_the_sweeper_gives_the_others_time_to_come_back(outage_server, processes):
    """Both workers lose the network for longer than stale_after (no restart); B's link comes back first.

    B was cut off too: it must not count A's silence until A had stale_after to heartbeat.
    A comes back 2 s after B; the job stays A's and runs exactly once.
    """
    server = outage_server
    with PgProxy(server.socket_dir) as a_link, PgProxy(server.socket_dir) as b_link:
        a, job_id = start_long_job(server, processes, a_link.url(DB))
        b = processes(runjobs, **worker_env(b_link.url(DB)))
        wait_for(lambda: "worker started" in b.output(), timeout=30, message="worker B to start")
        time.sleep(2)  # B sweeps every second: it has swept before the partition
        a_link.blackhole()
        b_link.blackhole()
        time.sleep(OUTAGE)
        b_link.restore()
        time.sleep(2)
        a_link.restore()

        wait_for(lambda: query(server, "SELECT status FROM jobs WHERE id = %s", [job_id]) == [("done",)],
                 timeout=60, message="the job to be done")
    assert [r[:2] for r in runs(server, job_id)] == [(1, a.pid)], "the job ran more than once"
    assert query(server, "SELECT attempts FROM jobs WHERE id = %s", [job_id]) == [(1,)]


def test_a_worker_cut_off_alone_stops_writing_once_its_job_was_taken(outage_server, processes):
    """Only A loses the network; B, connected all along, rightly re-runs the job after stale_after.

    When A's network comes back, its handler wakes and writes: that write must not land.
    """
    server = outage_server
    with PgProxy(server.socket_dir) as a_link:
        a, job_id = start_long_job(server, processes, a_link.url(DB))
        execute(server, "UPDATE jobs SET payload = '{\"sleep\": 0}' WHERE id = %s", [job_id])  # A keeps its copy
        b = processes(runjobs, **worker_env(server.url(DB)))
        a_link.blackhole()
        wait_for(lambda: len(runs(server, job_id)) == 2, timeout=30, message="B to re-run the job")
        a_link.restore()
        wait_for(lambda: "handler's writes stop here" in a.output() or "no longer running here" in a.output(),
                 timeout=LONG + 10, message="A's handler to be stopped")

    (first, second) = runs(server, job_id)
    assert first[:2] == (1, a.pid) and second[:2] == (2, b.pid)
    assert first[3] is None, "A's handler wrote after its job was taken (attempt 1 recorded its finish)"
    assert second[3] is not None
    assert query(server, "SELECT status, attempts FROM jobs WHERE id = %s", [job_id]) == [("done", 2)]
    assert a.alive()
