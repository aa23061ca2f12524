"""The slots of ``runjobs --concurrency N``: N threads in one process, each running one job at a time.

The worker's main thread claims (one batched claim for the free slots) and
hands each job to a free slot; a slot runs it through the same
``Worker._execute`` as a one-slot worker, on a database connection of its own
(Django's connections are per thread), closed when the slot ends. The slots
never claim, so the claim's rules stay in one place, and a slot never dies of
a job: whatever escapes a run is logged and the slot takes the next one.

A run that ends done hands its result to the main thread (``DoneRuns``) and
the slot thread goes back to its inbox; the main thread records the results of
every run that ended meanwhile together with its next claim, in one statement
(``queue.finish_and_claim``). The slot still counts as busy until its run is
recorded, so no more runs go unrecorded at a crash than there are slots. Any
other ending is recorded by the slot itself, as before, and so is a done run
the main thread could not record (the statement failed: it hands it back to a
slot, ``hand_back``) or no longer takes (it is stopping). With every slot busy the
main thread waits on ``DoneRuns`` itself (``gather``): a post, or a slot that ended
without handing a run over (``wake``), ends that wait.

``--concurrency 1`` uses none of this: the handler runs in the main thread,
one job at a time.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from django.db import connections

from .models import Job

log = logging.getLogger(__name__)


class Slots:
    """``size`` slot threads fed by ``hand``; ``run(job, claim_sent)`` is called in a slot thread for each job.

    ``claim_sent`` is the ``time.monotonic()`` at which the claim that returned the job was sent.
    ``run`` returns True when it handed its run to the main thread, which frees the slot once it
    has recorded the run (``release``); otherwise the slot frees itself when ``run`` returns, and
    calls ``on_end``.
    """

    def __init__(self, size: int, run: Callable[[Job, float], bool], on_end: Callable[[], None] = lambda: None):
        if size < 1:
            raise ValueError(f"a pool has at least one slot, not {size!r}")
        self.size = size
        self._run = run
        self._on_end = on_end
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._busy = 0  # jobs handed and not yet over
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for n in range(1, self.size + 1):
            thread = threading.Thread(target=self._serve, name=f"job-slot-{n}", daemon=True)
            thread.start()
            self._threads.append(thread)

    # -- the main thread -----------------------------------------------------------
    def free(self) -> int:
        with self._lock:
            return self.size - self._busy

    def busy(self) -> int:
        with self._lock:
            return self._busy

    def hand(self, jobs: list[Job], claim_sent: float) -> None:
        """Give each job to a free slot; never more jobs than there are free slots."""
        with self._lock:
            if len(jobs) > self.size - self._busy:
                raise RuntimeError(f"{len(jobs)} job(s) for {self.size - self._busy} free slot(s)")
            self._busy += len(jobs)
        for job in jobs:
            self._inbox.put((job, claim_sent))

    def hand_back(self, work: list[Callable[[], None]]) -> None:
        """Give a slot each piece of ``work`` (recording a run handed over): its slot is busy still, freed after."""
        for each in work:
            self._inbox.put(each)

    def release(self, count: int) -> None:
        """``count`` slots whose handed-over runs the main thread just recorded are free."""
        with self._lock:
            self._busy -= count

    def close(self) -> None:
        """Let every slot finish the job it runs and the jobs handed to it, then end the threads."""
        for _ in self._threads:
            self._inbox.put(None)
        for thread in self._threads:
            thread.join()
        self._threads.clear()

    # -- a slot thread ---------------------------------------------------------------
    def _serve(self) -> None:
        try:
            while True:
                item = self._inbox.get()
                if item is None:
                    return
                handed_over = False
                try:
                    if callable(item):
                        item()
                    else:
                        handed_over = self._run(*item)
                except BaseException:
                    # The worker records every outcome of a handler; what reaches here is a
                    # bug of the worker's own. This slot stays, for the next job.
                    log.exception("slot error in %r; the slot goes on", item)
                finally:
                    if not handed_over:
                        self.release(1)
                        self._on_end()
        finally:
            connections.close_all()


class DoneRuns:
    """Done runs handed from the slots to the main thread, to be recorded with its next claim.

    ``post`` (a slot) returns at once: True when the main thread will record
    the run, False when it no longer takes any (``close``: it is stopping), and
    the slot records the run itself.
    """

    def __init__(self, on_post: Callable[[], None]):
        self._on_post = on_post
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._waiting: list[DoneRun] = []
        self._wanted = 0  # how many waiting runs end a gather: a post wakes it only then
        self._woken = False  # wake() since the last gather ended: the next one returns at once
        self._open = True

    def post(self, run: DoneRun) -> bool:
        with self._lock:
            if not self._open:
                return False
            self._waiting.append(run)
            if self._wanted and len(self._waiting) >= self._wanted:
                self._arrived.notify()
        self._on_post()
        return True

    def gather(self, count: int, within: float) -> list[DoneRun]:
        """Take the waiting runs once ``count`` of them wait, or ``within`` seconds from now at the latest,
        or at once after a ``wake``."""
        deadline = time.monotonic() + within
        with self._arrived:
            self._wanted = count
            while (len(self._waiting) < count and not self._woken
                   and (remaining := deadline - time.monotonic()) > 0):
                self._arrived.wait(remaining)
            self._wanted = 0
            self._woken = False
            taken, self._waiting = self._waiting, []
        return taken

    def wake(self) -> None:
        """End a ``gather`` now, whatever it waits for (a slot ended without handing a run over)."""
        with self._arrived:
            self._woken = True
            self._arrived.notify()

    def take(self) -> list[DoneRun]:
        with self._lock:
            taken, self._waiting = self._waiting, []
        return taken

    def close(self) -> list[DoneRun]:
        """Take no more runs; returns those still waiting, for the caller to have recorded."""
        with self._lock:
            self._open = False
            taken, self._waiting = self._waiting, []
        return taken


class DoneRun:
    """A run that ended done: its job, its outcome, its report as jsonb text, when it started."""

    __slots__ = ("job", "outcome", "report", "started")

    def __init__(self, job: Job, outcome, report: str | None, started: float):
        self.job, self.outcome, self.report, self.started = job, outcome, report, started
