"""runjobs --concurrency N as a real OS process: N jobs at once in one process, and nothing lost doing so.

What ran is read from ``test_executions`` (the test handlers write it on their
own connection: the slot's), never inferred from job statuses alone. Workers
run with JOBS_STALE_AFTER=3, JOBS_HEARTBEAT_INTERVAL=0.5, JOBS_SWEEP_INTERVAL=1
(tests/support/processes.py). They know the test types but the guarded one
(``slots``), so their claims are the batched statement; the guard's test gives
its worker the guarded type too, and the claim becomes one guarded claim per slot.
"""

from __future__ import annotations

import signal
import subprocess
from collections import defaultdict

import pytest
from django.db import connection, transaction

from jobs import queue
from jobs.models import Job, JobStatus, Process
from jobs.queue import enqueue
from tests.support.processes import database_url, runjobs, wait_for

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("test_types")]

ORG = "proc"


def slots(n: int, *args: str, **env):
    """A ``runjobs --concurrency n`` worker without the guarded test type (its claims batched)."""
    env.setdefault("JOBS_HANDLER_MODULES", "tests.support.unguarded_worker_types")
    return runjobs("--concurrency", str(n), *args, **env)


def enqueue_batch(type: str, payloads: list[dict]) -> list:
    """Enqueue in one transaction; returns the job ids."""
    with transaction.atomic():
        return [enqueue(type, org_id=ORG, payload=p).id for p in payloads]


def runs(executions, ids) -> dict:
    """job id -> [(attempt, pid, started_at, finished_at), ...] of its runs, oldest first."""
    found = {job_id: [] for job_id in ids}
    for job_id, attempt, pid, started_at, finished_at in executions(
            "SELECT job_id, attempt, pid, started_at, finished_at FROM test_executions"
            " WHERE type <> 'on_fail' ORDER BY started_at"):
        if job_id in found:
            found[job_id].append((attempt, pid, started_at, finished_at))
    return found


def all_started(executions, ids, attempt=1) -> bool:
    return all(any(run[0] == attempt for run in job_runs) for job_runs in runs(executions, ids).values())


def statuses(ids) -> dict:
    return dict(Job.objects.filter(pk__in=ids).values_list("id", "status"))


def test_four_slots_run_four_sleeping_jobs_at_once_in_one_process(executions, processes):
    ids = enqueue_batch("test_record", [{"sleep": 2}] * 4)

    worker = processes(slots, 4, "--burst")
    assert worker.wait(timeout=60) == 0

    found = runs(executions, ids)
    assert all(len(job_runs) == 1 for job_runs in found.values()), found
    windows = [job_runs[0] for job_runs in found.values()]
    assert {pid for _, pid, _, _ in windows} == {worker.pid}
    latest_start = max(started for _, _, started, _ in windows)
    earliest_end = min(finished for _, _, _, finished in windows)
    assert latest_start < earliest_end, f"the four runs did not overlap: {windows}"
    assert set(statuses(ids).values()) == {JobStatus.DONE}
    # Claimed by one statement: one transaction, one now().
    assert len(set(Job.objects.filter(pk__in=ids).values_list("started_at", flat=True))) == 1
    assert "concurrency=4" in worker.output()


def test_kill9_of_a_four_slot_worker_has_every_running_job_run_again_once(executions, processes):
    ids = enqueue_batch("test_slow", [{"sleep": 30}] * 4)  # test_slow: max_attempts=2
    a = processes(slots, 4)
    wait_for(lambda: all_started(executions, ids), timeout=30, message="worker A to start all four jobs")
    b = processes(slots, 4)
    a.kill9()
    # Attempt 1 would have slept 30 s, so each certainly died mid-job; let the rescue runs be quick.
    Job.objects.filter(pk__in=ids).update(payload={"sleep": 0})

    wait_for(lambda: set(statuses(ids).values()) == {JobStatus.DONE}, timeout=60, message="all four jobs done")

    for job_id, job_runs in runs(executions, ids).items():
        (first, second) = job_runs
        assert (first[0], first[1], first[3]) == (1, a.pid, None), f"job {job_id}: {job_runs}"
        assert (second[0], second[1]) == (2, b.pid) and second[3] is not None, f"job {job_id}: {job_runs}"
    assert set(Job.objects.filter(pk__in=ids).values_list("attempts", flat=True)) == {2}
    assert b.output().count("zombie re-queued") == 4


def test_sigterm_lets_every_running_job_finish_starts_no_other_and_exits_0(executions, processes):
    running = enqueue_batch("test_record", [{"sleep": 2}] * 3)
    behind = enqueue_batch("test_record", [{}] * 2)
    worker = processes(slots, 3)
    wait_for(lambda: all_started(executions, running), timeout=30, message="the three jobs to start")
    signalled_at = executions("SELECT clock_timestamp()")[0][0]
    worker.signal(signal.SIGTERM)

    assert worker.wait(timeout=30) == 0
    assert "SIGTERM received: finishing the running jobs" in worker.output()
    for job_id, job_runs in runs(executions, running).items():
        ((_, _, _, finished_at),) = job_runs
        assert finished_at > signalled_at, f"job {job_id} was not running when SIGTERM arrived"
    assert set(statuses(running).values()) == {JobStatus.DONE}
    assert set(statuses(behind).values()) == {JobStatus.QUEUED}
    assert all(not job_runs for job_runs in runs(executions, behind).values()), "a job started after SIGTERM"
    assert not Job.objects.running().exists()


def test_a_second_sigterm_exits_at_once_leaving_the_running_jobs_to_the_sweep(executions, processes):
    ids = enqueue_batch("test_slow", [{"sleep": 30}] * 2)
    worker = processes(slots, 2)
    wait_for(lambda: all_started(executions, ids), timeout=30, message="the two jobs to start")
    worker.signal(signal.SIGTERM)
    wait_for(lambda: "SIGTERM received" in worker.output(), timeout=10, message="the first signal to be handled")
    worker.signal(signal.SIGTERM)
    try:
        code = worker.wait(timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail("a second SIGTERM did not stop a worker whose slots run 30 s jobs")
    assert code == 1
    assert "second SIGTERM: exiting now" in worker.output()
    assert set(statuses(ids).values()) == {JobStatus.RUNNING}  # for the sweep (test above) to take back


def test_a_failing_handler_in_one_slot_does_not_disturb_the_others(executions, processes):
    sleepers = enqueue_batch("test_record", [{"sleep": 2}] * 2)
    fails = enqueue_batch("test_fail", [{"name": "bad.csv"}])[0]
    exits = enqueue_batch("test_exit", [{}])[0]

    worker = processes(slots, 4, "--burst")
    assert worker.wait(timeout=60) == 0

    failed, exited = Job.objects.get(pk=fails), Job.objects.get(pk=exits)
    assert (failed.status, failed.error) == (JobStatus.FAILED, "ValueError: bad input in bad.csv")
    assert (exited.status, exited.error) == (JobStatus.FAILED, "SystemExit: 4")
    assert executions("SELECT job_id FROM test_executions WHERE type = 'on_fail'") == [(fails,)]
    assert set(statuses(sleepers).values()) == {JobStatus.DONE}
    # The four were claimed together (one statement, one now()) and run side by side: each sleeper
    # was running when the other slots' handlers failed, and went on to its end.
    batch = Job.objects.filter(pk__in=[*sleepers, fails, exits]).values_list("started_at", flat=True)
    assert len(set(batch)) == 1
    for job_runs in runs(executions, sleepers).values():
        ((_, pid, _, finished_at),) = job_runs
        assert pid == worker.pid
        assert failed.finished_at < finished_at and exited.finished_at < finished_at


def test_one_heartbeat_thread_keeps_every_running_job_fresh(executions, processes):
    # Each sleeps past JOBS_STALE_AFTER (3 s) without a word: only the heartbeat keeps it from the sweep.
    ids = enqueue_batch("test_record", [{"sleep": 5}] * 3)
    worker = processes(slots, 3)
    wait_for(lambda: all_started(executions, ids), timeout=30, message="the three jobs to start")
    first_seen = {job.id: (job.progress or {}).get("updated_at") for job in Job.objects.filter(pk__in=ids)}

    def every_heartbeat_moved():
        now = {job.id: (job.progress or {}).get("updated_at") for job in Job.objects.filter(pk__in=ids)}
        return all(now[i] is not None and now[i] != first_seen[i] for i in ids)

    wait_for(every_heartbeat_moved, timeout=10, message="a newer heartbeat on each of the three jobs")

    def listed() -> str:
        row = Process.objects.filter(kind="runjobs", pid=worker.pid).first()
        return row.doing if row is not None else ""

    # The process list names every job the process runs, not only one.
    wait_for(lambda: all(f"job={i}" in listed() for i in ids), timeout=10, message="the three jobs in the process list")
    wait_for(lambda: set(statuses(ids).values()) == {JobStatus.DONE}, timeout=30, message="the jobs to be done")
    assert set(Job.objects.filter(pk__in=ids).values_list("attempts", flat=True)) == {1}
    assert all(len(job_runs) == 1 for job_runs in runs(executions, ids).values())
    assert "zombie" not in worker.output()


def test_the_fence_stops_the_one_slot_whose_job_an_operator_failed(executions, processes):
    ids = enqueue_batch("test_record", [{"sleep": 3}] * 3)
    worker = processes(slots, 3)
    wait_for(lambda: all_started(executions, ids), timeout=30, message="the three jobs to start")
    taken, *others = ids

    assert queue.mark_failed([taken], "marked failed by ops") == [taken]

    wait_for(lambda: set(statuses(others).values()) == {JobStatus.DONE}, timeout=30, message="the others done")
    wait_for(lambda: f"job={taken} type=test_record stopped" in worker.output(), timeout=10,
             message="the failed job's slot to stop")
    stopped = Job.objects.get(pk=taken)
    assert (stopped.status, stopped.error) == (JobStatus.FAILED, "marked failed by ops")
    found = runs(executions, ids)
    ((_, _, _, finished_at),) = found[taken]
    assert finished_at is None, "the handler's write after its job was taken went through"
    assert all(found[i][0][3] is not None for i in others)
    assert f"job {taken} attempt 1 is no longer running here" in worker.output()


def test_with_a_guarded_type_the_slots_never_run_two_jobs_of_one_site_at_once(executions, processes, guarded_type):
    enqueue_batch("test_guarded", [{"site_id": site, "sleep": 1} for site in ("a", "a", "b", "b")])

    worker = processes(runjobs, "--concurrency", "4", "--burst")  # knows test_guarded: one guarded claim per slot
    assert worker.wait(timeout=60) == 0

    by_site = defaultdict(list)
    for site, started_at, finished_at in executions(
            "SELECT site_id, started_at, finished_at FROM test_executions WHERE type = 'test_guarded'"
            " ORDER BY started_at"):
        by_site[site].append((started_at, finished_at))
    assert sorted((site, len(windows)) for site, windows in by_site.items()) == [("a", 2), ("b", 2)]
    for site, (first, second) in by_site.items():
        assert first[1] < second[0], f"two jobs of site {site} ran at once: {first} and {second}"
    a, b = by_site["a"][0], by_site["b"][0]
    assert max(a[0], b[0]) < min(a[1], b[1]), "the two sites did not run side by side"


def test_an_idle_worker_with_slots_is_woken_by_notify_not_its_poll(executions, processes):
    name = "idle-slots"
    worker = processes(slots, 2, "--poll-interval", "30", DATABASE_URL=f"{database_url()}?application_name={name}")

    def listening() -> bool:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
                           " AND datname = current_database() AND query ILIKE 'LISTEN%%'", [name])
            return cursor.fetchone()[0] == 1

    wait_for(listening, timeout=20, message="the worker to LISTEN")
    # A notification sent before its wait begins is kept for it: no race with its first claim.
    job_id = enqueue_batch("test_record", [{}])[0]
    # Its poll is 20-40 s away: done well before means the NOTIFY woke it.
    wait_for(lambda: Job.objects.get(pk=job_id).status == JobStatus.DONE, timeout=10, message="the job to be done")
    assert runs(executions, [job_id])[job_id][0][1] == worker.pid


def test_slots_whose_sessions_are_terminated_put_their_jobs_back_and_run_them_again(executions, processes):
    ids = enqueue_batch("test_record", [{"sleep": 1.5}] * 2)
    worker = processes(slots, 2)
    wait_for(lambda: all_started(executions, ids), timeout=30, message="the two jobs to start")

    with connection.cursor() as cursor:
        # Every session of the worker: its slots', its claims', its heartbeat's...
        cursor.execute("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
                       " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                       " AND backend_type = 'client backend'")
        assert cursor.fetchone()[0] >= 2

    wait_for(lambda: set(statuses(ids).values()) == {JobStatus.DONE}, timeout=60, message="both jobs done")
    for job_id, job_runs in runs(executions, ids).items():
        (first, second) = job_runs
        assert (first[0], first[3]) == (1, None), f"job {job_id}: attempt 1 should have lost its connection"
        assert second[0] == 2 and second[3] is not None, f"job {job_id}: {job_runs}"
        assert f"job={job_id} type=test_record interrupted by lost database connection" in worker.output()
    # Cut off by the database, not failed: those runs are not charged to max_attempts.
    charged = Job.objects.filter(pk__in=ids).values_list("outages", "attempts", "uncounted_attempts")
    assert sorted(charged) == [(1, 2, 1), (1, 2, 1)]
    assert worker.alive()
