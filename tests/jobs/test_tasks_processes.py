"""Tasks under real ``manage.py runjobs`` processes: run, rolled back, killed (-9) and rescued, guarded.

The workers load the test tasks through JOBS_HANDLER_MODULES, as a deployment loads its own
modules; what ran is read from ``test_executions`` (written by the tasks), not only from the
results. Workers run with JOBS_STALE_AFTER=3 and JOBS_SWEEP_INTERVAL=1 (tests/support/processes.py).
"""

from __future__ import annotations

import socket
from collections import defaultdict
from itertools import pairwise

import pytest
from django.db import transaction

from jobs.tasks_compat import TaskResultDoesNotExist, TaskResultStatus, default_task_backend
from tests.support.processes import runjobs, wait_for
from tests.support.task_registry import MODULE, loaded_tasks

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("zombies_possible")]  # zombies: tests/conftest.py

HOST = socket.gethostname()


@pytest.fixture
def tasks():
    with loaded_tasks() as module:
        yield module


def task_worker(*args: str):
    return runjobs(*args, JOBS_HANDLER_MODULES=f"tests.support.worker_types,{MODULE}")


def finished(result) -> bool:
    return default_task_backend.get_result(result.id).is_finished


def runs_of(executions, result) -> list[tuple]:
    """(attempt, pid) of each recorded run of a task, in order."""
    return executions("SELECT attempt, pid FROM test_executions WHERE job_id = %s AND type <> 'on_fail' ORDER BY id",
                      [result.id])


def test_tasks_sync_and_async_run_in_runjobs(tasks, processes):
    worker = processes(task_worker)
    sync = tasks.calculate_meaning_of_life.enqueue()
    coroutine = tasks.add_async.enqueue(20, 22)

    wait_for(lambda: finished(sync) and finished(coroutine), timeout=30, message="both tasks to finish")
    sync.refresh()
    coroutine.refresh()
    assert sync.status == TaskResultStatus.SUCCESSFUL, sync.errors
    assert (sync.return_value, sync.attempts, sync.worker_ids) == (42, 1, [f"{HOST}:{worker.pid}"])
    assert coroutine.return_value == {"sum": 42, "loop_thread": "jobs-event-loop"}


def test_async_tasks_of_concurrent_slots_share_the_processes_one_loop(tasks, processes):
    worker = processes(task_worker, "--concurrency", "3")
    wait_for(lambda: "worker started" in worker.output(), timeout=30, message="the worker to start")
    with transaction.atomic():  # one commit: the idle worker claims for its three free slots at once
        results = [tasks.nap.enqueue(1.0) for _ in range(3)]

    wait_for(lambda: all(finished(r) for r in results), timeout=30, message="the three naps to finish")
    naps = [default_task_backend.get_result(r.id).return_value for r in results]
    assert {n["pid"] for n in naps} == {worker.pid}
    assert {n["thread"] for n in naps} == {"jobs-event-loop"} and len({n["loop"] for n in naps}) == 1
    assert max(n["started"] for n in naps) < min(n["ended"] for n in naps), f"the naps did not overlap: {naps}"


def test_a_rolled_back_enqueue_never_runs(tasks, processes, executions):
    processes(task_worker)
    with pytest.raises(RuntimeError), transaction.atomic():
        rolled_back = tasks.recorded.enqueue()
        raise RuntimeError("the request that enqueued it failed")
    committed = tasks.recorded.enqueue()

    wait_for(lambda: finished(committed), timeout=30, message="the committed task to finish")
    # The worker was up and claiming after the rollback: it ran the one that committed, only.
    assert executions("SELECT job_id::text FROM test_executions") == [(committed.id,)]
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(rolled_back.id)


def test_a_task_whose_worker_is_killed_is_run_again_by_the_sweep(tasks, processes, executions):
    a = processes(task_worker)
    result = tasks.slow_first_attempt.enqueue()  # attempt 1 sleeps a minute; max_attempts=2
    wait_for(lambda: runs_of(executions, result), timeout=30, message="worker A to start the task")
    b = processes(task_worker)
    a.kill9()

    wait_for(lambda: finished(result), timeout=40, message="the task to be rescued and finish")
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL, result.errors
    assert (result.return_value, result.attempts) == (2, 2)
    assert result.worker_ids == [f"{HOST}:{a.pid}", f"{HOST}:{b.pid}"]
    assert runs_of(executions, result) == [(1, a.pid), (2, b.pid)]
    assert "zombie re-queued" in b.output()


def test_one_running_per_keeps_a_sites_tasks_apart_across_workers(tasks, processes, executions):
    workers = [processes(task_worker), processes(task_worker)]
    wait_for(lambda: all("worker started" in w.output() for w in workers), timeout=30, message="the workers")
    with transaction.atomic():  # one commit: both idle workers wake at once
        results = [tasks.per_site.enqueue(site_id=site, seconds=0.3) for site in ["a", "a", "b", "b", "a", "b"]]

    wait_for(lambda: all(finished(r) for r in results), timeout=60, message="every task to finish")
    rows = executions("SELECT site_id, started_at, finished_at FROM test_executions ORDER BY started_at")
    assert len(rows) == len(results) and all(r[2] is not None for r in rows)
    by_site = defaultdict(list)
    for site, start, end in rows:
        by_site[site].append((start, end))
    for site, runs in by_site.items():
        for (_, previous_end), (next_start, _) in pairwise(runs):
            assert next_start >= previous_end, f"two tasks of site {site} overlapped"
