"""The zombie sweep: recover jobs whose worker is gone.

A worker heartbeats its running job every JOBS_HEARTBEAT_INTERVAL seconds. A
``running`` job with no sign of life for its type's ``stale_after`` lost its
worker (kill -9, native crash, machine reboot): it goes back to ``queued`` while
it has attempts left — re-running is safe because handlers are idempotent by
contract — else it is ``failed`` with ``max attempts exceeded`` and ``on_fail``
runs. A poisoned job therefore never holds the queue.

Every worker sweeps at start and every JOBS_SWEEP_INTERVAL; concurrent sweeps
take disjoint rows (SKIP LOCKED) and the updates are fenced on the attempt.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.db import connection, transaction

from . import registry, sql
from .models import Job
from .queue import call_on_fail, interrupt

log = logging.getLogger(__name__)


@dataclass
class SweepResult:
    requeued: list = field(default_factory=list)
    failed: list = field(default_factory=list)

    def __bool__(self):
        return bool(self.requeued or self.failed)


def run_once() -> SweepResult:
    result = SweepResult()
    types = registry.all_types()
    params = {
        "types": list(types),
        "stale_after": [float(t.stale_after) for t in types.values()],
        "default_stale_after": registry.default_stale_after(),
    }
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(sql.SWEEP_STALE, params)
            stale = cursor.fetchall()
        for job_id, job_type, attempts in stale:
            max_attempts = types[job_type].max_attempts if job_type in types else registry.default_max_attempts()
            job = Job(id=job_id, type=job_type, attempts=attempts)
            outcome = interrupt(job, max_attempts)
            if outcome == "queued":
                result.requeued.append(job)
                log.warning("job=%s type=%s zombie re-queued after attempt %s/%s",
                            job_id, job_type, attempts, max_attempts)
            elif outcome == "failed":
                result.failed.append(job)
                log.error("job=%s type=%s zombie failed: max attempts exceeded (%s/%s)",
                          job_id, job_type, attempts, max_attempts)
    # on_fail after the commit: it must see the job as failed, and its own
    # errors must not undo the sweep.
    for job in result.failed:
        call_on_fail(job)
    return result
