"""Telling a running handler to stop: cancellation and timeouts, one handler thread at a time.

The thread that runs a handler watches its run (``watch``) from just before the
handler starts until it has returned or raised. While it is watched, two
things can tell it to stop:

- a cancel (``jobs.cancel``), learnt by the heartbeat (``queue.heartbeat``) or by
  ``report_progress``: ``JobCancelled`` is raised in the handler;
- its type's ``timeout``: at the deadline the process's ``Watchdog`` thread raises
  ``JobTimedOut`` in the handler; ``report_progress`` past the deadline raises it too.

From another thread the exception is raised asynchronously
(``PyThreadState_SetAsyncExc``): it lands at the handler thread's next
bytecode, so a handler running Python stops at once, while one blocked in C (a
``time.sleep``, a ``recv`` on a silent socket, a long C call) sees it only when
that call returns. A run is told once at most, and never outside its handler:
leaving it, the thread drops whatever may still be pending for it, so the
exception can never land in the worker's own code.

A handler past its timeout that is still inside JOBS_TIMEOUT_GRACE seconds
after it was told cannot be stopped. The watchdog then records the run itself
(the fenced retry or failure, on the watchdog's own connection, so the row does
not wait for the zombie sweep) and the process ends with ``EXIT_TIMED_OUT`` for
the process manager to start a fresh worker (docs/operations.md). Only that run
is charged: the worker stops claiming, its other runs have JOBS_EXIT_GRACE
seconds to end as usual (``Exit``), and those still running then are handed
back to the queue, their attempt not counted (``finish.hand_back``), each named
in the log.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import threading
import time
import traceback

from . import conf, dbsession, finish, processes, registry, sql
from .errors import CANCELLED, TIMED_OUT, JobCancelled, JobTimedOut
from .models import Job

log = logging.getLogger(__name__)

# A worker that ended itself because a handler could not be stopped (sysexits' EX_TEMPFAIL: start
# it again). scripts/run_all.py restarts a worker that exits with it; systemd's Restart=always does.
EXIT_TIMED_OUT = 75

# The watchdog's steps for one run (``next_step``).
WAIT, EXPIRE, ABANDON = "wait", "expire", "abandon"
# Longest the watchdog sleeps when no deadline is nearer (a new watch wakes it anyway), and shortest.
MAX_NAP, MIN_NAP = 1.0, 0.01
# While the process exits: how often the watchdog looks whether its other runs have ended (one small query).
EXIT_LOOK_EVERY = 0.2


class Cancelled(JobCancelled):
    """``JobCancelled`` as raised into a handler from another thread, where no argument can be passed."""

    def __init__(self, *args):
        super().__init__(*(args or ("the job was cancelled while it ran",)))


class TimedOut(JobTimedOut):
    """``JobTimedOut`` as raised into a handler from another thread."""

    def __init__(self, *args):
        super().__init__(*(args or ("the handler ran past its type's timeout",)))


_RAISED = {CANCELLED: Cancelled, TIMED_OUT: TimedOut}


def next_step(now: float, deadline: float | None, expired_at: float | None, grace: float) -> str:
    """What the watchdog does to a run at ``now`` (monotonic seconds): WAIT, EXPIRE or ABANDON.

    EXPIRE once at the deadline (the handler is told, the grace starts); ABANDON
    when the grace has run out and the handler is still inside.

    >>> next_step(10, None, None, 5), next_step(10, 11, None, 5), next_step(11, 11, None, 5)
    ('wait', 'wait', 'expire')
    >>> next_step(15.9, 11, 11, 5), next_step(16, 11, 11, 5)
    ('wait', 'abandon')
    """
    if deadline is None or now < deadline:
        return WAIT
    if expired_at is None:
        return EXPIRE
    return ABANDON if now >= expired_at + grace else WAIT


def stop_verdict(raised: BaseException | None, told: str | None) -> str | None:
    """What ended a run: CANCELLED, TIMED_OUT, or None when its own outcome stands.

    ``raised``: what the handler raised (None: it returned); ``told``: what the
    run was told. A handler that returns after being told has done its work: its
    result stands. One that raises after being told ends as told, whatever it
    raised on its way out (the exception may have landed in code that wrapped
    it). One that raises ``JobCancelled``/``JobTimedOut`` itself ends so too. A
    cancel wins over a timeout: it is not retried.

    >>> stop_verdict(None, CANCELLED), stop_verdict(ValueError(), CANCELLED), stop_verdict(ValueError(), None)
    (None, 'cancelled', None)
    >>> stop_verdict(JobTimedOut(), None), stop_verdict(RuntimeError(), TIMED_OUT), stop_verdict(JobCancelled(), TIMED_OUT)
    ('timed out', 'timed out', 'cancelled')
    """
    if raised is None:
        return None
    if told == CANCELLED or isinstance(raised, JobCancelled):
        return CANCELLED
    if told == TIMED_OUT or isinstance(raised, JobTimedOut):
        return TIMED_OUT
    return None


def _set_async_exc(thread_id: int, exc_type: type[BaseException] | None) -> int:
    """Have ``exc_type`` raised in thread ``thread_id`` at its next bytecode; None drops a pending one."""
    return ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc_type) if exc_type is not None else None)


class Watch:
    """One run under watch: the thread running its handler, its deadline, what it was told."""

    def __init__(self, job, timeout: float | None):
        self.job = job
        self.thread_id = threading.get_ident()
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout if timeout else None
        self.expired_at: float | None = None  # when the watchdog acted on the deadline
        self.told: str | None = None  # CANCELLED or TIMED_OUT, set once
        self._inside = False  # the handler is running: the only time it may be told from elsewhere
        self._abandoned = False
        self._lock = threading.Lock()

    @property
    def grace(self) -> float:
        """Seconds a told handler has to stop before the process ends (``JOBS_TIMEOUT_GRACE``), read when needed:
        most runs are never told, and this is every run's path."""
        return float(conf.get("JOBS_TIMEOUT_GRACE"))

    def call(self, handler, job):
        """Run ``handler(job)`` as the watched handler; whatever it returns or raises comes back.

        In a process that is exiting (``Exit``) the handler is not started: the run is handed back and parks.
        """
        if _exit is not None:
            _not_started(self)
        try:
            with self._lock:
                self._inside = True
            return handler(job)
        finally:
            self.close()

    def close(self) -> None:
        """The handler is over: tell it nothing more, and drop a tell that may still be pending.

        Idempotent. A tell pending from another thread lands at most once, maybe
        here: it is absorbed and the closing done again. A run the watchdog
        abandoned parks here: the watchdog records it and ends the process.
        """
        while True:
            try:
                with self._lock:
                    self._inside = False
                    abandoned = self._abandoned
                if abandoned:
                    threading.Event().wait()
                if self.told is not None:
                    _set_async_exc(self.thread_id, None)
                with _lock:
                    if _watches.get(self.job.pk) is self:
                        del _watches[self.job.pk]
                return
            except (JobCancelled, JobTimedOut):
                continue

    def tell(self, verdict: str, *, expiring: float | None = None) -> bool:
        """Tell the handler to stop (``verdict``), once; False if it was told already or is not inside it.

        From the handler's own thread nothing is raised here: the caller raises.
        ``expiring``: the watchdog acting on the deadline (the grace starts then).
        """
        with self._lock:
            if self.told is None and not self._inside:
                return False  # not started yet, or over: nothing to tell, no grace to start
            if expiring is not None and self.expired_at is None:
                self.expired_at = expiring
            if self.told is not None:
                return False
            self.told = verdict
            if threading.get_ident() != self.thread_id:
                _set_async_exc(self.thread_id, _RAISED[verdict])
            return True

    def abandon(self) -> bool:
        """The watchdog gives up on this run: True if the handler is still inside (it will park if it leaves),
        the first time only."""
        with self._lock:
            if not self._inside or self._abandoned:
                return False
            self._abandoned = True
            return True

    def where(self) -> str:
        """The handler thread's stack now, for the log and the job's traceback."""
        frame = sys._current_frames().get(self.thread_id)
        return "".join(traceback.format_stack(frame)) if frame is not None else "(thread gone)\n"


_watches: dict = {}  # job id -> its Watch, for the runs of this process
_lock = threading.Lock()
_watchdog: Watchdog | None = None
_exit: Exit | None = None  # set once a handler could not be stopped: the process is on its way out


def watch(job, timeout: float | None) -> Watch:
    """Watch ``job``'s run from the calling thread, the one that runs its handler; ``job.cancel_requested`` is set up.

    ``timeout``: seconds the handler may run (None: no limit).
    """
    job.cancel_requested = threading.Event()
    run = Watch(job, timeout)
    with _lock:
        _watches[job.pk] = run
    if run.deadline is not None:
        _ensure_watchdog().wake()
    return run


def watched(job) -> Watch | None:
    with _lock:
        run = _watches.get(job.pk)
    return run if run is not None and run.job is job else None


def cancel_requested(job) -> None:
    """A heartbeat found ``job``'s cancel requested: set ``job.cancel_requested`` and tell its handler.

    Called from the heartbeat's thread (the handler gets ``JobCancelled``
    asynchronously) or from the handler's own (the run's fence): then it is
    raised here.
    """
    event = getattr(job, "cancel_requested", None)
    if event is not None:
        event.set()
    run = watched(job)
    if run is not None and run.tell(CANCELLED):
        log.info("job=%s cancel requested: its handler is told to stop", job.id)
        if threading.get_ident() == run.thread_id:
            raise Cancelled()


def check(job, *, cancelled: bool) -> None:
    """``report_progress``'s question, in the handler's thread: raise if the run must stop.

    ``cancelled``: the job's cancel is requested (read by the progress write).
    """
    run = watched(job)
    if cancelled:
        event = getattr(job, "cancel_requested", None)
        if event is not None:
            event.set()
        if run is not None:
            run.tell(CANCELLED)
        raise JobCancelled(f"job {job.id} was cancelled")
    if run is not None and run.deadline is not None and time.monotonic() >= run.deadline:
        run.tell(TIMED_OUT)
        raise JobTimedOut(f"job {job.id} ran past its timeout of {run.timeout:g} s")


def _ensure_watchdog() -> Watchdog:
    global _watchdog
    with _lock:
        if _watchdog is None or not _watchdog.is_alive():
            _watchdog = Watchdog()
            _watchdog.start()
        return _watchdog


class Watchdog(threading.Thread):
    """The process's one thread watching deadlines: it tells a late handler, and gives up on a stuck one."""

    def __init__(self):
        super().__init__(name="job-timeouts", daemon=True)
        self._wake = threading.Event()

    def wake(self) -> None:
        self._wake.set()

    def run(self) -> None:
        while True:
            self._wake.wait(self._nap())
            self._wake.clear()
            now = time.monotonic()
            with _lock:
                runs = list(_watches.values())
            for run in runs:
                step = next_step(now, run.deadline, run.expired_at, run.grace)
                if step == EXPIRE:
                    if run.tell(TIMED_OUT, expiring=now):
                        log.warning("job=%s type=%s ran past its timeout of %g s: its handler is told to stop "
                                    "(JobTimedOut)", run.job.id, run.job.type, run.timeout)
                elif step == ABANDON and run.abandon():
                    give_up(run)
            if _exit is not None:
                _exit.look(time.monotonic())

    def _nap(self) -> float:
        now = time.monotonic()
        with _lock:
            runs = list(_watches.values())
        # An abandoned run's moment is past for good: it would keep the watchdog awake.
        moments = [r.deadline if r.expired_at is None else r.expired_at + r.grace
                   for r in runs if r.deadline is not None and not r._abandoned]
        if _exit is not None:
            moments.append(now + EXIT_LOOK_EVERY)
        return max(MIN_NAP, min([MAX_NAP, *(m - now for m in moments)]))


def give_up(run: Watch) -> None:
    """The handler of ``run`` cannot be stopped: record its end, and start the process's exit (``Exit``).

    Runs in the watchdog's thread, on its own connection. The write is fenced on
    the run, so a handler that returned meanwhile and recorded its outcome keeps
    it. If the database cannot be reached the row stays running and the zombie
    sweep takes it; the process ends either way.
    """
    global _exit
    job = run.job
    verdict = run.told or TIMED_OUT
    log.error("job=%s type=%s still running %g s after it was told it is past its timeout of %g s: its thread "
              "is blocked outside Python and cannot be stopped; recording the job %s and exiting with code %s "
              "for the process manager to start a fresh worker. The handler was at:\n%s",
              job.id, job.type, run.grace, run.timeout, verdict, EXIT_TIMED_OUT, run.where())
    try:
        status = record(job, verdict, f"{_RAISED[verdict].__name__}: the handler could not be stopped; "
                                      f"its stack then:\n{run.where()}")
        log.error("job=%s type=%s recorded as %s (%s)", job.id, job.type, verdict, status or "owned by another run")
    except Exception:
        log.exception("job=%s the timeout could not be recorded; the zombie sweep will take the job", job.id)
    if _exit is None:
        _exit = Exit(time.monotonic(), float(conf.get("JOBS_EXIT_GRACE")))
        _exit.start(job)
    _exit.charged.add(job.pk)


class Exit:
    """A process on its way out because a handler could not be stopped: its other runs are not charged for it.

    The worker stops claiming (its stop event, as at SIGTERM); the runs it holds
    end as usual for up to ``grace`` seconds. Then each one still running is
    handed back uncharged (``finish.hand_back``), or, if it was itself told to
    stop, recorded as told, and the process ends with ``EXIT_TIMED_OUT``.
    "Still running" is the database's word (``sql.RUNNING_HERE``): a handler
    that returned but whose outcome is not yet written counts as running.
    """

    def __init__(self, started: float, grace: float):
        self.deadline = started + grace
        self.grace = grace
        self.charged: set = set()  # the runs recorded as told: never handed back
        self.worker_id = processes.worker_id()
        self._looked = float("-inf")
        self._unreachable = False

    def start(self, job) -> None:
        with _lock:
            runs = list(_watches.values())
        stops = {id(event): event for r in runs if (event := getattr(r.job, "stop_requested", None)) is not None}
        for event in stops.values():
            event.set()  # the worker's own stop: it claims no more, and a handler that checks it can end early
        log.warning("job=%s could not be stopped: this worker claims no more jobs; its %s other running job(s) "
                    "have %g s (JOBS_EXIT_GRACE) to finish, the rest go back to the queue uncharged",
                    job.id, len(runs) - 1, self.grace)

    def look(self, now: float) -> None:
        """The watchdog's look at the other runs, every EXIT_LOOK_EVERY seconds: end the process once none is
        running, or the grace is over."""
        if now - self._looked < EXIT_LOOK_EVERY and now < self.deadline:
            return
        self._looked = now
        left = self._running()
        if left is None and now < self.deadline:
            return  # the database is away: wait for it within the grace, the sweep takes what it must after
        if left and now < self.deadline:
            return
        for job in left or []:
            self._settle(job)
        _end_process()

    def _running(self) -> list | None:
        """This process's runs the database says are still running, the charged ones aside; None if unreachable."""
        try:
            running = list(Job.objects.raw(sql.RUNNING_HERE, {"worker_id": self.worker_id}))
        except Exception as exc:
            if not self._unreachable:
                log.warning("the runs this exiting worker holds cannot be read (%s); the zombie sweep will take "
                            "any it cannot hand back", exc)
            self._unreachable = True
            dbsession.close_quietly()
            return None
        self._unreachable = False
        return [job for job in running if job.pk not in self.charged]

    def _settle(self, job) -> None:
        """One run still running at the end of the grace: handed back, or recorded as told if it was told too."""
        with _lock:
            run = _watches.get(job.pk)
        # Parks its handler should it return now: the row is settled here, not by the worker.
        if run is not None:
            run.abandon()
        try:
            if run is not None and run.told is not None:
                status = record(job, run.told, f"{_RAISED[run.told].__name__}: its worker exited before the "
                                               f"handler stopped; its stack then:\n{run.where()}")
                log.error("job=%s type=%s still running, told it is %s, as its worker exits: recorded as %s (%s)",
                          job.id, job.type, run.told, run.told, status or "owned by another run")
                return
            status = finish.hand_back(job)
            log.warning("job=%s type=%s handed back to the queue, its attempt not counted: still running %g s "
                        "(JOBS_EXIT_GRACE) after its worker began to exit for another job's handler it could "
                        "not stop; now %s", job.id, job.type, self.grace, status or "owned by another run")
        except Exception:
            log.exception("job=%s could not be handed back as its worker exits; the zombie sweep will take it",
                          job.id)


def _not_started(run: Watch) -> None:
    """A run handed to a slot after the process began to exit: back to the queue at once, uncharged; its
    thread parks until the process ends."""
    with run._lock:
        run._abandoned = True
    job = run.job
    try:
        status = finish.hand_back(job)
        log.warning("job=%s type=%s handed back to the queue, its attempt not counted: not started, its worker "
                    "is exiting for another job's handler it could not stop; now %s",
                    job.id, job.type, status or "owned by another run")
    except Exception:
        log.exception("job=%s could not be handed back as its worker exits; the zombie sweep will take it", job.id)
    dbsession.close_quietly()
    threading.Event().wait()


def _end_process() -> None:
    log.error("exiting with code %s for the process manager to start a fresh worker", EXIT_TIMED_OUT)
    _forget_process()
    dbsession.close_quietly()
    for handler in logging.getLogger().handlers:
        try:
            handler.flush()
        except Exception:
            pass
    os._exit(EXIT_TIMED_OUT)


def record(job, verdict: str, traceback_text: str | None) -> str | None:
    """End a run told to stop, as the worker would: a cancel fails it (``on_fail``), a timeout is retried if
    attempts remain (``finish.finish_retry``), else fails. Returns the new status; None if the run had lost the job.
    """
    if verdict == CANCELLED:
        return "failed" if finish.finish_failed(job, CANCELLED, traceback_text) else None
    return finish.finish_retry(job, _max_attempts(job), TIMED_OUT, traceback_text)


def _max_attempts(job) -> int:
    try:
        return registry.get(job.type).max_attempts
    except registry.UnknownJobType:
        return registry.default_max_attempts()


def _forget_process() -> None:
    """Take this process off the process list now rather than let its row age out: its entry's thread
    removes it as at a normal exit."""
    for thread in threading.enumerate():
        if isinstance(thread, processes.ProcessEntry):
            thread.stop(timeout=2)
