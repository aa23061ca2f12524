"""The periodic prune under real worker processes: only when enabled, one worker at a time, another after a kill -9.

Two workers prune every second (JOBS_PRUNE_EVERY=1), a third has the prune off. Old finished jobs are
added in rounds and must be gone after each; who pruned is read from each worker's log, who holds the
lock from pg_locks.
"""

import pytest
from django.db import connection

from jobs import retention
from jobs.models import Job
from tests.jobs.test_prune import finished
from tests.support.processes import runjobs, wait_for

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

PRUNED = "prune: deleted"


def pruning_worker(every="1"):
    return runjobs(JOBS_PRUNE_EVERY=every, JOBS_PRUNE_BATCH="7")


def lock_holders() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                       "AND classid = %s::int::oid AND objid = %s::int::oid AND objsubid = 2 "
                       "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                       [retention.LOCK_NAMESPACE, retention.LOCK_KEY])
        return cursor.fetchone()[0]


def old_round(n=20) -> list:
    return [finished("done" if i % 2 else "failed", days=400) for i in range(n)]


def gone(jobs) -> bool:
    return not Job.objects.filter(pk__in=[j.pk for j in jobs]).exists()


def test_one_enabled_worker_at_a_time_prunes_and_another_takes_over_after_a_kill(processes):
    recent = finished("done", days=1)
    workers = [processes(pruning_worker) for _ in range(2)]
    off = processes(pruning_worker, "0")
    wait_for(lambda: all("worker started" in w.output() for w in [*workers, off]), timeout=60,
             message="three workers")

    for _ in range(3):
        batch = old_round()
        wait_for(lambda batch=batch: gone(batch), timeout=30, message="an old round pruned")
    pruners = [w for w in workers if PRUNED in w.output()]
    assert len(pruners) == 1, [w.output()[-2000:] for w in workers]
    assert lock_holders() == 1

    (holder,) = pruners
    (other,) = [w for w in workers if w is not holder]
    holder.kill9()
    batch = old_round()
    wait_for(lambda: gone(batch), timeout=30, message="the other worker to take over")
    # Its line is written after the delete commits.
    wait_for(lambda: PRUNED in other.output(), timeout=10, message="the other worker to log its prune")
    assert "this worker prunes finished jobs" in other.output()
    assert lock_holders() == 1

    assert Job.objects.filter(pk=recent.pk).exists()
    # The third worker ran its duties all along with the prune off.
    assert PRUNED not in off.output() and "this worker prunes" not in off.output()

