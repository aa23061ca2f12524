"""The worker loop behind ``manage.py runjobs``: claim one job, run it, record it.

One job at a time per process by default; scale out with more processes, or
run up to N jobs at once in threads with ``concurrency=N`` (``jobs.pool``: the
loop claims for all free slots in one statement). A run that ends done is
recorded by the statement that claims the next job (``queue.finish_and_claim``):
one round trip per job, or per turn of the slots. The loop never
dies of a job (a handler's exception fails that job) nor of the database (an
outage is waited out with backoff). SIGTERM/SIGINT stop claiming, let the
running job (with slots, every running one) finish and exit; a handler sees that stop request as
``job.stop_requested`` (a ``threading.Event``), so one that loops over many
units of work (the outbox's sender) can end after the current one. A
long-running worker also runs the periodic duties (``jobs.duties``) from a
thread of its own.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import select
import signal
import threading
import time
import traceback

import psycopg
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection, reset_queries

from seoinsight.backoff import doubling
from seoinsight.exc_chain import chain

from . import conf, dbsession, duties, processes, queue, registry, storable, timeouts
from .claim_cursor import ClaimCursor
from .errors import JobCancelled, JobTimedOut, Retry
from .heartbeat import Heartbeat
from .models import Job
from .pool import DoneRun, DoneRuns, Slots
from .sweep import Sweeper

log = logging.getLogger(__name__)

# Errors that mean "the database is unreachable", as opposed to a bad query.
CONNECTION_ERRORS = (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError)

BACKOFF_FIRST = 0.5
BACKOFF_MAX = 15.0
# Longest an idle LISTEN worker takes to notice a stop request.
STOP_CHECK_INTERVAL = 0.5
# With slots: how long the main thread waits for the other busy slots' runs to end once one has,
# to record them all in one statement (docs/benchmarks.md: 1,250 statements for 10,000 no-op jobs
# with 8 slots instead of 2,380, and the drain 15 % faster). A slot's run waits at most this long
# for its record.
GATHER_WINDOW = 0.002
# How often a busy worker reads off the notifications its LISTEN connection was sent (Waker).
DISCARD_EVERY = 0.25


class Worker:
    def __init__(
        self,
        *,
        burst: bool = False,
        max_jobs: int | None = None,
        listen: bool | None = None,
        poll_interval: float | None = None,
        heartbeat_interval: float | None = None,
        sweep_interval: float | None = None,
        queues: list[str] | None = None,
        concurrency: int = 1,
    ):
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {concurrency!r}")
        self.burst = burst
        self.queues = list(queues) if queues else None  # None: every queue
        # Recorded in each claimed job's worker_ids, the same "host:pid" the process list shows.
        self.worker_id = processes.worker_id()
        self.max_jobs = max_jobs
        self.listen = conf.get("JOBS_LISTEN_NOTIFY") if listen is None else listen
        self.poll_interval = poll_interval or conf.get("JOBS_POLL_INTERVAL")
        self.sweep_interval = sweep_interval or conf.get("JOBS_SWEEP_INTERVAL")
        self.heartbeat = Heartbeat(heartbeat_interval or conf.get("JOBS_HEARTBEAT_INTERVAL"))
        self.sweeper = Sweeper(self.sweep_interval, self.heartbeat.interval)
        self.waker = Waker(self.listen)
        # Where its claims start: the queue's front, or past its last claim while exact claims are slow.
        self.claim_cursor = ClaimCursor()
        self.duties = None if burst else duties.Duties()
        self.processed = 0
        self._stop = threading.Event()
        self._local = threading.local()
        self._failures = 0  # consecutive turns of the loop that failed; the backoff doubles with each
        # concurrency 1: no slots, the handler runs in the loop's thread (one job at a time).
        self.concurrency = concurrency
        self.slots = Slots(concurrency, self._run_in_slot, self._slot_ended) if concurrency > 1 else None
        self.done_runs = DoneRuns(self.waker.poke) if concurrency > 1 else None
        self.claimed = 0  # jobs handed to the slots
        self._counting = threading.Lock()
        self._loop_thread: threading.Thread | None = None

    # -- control ---------------------------------------------------------------
    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum, frame):
        if self._stop.is_set():
            log.warning("second %s: exiting now; a running job is left to the zombie sweep",
                        signal.Signals(signum).name)
            raise SystemExit(1)
        log.info("%s received: finishing the %s, then exiting", signal.Signals(signum).name,
                 "current job" if self.slots is None else "running jobs")
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def _failures(self) -> int:
        # Per thread: a slot waiting out an outage while recording its job has a backoff of its own.
        return getattr(self._local, "failures", 0)

    @_failures.setter
    def _failures(self, value: int) -> None:
        self._local.failures = value

    # -- the loop --------------------------------------------------------------
    def run(self) -> int:
        """Work until stopped (or the queue is empty with ``burst``); returns jobs processed."""
        log.info("worker started: concurrency=%s listen=%s poll=%.1fs heartbeat=%.1fs sweep=%.0fs types=%s",
                 self.concurrency, self.listen, self.poll_interval, self.heartbeat.interval, self.sweep_interval,
                 ",".join(sorted(registry.all_types())))
        self._loop_thread = threading.current_thread()
        step = self._step if self.slots is None else self._step_slots
        self.heartbeat.start()
        self.sweeper.start()
        if self.duties is not None:
            self.duties.start()
        entry = processes.ProcessEntry("runjobs")
        entry.start()
        # Zombies left by an earlier crash go back before this worker's first claim.
        while not (self.sweeper.first_pass.wait(STOP_CHECK_INTERVAL) or self.stopping):
            pass
        if self.slots is not None:
            self.slots.start()
        drain = self.slots is not None
        try:
            while not self.stopping:
                try:
                    if not step():
                        break
                    self._failures = 0
                except CONNECTION_ERRORS as exc:
                    self._database_unavailable(exc)
                except Exception:
                    # A bug in the loop itself, not in a job: keep the process alive.
                    log.exception("worker loop error; retrying")
                    self._sleep(self._next_backoff())
        except BaseException:
            drain = False  # the second signal: exit now, the sweep takes what was left running
            raise
        finally:
            try:
                if self.done_runs is not None:
                    # From now on each slot records its own runs; those handed over go back to the slots.
                    self._hand_back(self.done_runs.close())
                if drain:
                    # Every running job finishes first, its heartbeat still beating; a second
                    # signal ends this wait as well.
                    self.slots.close()
            finally:
                entry.stop()
                if self.duties is not None:
                    self.duties.stop()
                self.sweeper.stop()
                self.heartbeat.stop()
                self.waker.shutdown()
        log.info("worker stopped after %s job(s)", self.processed)
        return self.processed

    def _step(self) -> bool:
        """One turn of the loop. False when the worker should exit."""
        if self.listen:
            self.waker.ensure_listening()
        # The claim's connection is made here, not inside the claim: a connect can
        # wait (a server starting, a network stall) past a SIGTERM, checked next.
        connection.ensure_connection()
        # Whatever came before (a connect, a backoff, an outcome's on_fail) may
        # have outlasted a SIGTERM: never start a job after it.
        if self.stopping:
            return False
        self.heartbeat.claiming()
        job = queue.claim(self.queues, self.worker_id, self.claim_cursor)
        looked = True  # the latest claim found nothing when it returned no job
        while job is not None:
            self.waker.read_off()  # a busy worker's notifications
            with processes.doing(job=job.id, job_type=job.type, org=job.org_id):
                started = time.monotonic()
                outcome = self._execute(job)
                # The last job of max_jobs, or a stop asked meanwhile: record it, claim nothing more.
                claim_next = not (self.stopping or (self.max_jobs and self.processed + 1 >= self.max_jobs))
                job, looked = self._record_and_claim(job, outcome, started, claim_next)
            self.processed += 1
        if self.max_jobs and self.processed >= self.max_jobs:
            return False
        if not looked:
            return True  # the outcome was recorded alone: the next turn claims
        if self.burst:
            return False
        self.waker.wait(self._idle_wait(), self._stop)
        return True

    def _record_and_claim(self, job: Job, outcome: Outcome, started: float,
                          claim_next: bool) -> tuple[Job | None, bool]:
        """Record a run's outcome; a done one together with the claim of the next job (``claim_next``), in one statement.

        Returns ``(the job claimed or None, whether a claim was made)``. Anything
        but a plain done outcome, and a combined statement that fails (refused,
        or the database lost: whether it committed is then unknown, and the
        fenced finish alone is safe to retry), is recorded by ``_record``,
        claiming nothing.
        """
        report = self._storable_done(outcome)
        if report is False or not claim_next:
            self._record(job, outcome, started)
            return None, False
        self.heartbeat.claiming()
        try:
            recorded, claimed = queue.finish_and_claim([(job, report)], 1, self.queues, self.worker_id,
                                                       self.claim_cursor)
        except (DatabaseError, psycopg.Error) as exc:
            log.warning("job=%s type=%s done; recording it with the next claim failed (%s), recording it alone",
                        job.id, job.type, storable.describe(exc))
            if _is_connection_loss(exc):
                dbsession.close_quietly()
            self._record(job, outcome, started)
            return None, False
        self._log_done(job, job.id in recorded, time.monotonic() - started)
        return (claimed[0] if claimed else None), True

    def _step_slots(self) -> bool:
        """One turn of the loop with slots: record the slots' done runs and claim for every free slot, in one go.

        The done runs posted since the last turn (``DoneRuns``) are recorded by
        the same statement that claims for the free slots, theirs included; a
        slot counts as free only once its run is recorded, so a crash loses no
        more results than the slots hold. With every slot busy and nothing
        posted, the loop waits on ``DoneRuns`` for a slot's news (a post, or
        ``wake`` from a slot that recorded its own run).
        False when the worker should exit; the jobs handed over still run (``run`` waits for them).
        """
        if self.listen:
            self.waker.ensure_listening()
        connection.ensure_connection()  # as in _step: a slow connect may outlast a SIGTERM
        done = self.done_runs.take()
        waited = not done and not self.slots.free()
        if waited:
            # Every slot busy: wait for the first to end on the runs' own condition (a post, or a slot that
            # recorded its run itself), not on the waker, whose wake-up is a pipe and a poll of the
            # LISTEN socket: nothing can be claimed until a slot is free anyway.
            done = self.done_runs.gather(1, STOP_CHECK_INTERVAL)
        if done:
            # The other busy slots' runs too, if they end within the window: one statement and
            # one commit for all of them, instead of one each as they trickle in.
            done += self.done_runs.gather(self.slots.busy() - len(done), GATHER_WINDOW)
        if self.stopping:
            self._hand_back(done)  # the slots record them as the worker stops
            return False
        limit = self.slots.free() + len(done)  # a slot whose run is recorded here takes one of these jobs
        if self.max_jobs:
            limit = max(0, min(limit, self.max_jobs - self.claimed))
        if not done and not limit:
            if not waited:  # nothing to record and nothing to claim for (max_jobs): do not spin
                self.waker.wait(self.poll_interval, self._stop)
            return True  # every slot still busy: the next turn waits again (and sees a stop first)
        sent = time.monotonic()
        jobs = self._finish_and_claim(done, limit)
        if jobs is None:
            return True
        if jobs:
            self.claimed += len(jobs)
            self.slots.hand(jobs, sent)
            return not (self.max_jobs and self.claimed >= self.max_jobs)
        if self.burst and not self.slots.busy():
            return False
        # Nothing claimable. A running job may queue more (an import queues its map_reconcile), and
        # a slot's post or end pokes the waker: look again then, or at a new job's notification.
        self.waker.wait(self._idle_wait(), self._stop)
        return True

    def _finish_and_claim(self, done: list[DoneRun], limit: int) -> list[Job] | None:
        """The main thread's one statement for the slots: their ``done`` runs recorded, up to ``limit`` jobs claimed.

        None when it failed: every run in ``done`` goes back to a slot, which
        records it as it records any other outcome (waiting out an outage,
        replacing a refused write by a failure); a lost database is then the
        loop's to wait out too.
        """
        try:
            recorded, jobs = queue.finish_and_claim([(run.job, run.report) for run in done], limit,
                                                    self.queues, self.worker_id, self.claim_cursor)
        except (DatabaseError, psycopg.Error) as exc:
            self._hand_back(done)
            if not _refused(exc):
                raise
            log.warning("recording %s done run(s) with the next claim was refused (%s); each is recorded alone",
                        len(done), storable.describe(exc))
            return None
        except BaseException:
            self._hand_back(done)
            raise
        now = time.monotonic()
        for run in done:
            self._log_done(run.job, run.job.id in recorded, now - run.started)
        self.slots.release(len(done))
        return jobs

    def _slot_ended(self) -> None:
        """A slot is free without a run handed over: wake the loop, whichever way it waits."""
        self.done_runs.wake()
        self.waker.poke()

    def _hand_back(self, done: list[DoneRun]) -> None:
        """Have slots record these runs one by one, as if they had never been handed over."""
        self.slots.hand_back([functools.partial(self._record, run.job, run.outcome, run.started) for run in done])

    def _run_in_slot(self, job: Job, claim_sent: float) -> bool:
        """A slot thread's job: the same run as the one-slot worker's, in this thread, on its connection.

        A done run is handed to the main thread to record (``DoneRuns``): True
        then, and the slot stays busy until the main thread has recorded it.
        """
        self.heartbeat.claiming(claim_sent)
        self._failures = 0
        with processes.doing(job=job.id, job_type=job.type, org=job.org_id):
            started = time.monotonic()
            outcome = self._execute(job)
            report = self._storable_done(outcome)
            handed_over = report is not False and self.done_runs.post(DoneRun(job, outcome, report, started))
            if not handed_over:
                self._record(job, outcome, started)
        with self._counting:
            self.processed += 1
        return handed_over

    def _execute(self, job: Job) -> Outcome:
        """Run ``job``'s handler, watched (heartbeat, fence, cancel, timeout); how it ended, not yet recorded."""
        # With DEBUG on, Django keeps every statement's SQL: a long-lived worker must drop it per job.
        if settings.DEBUG:
            reset_queries()
        log.debug("job=%s type=%s attempt=%s started", job.id, job.type, job.attempts)
        try:
            job_type = registry.get(job.type)
        except registry.UnknownJobType as exc:
            return Outcome.failed(str(exc))
        self.heartbeat.watch(job)
        job.stop_requested = self._stop
        # This thread runs the handler: it is the one a cancel or the type's timeout tells to stop.
        run = timeouts.watch(job, job_type.timeout)
        try:
            outcome = Outcome.done(run.call(job_type.handler, job))
        except queue.JobLost as exc:
            outcome = Outcome.lost(storable.describe(exc))
        except (JobCancelled, JobTimedOut) as exc:
            outcome = Outcome.stopped(timeouts.stop_verdict(exc, run.told), _format_traceback())
        except Retry as exc:
            outcome = Outcome.retry(storable.describe(exc), _format_traceback(), exc.after)
        except job_type.retry_on as exc:
            # A failure the type declared transient: retried with backoff, within max_attempts
            # (this worker's exit and a lost database keep their own paths, below).
            if _raised_by_signal_handler(exc):
                raise
            if isinstance(exc, Exception) and _is_connection_loss(exc):
                dbsession.close_quietly()
                outcome = Outcome.interrupted(storable.describe(exc))
            else:
                outcome = Outcome.retry(storable.describe(exc), _format_traceback(), None)
        except BaseException as exc:
            # SystemExit, KeyboardInterrupt and the like from a handler fail its
            # job like any error; only this worker's own exit (a second signal) passes.
            if _raised_by_signal_handler(exc):
                raise
            if isinstance(exc, Exception) and _is_connection_loss(exc):
                dbsession.close_quietly()  # so recording the outcome reconnects
                outcome = Outcome.interrupted(storable.describe(exc))
            else:
                outcome = Outcome.failed(storable.describe(exc), _format_traceback())
        finally:
            run.close()
            self.heartbeat.unwatch()
        if run.told is not None:
            if outcome.status in ("failed", "retry", "interrupted"):
                # Told to stop, the handler raised something else on its way out: it ends as told.
                outcome = Outcome.stopped(run.told, outcome.traceback)
            if not connection.in_atomic_block:
                # The exception may have landed inside a statement: record on a fresh connection.
                dbsession.close_quietly()
        return outcome

    @staticmethod
    def _storable_done(outcome: Outcome) -> str | None | bool:
        """A done outcome's report as jsonb text (None: no report), for a finish shared with others;
        False for any other outcome, and for a report that is not JSON (``_record`` fails that run)."""
        if outcome.status != "done":
            return False
        try:
            return storable.storable_report(outcome.report)
        except storable.UnstorableReport:
            return False

    @staticmethod
    def _log_done(job: Job, recorded: bool, elapsed: float) -> None:
        if recorded:
            log.info("job=%s type=%s done in %.3fs", job.id, job.type, elapsed)
        else:
            log.warning("job=%s type=%s finished but was no longer ours; result discarded", job.id, job.type)

    def _record(self, job: Job, outcome: Outcome, started: float) -> None:
        """Write the outcome, waiting out a database outage; the fence makes a retry safe.

        A write the database refuses (it answered, with an error) is replaced by
        a failure saying so, so no run's output can leave its job running.
        """
        refusals = 0
        while True:
            try:
                self._apply(job, outcome, time.monotonic() - started)
                return
            except (DatabaseError, psycopg.Error) as exc:
                if not _refused(exc):
                    if self.stopping:
                        log.error("job=%s outcome %s not recorded (database unavailable at shutdown); "
                                  "the zombie sweep will re-queue it", job.id, outcome.status)
                        return
                    self._database_unavailable(exc)
                    continue
                refusals += 1
                refused = exc
            if refusals > 2:
                log.error("job=%s type=%s outcome could not be recorded: %s", job.id, job.type,
                          storable.describe(refused))
                return
            log.error("job=%s type=%s the database refused the %s outcome: %s", job.id, job.type,
                      outcome.status, storable.describe(refused))
            outcome = Outcome.failed(
                f"the run's {outcome.status} result could not be stored: {storable.describe(refused)}"
                if refusals == 1 else "the run's result could not be stored (see the worker's log)"
            )

    def _apply(self, job: Job, outcome: Outcome, elapsed: float) -> None:
        if outcome.status == "done":
            try:
                recorded = queue.finish_done(job, outcome.report)
            except storable.UnstorableReport as exc:
                outcome = Outcome.failed(f"handler returned a report that is not JSON: {exc}")
                return self._apply(job, outcome, elapsed)
            self._log_done(job, recorded, elapsed)
        elif outcome.status == "failed":
            # on_fail runs inside finish_failed's transaction.
            if queue.finish_failed(job, outcome.error, outcome.traceback):
                log.error("job=%s type=%s failed after %.3fs: %s", job.id, job.type, elapsed,
                          storable.storable_text(outcome.error, storable.MAX_ERROR_CHARS))
            else:
                log.warning("job=%s type=%s failed but was no longer ours: %s", job.id, job.type, outcome.error)
        elif outcome.status == "interrupted":
            max_attempts = registry.get(job.type).max_attempts
            new_status = queue.interrupt(job, max_attempts, by_database=True)
            log.warning("job=%s type=%s interrupted by lost database connection (%s): now %s",
                        job.id, job.type, outcome.error, new_status or "owned by another run")
        elif outcome.status == "retry":
            max_attempts = registry.get(job.type).max_attempts
            new_status = queue.finish_retry(job, max_attempts, outcome.error, outcome.traceback, outcome.report)
            log.warning("job=%s type=%s attempt %s asked for a retry (%s): now %s", job.id, job.type, job.attempts,
                        storable.storable_text(outcome.error, storable.MAX_ERROR_CHARS),
                        new_status or "owned by another run")
        else:  # lost
            log.warning("job=%s type=%s stopped: %s", job.id, job.type, outcome.error)

    # -- waiting ---------------------------------------------------------------
    def _database_unavailable(self, exc: BaseException) -> None:
        delay = self._next_backoff()
        fired = dbsession.timeout_fired(exc)
        log.warning("database unavailable (%s: %s%s); retrying in %.1fs", type(exc).__name__,
                    dbsession.first_line(exc), f"; {fired} fired" if fired else "", delay)
        dbsession.close_quietly()
        if self.slots is None or threading.current_thread() is self._loop_thread:
            # The LISTEN connection is the loop's: a slot must not close it under the loop's wait.
            self.waker.close()
        self._sleep(delay)

    def _next_backoff(self) -> float:
        # The jitter (±25 %) is the worker's own, outside the shared rule: workers that lost the
        # database together do not all come back in the same second.
        self._failures += 1
        return doubling(self._failures, BACKOFF_FIRST, BACKOFF_MAX) * random.uniform(0.75, 1.25)

    def _idle_wait(self) -> float:
        # A scheduled job sends no notification when it becomes due: wake up by then at the latest.
        due_in = queue.seconds_to_next_due(self.queues)
        poll = self._poll_timeout()
        return poll if due_in is None else max(0.0, min(poll, due_in))

    def _poll_timeout(self) -> float:
        return self.poll_interval * random.uniform(2 / 3, 4 / 3)

    def _sleep(self, seconds: float) -> None:
        self._stop.wait(seconds)


class Outcome:
    """How a run ended, kept in memory until the database has recorded it."""

    __slots__ = ("status", "report", "error", "traceback")

    def __init__(self, status, report=None, error=None, traceback=None):
        self.status, self.report, self.error, self.traceback = status, report, error, traceback

    @classmethod
    def done(cls, report):
        if report is not None and not isinstance(report, dict):
            return cls("failed", error=f"handler returned {type(report).__name__}, expected a dict or None")
        return cls("done", report=report)

    @classmethod
    def failed(cls, error, tb=None):
        return cls("failed", error=error, traceback=tb)

    @classmethod
    def interrupted(cls, error):
        return cls("interrupted", error=error)

    @classmethod
    def retry(cls, error, tb, after):
        # report carries Retry(after=): seconds, or None for the type's backoff.
        return cls("retry", report=after, error=error, traceback=tb)

    @classmethod
    def lost(cls, error):
        return cls("lost", error=error)

    @classmethod
    def stopped(cls, verdict, tb):
        """A run told to stop (``jobs.timeouts``): a cancel fails, a timeout is retried while attempts remain."""
        if verdict == timeouts.CANCELLED:
            return cls("failed", error=timeouts.CANCELLED, traceback=tb)
        return cls("retry", error=timeouts.TIMED_OUT, traceback=tb)


class Waker:
    """Waits for work: a LISTEN connection when enabled, else a plain sleep; ``poke`` ends a wait from another thread.

    Either way the wait is bounded by the poll interval, so a notification lost
    (e.g. while reconnecting) delays a job by one interval at most. The slots
    poke it when a run ends, so a loop waiting for work also hears of a
    finished run at once.
    """

    def __init__(self, listen: bool, channel: str | None = None):
        self.listen = listen
        self.channel = channel or conf.NOTIFY_CHANNEL  # another app's wake-ups (pollmail's Poll now) on its own
        self._conn: psycopg.Connection | None = None
        # A pipe rather than an Event: the wait polls it beside the LISTEN socket.
        self._poked, self._poke = os.pipe()
        os.set_blocking(self._poked, False)
        os.set_blocking(self._poke, False)
        # Guards the pipe (no poke writes to its number once it is closed) and the two flags below.
        self._pipe_lock = threading.Lock()
        # A poke while nobody waits only sets _poked_since: the next wait returns at once, as a byte left in
        # the pipe would, without a write (a system call per finished run of every slot) that nobody reads.
        self._waiting = False
        self._poked_since = False
        self._discarded_at = time.monotonic()

    def ensure_listening(self) -> None:
        """Open the LISTEN connection if there is none, else ``read_off``; at every turn of the loop."""
        if self._conn is not None and not self._conn.closed:
            self.read_off()
            return
        params = connection.get_connection_params()
        for key in ("cursor_factory", "context", "prepare_threshold"):
            params.pop(key, None)
        self._conn = psycopg.connect(autocommit=True, **params)
        dbsession.watch(self._conn)
        self._conn.execute(f"LISTEN {self.channel}")

    def read_off(self) -> None:
        """Drop the notifications a busy worker was sent, at most every DISCARD_EVERY seconds; never raises.

        A worker that stays busy never waits on the connection, and unread
        notifications would fill its socket: the server process behind it then
        blocks writing to it, holding up every DROP DATABASE of the server and
        the queue all notifying commits write to (bench/soak.py found it: 13
        minutes of a blocked server). A busy worker claims anyway. A connection
        that fails here is closed, for ``ensure_listening`` to open again.
        """
        now = time.monotonic()
        if self._conn is None or now - self._discarded_at < DISCARD_EVERY:
            return
        self._discarded_at = now
        try:
            for _ in self._conn.notifies(timeout=0):
                pass
        except psycopg.Error:
            self.close()

    def poke(self) -> None:
        """End the current wait, or else the next one, at once."""
        with self._pipe_lock:
            if self._poke is None:
                return
            self._poked_since = True
            if not self._waiting:
                return
            try:
                os.write(self._poke, b"!")
            except BlockingIOError:
                pass  # the pipe is full of pokes already: the wait returns at once anyway

    def wait(self, timeout: float, stop: threading.Event) -> None:
        # Returns on the first notification, on a poke, at the timeout, or soon after stop
        # is set: a signal does not interrupt the select (PEP 475 retries it), so waiting
        # in short slices is what lets SIGTERM stop an idle worker.
        with self._pipe_lock:
            if self._poked_since:  # poked since the last wait: what it announced may be waiting already
                self._poked_since = False
                return
            self._waiting = True
        try:
            self._wait(timeout, stop)
        finally:
            with self._pipe_lock:
                self._waiting = self._poked_since = False

    def _wait(self, timeout: float, stop: threading.Event) -> None:
        deadline = time.monotonic() + timeout
        while not stop.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            poll = select.poll()  # not select(): a busy process may hold file numbers past 1024
            poll.register(self._poked, select.POLLIN)
            if self._conn is not None:
                poll.register(self._conn.fileno(), select.POLLIN)
            ready = {fd for fd, _ in poll.poll(min(remaining, STOP_CHECK_INTERVAL) * 1000)}
            if self._poked in ready:
                self._drain_pokes()
                return
            if ready and list(self._conn.notifies(timeout=0, stop_after=1)):
                return

    def _drain_pokes(self) -> None:
        try:
            while os.read(self._poked, 4096):
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        """Close the LISTEN connection (the next ``ensure_listening`` opens another)."""
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass
            self._conn = None

    def shutdown(self) -> None:
        """Close the connection and the pipe, for good: a later poke does nothing."""
        self.close()
        with self._pipe_lock:
            if self._poke is not None:
                os.close(self._poke)
                os.close(self._poked)
                self._poke = None


def _is_connection_loss(exc: BaseException) -> bool:
    """Did this exception come from losing the database, rather than from the job?"""
    if not any(isinstance(seen, CONNECTION_ERRORS) for seen in chain(exc)):
        return False
    if (_sqlstate(exc) or "").startswith(LOST_SESSION_STATES):
        # Whatever the connection looks like now: leaving an atomic block,
        # Django may already have opened a new one.
        return True
    if connection.connection is None or connection.connection.closed:
        return True
    try:
        return not connection.is_usable()
    except Exception:
        return True


# SQLSTATEs of a lost session: connection exceptions, server shut down or crashed.
LOST_SESSION_STATES = ("08", "57P")
# SQLSTATE classes of a write the database refuses and would refuse again:
# bad data, a constraint, a program limit, a statement it cannot run.
REFUSED_STATES = ("22", "23", "42", "54")


def _sqlstate(exc: BaseException) -> str | None:
    return next((seen.sqlstate for seen in chain(exc) if getattr(seen, "sqlstate", None)), None)


def _refused(exc: BaseException) -> bool:
    """Did the database answer, refusing what we wrote (as opposed to an outage or a lock to wait out)?"""
    state = _sqlstate(exc)
    if state is not None:
        return state.startswith(REFUSED_STATES)
    # No SQLSTATE: raised on our side. Losing the server is an OperationalError
    # or InterfaceError; anything else (a NUL psycopg will not send) is a refusal.
    return not isinstance(exc, CONNECTION_ERRORS)


def _raised_by_signal_handler(exc: BaseException) -> bool:
    """Was ``exc`` raised by ``Worker._on_signal`` (the second SIGTERM/SIGINT: exit now)?

    A handler's own ``SystemExit`` fails its job; the worker's must not be caught.
    """
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is Worker._on_signal.__code__:
            return True
        tb = tb.tb_next
    return False


def _format_traceback() -> str | None:
    try:
        return traceback.format_exc()
    except Exception:
        return None
