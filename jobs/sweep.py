"""The zombie sweep: recover jobs whose worker is gone.

A worker heartbeats its running job every JOBS_HEARTBEAT_INTERVAL seconds. A
``running`` job with no sign of life for its type's ``stale_after`` lost its
worker (kill -9, native crash, machine reboot): it goes back to ``queued`` while
it has attempts left — re-running is safe because handlers are idempotent by
contract — else it is ``failed`` with ``max attempts exceeded`` and ``on_fail``
runs in the same transaction. A poisoned job therefore never holds the queue.

Every worker sweeps at start and every JOBS_SWEEP_INTERVAL from a thread of
its own (``Sweeper``), busy with a job or not; concurrent sweeps take disjoint
rows (SKIP LOCKED) and the updates are fenced on the attempt.

After an outage, silence is counted only from the moment everyone could speak
again: the database's start (a restart) and the sweeper's own return (it lost
the database, or went longer than a sweep interval and a heartbeat interval
without reaching it). See ``counting_from``.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import DatabaseError, connection, transaction

from . import dbsession, registry, sql
from .finish import interrupt
from .models import Job

log = logging.getLogger(__name__)


@dataclass
class SweepResult:
    requeued: list = field(default_factory=list)
    failed: list = field(default_factory=list)

    def __bool__(self):
        return bool(self.requeued or self.failed)


def run_once(not_before=None) -> SweepResult:
    """Recover the zombies of the registered types; ``not_before``: see ``sql.SWEEP_STALE``."""
    result = SweepResult()
    types = registry.all_types()
    params = {
        "types": list(types),
        "stale_after": [float(t.stale_after) for t in types.values()],
        "not_before": not_before,
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
    # on_fail ran inside interrupt(), in this transaction, under a savepoint:
    # atomic with the failure, and its own errors cannot undo the sweep.
    return result


def counting_from(now: datetime, previous: datetime | None, counted_from: datetime | None,
                  lost_contact: bool, max_gap: timedelta) -> datetime | None:
    """From when this sweeper may count a job's silence (None: no limit but the database's start).

    ``now`` is this sweep's database time, ``previous`` the last sweep's. The
    sweeper loses that right whenever it was out of touch itself — a failed
    sweep (``lost_contact``) or a gap longer than ``max_gap`` since the last one
    (a network that stalled without an error): whatever cut it off may have cut
    the other workers off too, so their silence counts from now.

    >>> t = datetime(2026, 1, 1, 12, 0, 0); gap = timedelta(seconds=40)
    >>> counting_from(t, None, None, False, gap) is None                 # first sweep of the process
    True
    >>> counting_from(t, t - timedelta(seconds=30), None, False, gap) is None
    True
    >>> counting_from(t, t - timedelta(seconds=90), None, False, gap) == t   # stalled 90 s
    True
    >>> counting_from(t, t - timedelta(seconds=30), None, True, gap) == t    # a sweep failed meanwhile
    True
    >>> earlier = t - timedelta(seconds=50)
    >>> counting_from(t, t - timedelta(seconds=30), earlier, False, gap) == earlier  # still counting from the return
    True
    """
    if lost_contact or (previous is not None and now - previous > max_gap):
        return now
    return counted_from


class Sweeper(threading.Thread):
    """Sweeps at start, then every ``interval`` seconds, on its own connection.

    A thread of its own, so zombies (and the 'active' keys they hold) are
    recovered within stale_after + interval even while this worker runs a job
    for hours. ``first_pass`` is set once the start-up sweep was tried.
    """

    def __init__(self, interval: float, heartbeat_interval: float):
        super().__init__(name="job-sweeper", daemon=True)
        self.interval = interval
        self.max_gap = timedelta(seconds=interval + heartbeat_interval)
        self.first_pass = threading.Event()
        self._halt = threading.Event()
        self._previous: datetime | None = None
        self._counted_from: datetime | None = None
        self._lost_contact = False

    def stop(self, timeout: float = 10) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(timeout=timeout)

    def run(self) -> None:
        try:
            delay = 0.0
            while not self._halt.wait(delay):
                self.sweep()
                self.first_pass.set()
                delay = self.interval
        finally:
            self.first_pass.set()
            dbsession.close_quietly()

    def sweep(self) -> SweepResult | None:
        """One sweep; a database error is logged, remembered as lost contact, and the connection dropped."""
        try:
            # One transaction, so the whole sweep judges by one clock: the moment
            # it reached the database (a statement held up on the way cannot
            # judge by a later one than the gap check saw).
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("SELECT now()")
                    (now,) = cursor.fetchone()
                self._counted_from = counting_from(now, self._previous, self._counted_from,
                                                   self._lost_contact, self.max_gap)
                result = run_once(not_before=self._counted_from)
        except DatabaseError as exc:
            log.warning("zombie sweep failed: %s: %s", type(exc).__name__, dbsession.first_line(exc))
            self._lost_contact = True
            dbsession.close_quietly()
            return None
        except Exception:
            log.exception("zombie sweep failed")
            return None
        # Gaps are measured start to start: a sweep held up on its way (a network
        # that stalled without an error) makes the next gap long, which is the point.
        self._previous = now
        self._lost_contact = False
        return result
