"""The running jobs' heartbeat, and the fence that stops a run which could not heartbeat.

The heartbeat thread keeps ``progress.updated_at`` fresh, so ``stale_after``
means "its worker is gone", not "the handler was quiet". One thread per
process heartbeats every job the process runs (one with ``--concurrency 1``,
up to N with ``--concurrency N``), one ``queue.heartbeat(job)`` each, so
whatever that call learns about a job (lost, cancelled) is learnt per job.

The other half of the bargain is each run's: when its heartbeats have not
landed for nearly ``stale_after`` (an outage, a partition, a stuck connection),
the sweep of another worker may have judged the job dead. From then on, before
each statement the handler runs, the worker proves the job is still its own
with a fenced heartbeat on the handler's connection; if it is not, the
statement raises ``JobLost`` instead of running. A run that lost its job
therefore never writes to the database again, whatever the handler does
between its ``report_progress`` calls. The fence is per job and per thread:
it sits on the handler thread's own connection, and one slot's lost job never
stops another's statements.
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


class Run:
    """What the heartbeat knows of one watched job: when a heartbeat last landed, whether one was refused.

    ``last_landed`` and ``lost`` are written under the heartbeat's lock; the
    fence's fast path reads them without it (each a single attribute).
    """

    __slots__ = ("job", "last_landed", "lost")

    def __init__(self, job: Job, since: float):
        self.job = job
        self.last_landed = since  # monotonic send time of the latest heartbeat that landed
        self.lost = False


class Heartbeat(threading.Thread):
    """Heartbeats every watched job each ``interval`` seconds from its own thread and connection.

    A job is watched from the thread that runs its handler (``watch``/``unwatch``),
    which is what puts the fence on that thread's connection.
    """

    def __init__(self, interval: float):
        super().__init__(name="job-heartbeat", daemon=True)
        self.interval = interval
        self._lock = threading.Lock()
        self._halt = threading.Event()
        self._runs: dict[int, Run] = {}  # handler thread ident -> its run
        self._fences: dict[int, tuple[RunFence, list]] = {}  # thread ident -> its fence, and the list it is in
        self._fence_afters: dict[str, float] = {}  # job type -> fence_after for its runs
        self._claim_sent: dict[int, float] = {}  # thread ident -> when the claim of its next job was sent

    # -- called by the worker's threads ----------------------------------------------
    def claiming(self, sent: float | None = None) -> None:
        """Note when the claim of this thread's next job was sent: its started_at is the run's first sign of life.

        A slot thread passes the send time of the batched claim its job came
        from: the fence must never believe a job fresher than the database does.
        """
        self._claim_sent[threading.get_ident()] = time.monotonic() if sent is None else sent

    def watch(self, job: Job) -> None:
        """Heartbeat ``job`` from now on, and fence the calling thread's statements for it."""
        ident = threading.get_ident()
        since = self._claim_sent.get(ident)
        with self._lock:
            run = self._runs[ident] = Run(job, time.monotonic() if since is None else since)
        # This thread's connection, looked up once (each read through django.db.connection looks it up).
        wrappers = connection.execute_wrappers
        fence = RunFence(self, run, self._fence_after(job.type))
        self._fences[ident] = (fence, wrappers)
        wrappers.append(fence)
        dbsession.set_label(f"job={job.id}")

    def unwatch(self) -> None:
        """The calling thread's job is over: no more heartbeats for it, no more fence on its connection."""
        ident = threading.get_ident()
        fenced = self._fences.pop(ident, None)
        if fenced is not None:
            fence, wrappers = fenced
            if fence in wrappers:
                wrappers.remove(fence)
        dbsession.set_label(None)
        self._claim_sent.pop(ident, None)
        with self._lock:
            self._runs.pop(ident, None)

    def _fence_after(self, job_type: str) -> float:
        """``fence_after`` for a type's runs, worked out at its first run here: this worker's settings, like its
        ``interval``, are read once (a read of ``JOBS_STALE_AFTER`` is ~3 µs, and every run asks)."""
        after = self._fence_afters.get(job_type)
        if after is None:
            try:
                stale_after = registry.get(job_type).stale_after
            except registry.UnknownJobType:
                stale_after = registry.default_stale_after()
            after = self._fence_afters[job_type] = fence_after(stale_after, self.interval)
        return after

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(timeout=5)

    # -- shared state ----------------------------------------------------------------
    def landed(self, run: Run, sent: float) -> None:
        with self._lock:
            run.last_landed = max(run.last_landed, sent)

    def refused(self, run: Run) -> None:
        with self._lock:
            run.lost = True

    def state(self, run: Run) -> tuple[bool, float]:
        """(lost, seconds since the run's latest landed heartbeat was sent)."""
        with self._lock:
            return run.lost, time.monotonic() - run.last_landed

    def _watching(self, run: Run) -> bool:
        with self._lock:
            return any(watched is run for watched in self._runs.values())

    # -- the thread ----------------------------------------------------------------
    def run(self) -> None:
        try:
            while not self._halt.wait(self.interval):
                with self._lock:
                    runs = list(self._runs.values())
                for run in runs:
                    if self._halt.is_set() or not self._beat(run):
                        break
        finally:
            dbsession.close_quietly()

    def _beat(self, run: Run) -> bool:
        """One heartbeat for one job. False when the database failed: the other jobs wait for the next round.

        A connection that just failed would only make each of them wait out its
        own connect timeout in turn; their fences cover the gap.
        """
        job = run.job
        sent = time.monotonic()
        dbsession.set_label(f"job={job.id} heartbeat")
        try:
            if queue.heartbeat(job):
                self.landed(run, sent)
            else:
                self.refused(run)
                if self._watching(run):  # else the run just ended: its own finish moved the row
                    log.warning("job=%s heartbeat found the job no longer ours", job.id)
        except DatabaseError as exc:
            log.warning("job=%s heartbeat failed: %s: %s", job.id, type(exc).__name__, dbsession.first_line(exc))
            dbsession.close_quietly()
            return False
        except Exception:
            # One job's surprise must not stop the heartbeats of the others (nor of the next job).
            log.exception("job=%s heartbeat failed", job.id)
        return True


class RunFence:
    """A Django execute wrapper on the handler's connection; see the module docstring."""

    def __init__(self, heartbeat: Heartbeat, run: Run, after: float):
        self.heartbeat, self.run, self.job, self.after = heartbeat, run, run.job, after
        self._proving = False

    def __call__(self, execute, sql, params, many, context):
        # The normal case, read without the lock: a heartbeat landed lately and
        # none was refused. _check reads under it.
        run = self.run
        if (run.lost or time.monotonic() - run.last_landed > self.after) and not self._proving:
            self._check()
        return execute(sql, params, many, context)

    def _check(self) -> None:
        lost, silent_for = self.heartbeat.state(self.run)
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
            self.heartbeat.landed(self.run, sent)
            return
        self.heartbeat.refused(self.run)
        log.warning("job=%s no heartbeat landed for %.1fs and the job is no longer ours: "
                    "the handler's writes stop here", self.job.id, silent_for)
        raise queue.JobLost(f"job {self.job.id} attempt {self.job.attempts}: no heartbeat for {silent_for:.0f}s, "
                            "and the job was taken from this run")
