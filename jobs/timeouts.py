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
not wait for the zombie sweep), puts the process's other running jobs back in
the queue, says so in the log and ends the process with ``EXIT_TIMED_OUT``; the
process manager starts a fresh worker (docs/operations.md).
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import threading
import time
import traceback

from . import conf, dbsession, finish, processes, registry
from .errors import CANCELLED, TIMED_OUT, JobCancelled, JobTimedOut

log = logging.getLogger(__name__)

# A worker that ended itself because a handler could not be stopped (sysexits' EX_TEMPFAIL: start
# it again). scripts/run_all.py restarts a worker that exits with it; systemd's Restart=always does.
EXIT_TIMED_OUT = 75

# The watchdog's steps for one run (``next_step``).
WAIT, EXPIRE, ABANDON = "wait", "expire", "abandon"
# Longest the watchdog sleeps when no deadline is nearer (a new watch wakes it anyway), and shortest.
MAX_NAP, MIN_NAP = 1.0, 0.01


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
        """Run ``handler(job)`` as the watched handler; whatever it returns or raises comes back."""
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
        """The watchdog gives up on this run: True if the handler is still inside (it will park if it leaves)."""
        with self._lock:
            if not self._inside:
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

    def _nap(self) -> float:
        now = time.monotonic()
        with _lock:
            runs = list(_watches.values())
        moments = [r.deadline if r.expired_at is None else r.expired_at + r.grace
                   for r in runs if r.deadline is not None]
        return max(MIN_NAP, min([MAX_NAP, *(m - now for m in moments)]))


def give_up(run: Watch) -> None:
    """The handler of ``run`` cannot be stopped: record its end, hand back the others, end the process.

    Runs in the watchdog's thread, on its own connection. Each write is fenced
    on its run, so a handler that returned meanwhile and recorded its outcome
    keeps it. If the database cannot be reached the rows stay running and the
    zombie sweep takes them; the process ends either way.
    """
    job = run.job
    verdict = run.told or TIMED_OUT
    log.error("job=%s type=%s still running %g s after it was told it is past its timeout of %g s: its thread "
              "is blocked outside Python and cannot be stopped; recording the job %s and exiting with code %s "
              "for the process manager to start a fresh worker. The handler was at:\n%s",
              job.id, job.type, run.grace, run.timeout, verdict, EXIT_TIMED_OUT, run.where())
    with _lock:
        others = [other for other in _watches.values() if other is not run and other.abandon()]
    try:
        status = record(job, verdict, f"{_RAISED[verdict].__name__}: the handler could not be stopped; "
                                      f"its stack then:\n{run.where()}")
        log.error("job=%s type=%s recorded as %s (%s); the process exits", job.id, job.type, verdict,
                  status or "owned by another run")
        for other in others:
            status = finish.interrupt(other.job, _max_attempts(other.job))
            log.warning("job=%s type=%s interrupted: its worker exits (another job's handler could not be "
                        "stopped); now %s", other.job.id, other.job.type, status or "owned by another run")
    except Exception:
        log.exception("job=%s the timeout could not be recorded; the zombie sweep will take the job", job.id)
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
