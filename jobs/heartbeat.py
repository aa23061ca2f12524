"""The running job's heartbeat, and the fence that stops a run which could not heartbeat.

The heartbeat thread keeps ``progress.updated_at`` fresh, so ``stale_after``
means "its worker is gone", not "the handler was quiet". The other half of
the bargain is the worker's: when its heartbeats have not landed for nearly
``stale_after`` (an outage, a partition, a stuck connection), the sweep of
another worker may have judged the job dead. From then on, before each
statement the handler runs, the worker proves the job is still its own with a
fenced heartbeat on the handler's connection; if it is not, the statement
raises ``JobLost`` instead of running. A run that lost its job therefore never
writes to the database again, whatever the handler does between its
``report_progress`` calls.
"""

from __future__ import annotations

import logging
import threading
import time

from django.db import DatabaseError, connection

from . import dbsession, queue, registry
from .models import Job

log = logging.getLogger(__name__)


def fence_after(stale_after: float, heartbeat_interval: float) -> float:
    """Seconds without a landed heartbeat after which a run re-proves ownership before each statement.

    One heartbeat interval short of the sweep's threshold (never under half of it):

    >>> fence_after(60, 10), fence_after(3, 0.5), fence_after(60, 40)
    (50.0, 2.5, 30.0)
    """
    return float(max(stale_after - heartbeat_interval, stale_after / 2))


class Heartbeat(threading.Thread):
    """Heartbeats the watched job every ``interval`` seconds from its own thread and connection."""

    def __init__(self, interval: float):
        super().__init__(name="job-heartbeat", daemon=True)
        self.interval = interval
        self._job: Job | None = None
        self._lock = threading.Lock()
        self._halt = threading.Event()
        self._claim_sent = None
        self._last_landed = 0.0  # monotonic send time of the latest heartbeat that landed
        self._lost = False
        self._fence: RunFence | None = None

    # -- called by the worker's main thread --------------------------------------
    def claiming(self) -> None:
        """Note the moment a claim is sent: its started_at is the run's first sign of life."""
        self._claim_sent = time.monotonic()

    def watch(self, job: Job) -> None:
        """Heartbeat ``job`` from now on, and fence the calling thread's statements for it."""
        try:
            stale_after = registry.get(job.type).stale_after
        except registry.UnknownJobType:
            stale_after = registry.default_stale_after()
        with self._lock:
            self._job = job
            self._last_landed = self._claim_sent if self._claim_sent is not None else time.monotonic()
            self._lost = False
        self._fence = RunFence(self, job, fence_after(stale_after, self.interval))
        connection.execute_wrappers.append(self._fence)
        dbsession.set_label(f"job={job.id}")

    def unwatch(self) -> None:
        if self._fence is not None and self._fence in connection.execute_wrappers:
            connection.execute_wrappers.remove(self._fence)
        self._fence = None
        dbsession.set_label(None)
        with self._lock:
            self._job = None
            self._claim_sent = None

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(timeout=5)

    # -- shared state ----------------------------------------------------------------
    def landed(self, job: Job, sent: float) -> None:
        with self._lock:
            if self._job is job:
                self._last_landed = max(self._last_landed, sent)

    def refused(self, job: Job) -> None:
        with self._lock:
            if self._job is job:
                self._lost = True

    def state(self) -> tuple[bool, float]:
        """(lost, seconds since the latest landed heartbeat was sent)."""
        with self._lock:
            return self._lost, time.monotonic() - self._last_landed

    # -- the thread ----------------------------------------------------------------
    def run(self) -> None:
        try:
            while not self._halt.wait(self.interval):
                with self._lock:
                    job = self._job
                if job is None:
                    continue
                sent = time.monotonic()
                dbsession.set_label(f"job={job.id} heartbeat")
                try:
                    if queue.heartbeat(job):
                        self.landed(job, sent)
                    else:
                        self.refused(job)
                        log.warning("job=%s heartbeat found the job no longer ours", job.id)
                except DatabaseError as exc:
                    log.warning("job=%s heartbeat failed: %s: %s", job.id, type(exc).__name__, dbsession.first_line(exc))
                    dbsession.close_quietly()
        finally:
            dbsession.close_quietly()


class RunFence:
    """A Django execute wrapper on the handler's connection; see the module docstring."""

    def __init__(self, heartbeat: Heartbeat, job: Job, after: float):
        self.heartbeat, self.job, self.after = heartbeat, job, after
        self._proving = False

    def __call__(self, execute, sql, params, many, context):
        # The normal case, read without the lock (each a single attribute): a
        # heartbeat landed lately and none was refused. _check reads under it.
        heartbeat = self.heartbeat
        if (heartbeat._lost or time.monotonic() - heartbeat._last_landed > self.after) and not self._proving:
            self._check()
        return execute(sql, params, many, context)

    def _check(self) -> None:
        lost, silent_for = self.heartbeat.state()
        if lost:
            raise queue.JobLost(f"job {self.job.id} attempt {self.job.attempts} is no longer running here")
        if silent_for <= self.after:
            return
        self._proving = True
        try:
            sent = time.monotonic()
            ours = queue.heartbeat(self.job)
        finally:
            self._proving = False
        if ours:
            log.info("job=%s no heartbeat landed for %.1fs; the job is still ours, going on", self.job.id, silent_for)
            self.heartbeat.landed(self.job, sent)
            return
        self.heartbeat.refused(self.job)
        log.warning("job=%s no heartbeat landed for %.1fs and the job is no longer ours: "
                    "the handler's writes stop here", self.job.id, silent_for)
        raise queue.JobLost(f"job {self.job.id} attempt {self.job.attempts}: no heartbeat for {silent_for:.0f}s, "
                            "and the job was taken from this run")
