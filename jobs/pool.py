"""The slots of ``runjobs --concurrency N``: N threads in one process, each running one job at a time.

The worker's main thread claims (one batched claim for the free slots) and
hands each job to a free slot; a slot runs it through the same
``Worker._run`` as a one-slot worker, on a database connection of its own
(Django's connections are per thread), closed when the slot ends. The slots
never claim, so the claim's rules stay in one place, and a slot never dies of
a job: whatever escapes a run is logged and the slot takes the next one.

``--concurrency 1`` uses none of this: the handler runs in the main thread,
seed 001's one job at a time.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from django.db import connections

from .models import Job

log = logging.getLogger(__name__)

# Longest a wait for a slot takes to notice a stop request.
STOP_CHECK_INTERVAL = 0.5


class Slots:
    """``size`` slot threads fed by ``hand``; ``run(job, claim_sent)`` is called in a slot thread for each job.

    ``claim_sent`` is the ``time.monotonic()`` at which the claim that returned the job was sent.
    """

    def __init__(self, size: int, run: Callable[[Job, float], None]):
        if size < 1:
            raise ValueError(f"a pool has at least one slot, not {size!r}")
        self.size = size
        self._run = run
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._changed = threading.Condition()
        self._busy = 0  # jobs handed and not yet over
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for n in range(1, self.size + 1):
            thread = threading.Thread(target=self._serve, name=f"job-slot-{n}", daemon=True)
            thread.start()
            self._threads.append(thread)

    # -- the main thread -----------------------------------------------------------
    def free(self) -> int:
        with self._changed:
            return self.size - self._busy

    def busy(self) -> int:
        with self._changed:
            return self._busy

    def hand(self, jobs: list[Job], claim_sent: float) -> None:
        """Give each job to a free slot; never more jobs than there are free slots."""
        with self._changed:
            if len(jobs) > self.size - self._busy:
                raise RuntimeError(f"{len(jobs)} job(s) for {self.size - self._busy} free slot(s)")
            self._busy += len(jobs)
        for job in jobs:
            self._inbox.put((job, claim_sent))

    def wait_free(self, stop: threading.Event) -> bool:
        """Until a slot is free (True) or ``stop`` is set (False)."""
        return self._wait(lambda: self._busy < self.size, stop)

    def wait_ended(self, busy: int, stop: threading.Event) -> bool:
        """Until fewer than ``busy`` jobs run, i.e. one of them ended (True), or ``stop`` is set (False)."""
        return self._wait(lambda: self._busy < busy, stop)

    def _wait(self, condition: Callable[[], bool], stop: threading.Event) -> bool:
        # In slices: a signal handler sets ``stop`` in this very thread, and
        # cannot wake a wait on the condition without risking its lock.
        with self._changed:
            while not condition():
                if stop.is_set():
                    return False
                self._changed.wait(STOP_CHECK_INTERVAL)
            return True

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
                job, claim_sent = item
                try:
                    self._run(job, claim_sent)
                except BaseException:
                    # Worker._run records every outcome of a handler; what reaches here is a
                    # bug of the worker's own. This slot stays, for the next job.
                    log.exception("job=%s slot error; the slot goes on", job.id)
                finally:
                    with self._changed:
                        self._busy -= 1
                        self._changed.notify_all()
        finally:
            connections.close_all()
