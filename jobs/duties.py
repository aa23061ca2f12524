"""Periodic duties: small checks every long-running worker makes every few seconds, busy with a job or not.

Work that comes due later (an outbox retry after an outage, a lease that
expires after a kill -9) must be picked up whatever else happens, and the jobs
table has no "run after" time. So each ``runjobs`` process runs the registered
duties from a thread of its own (``Duties``), each at most once per its
interval. An app registers its duty from its ``AppConfig.ready`` (jobs knows no
app above it).

A duty is run by every worker, so it must be cheap (an index-served EXISTS or
two) and whatever it starts must be deduplicated (an enqueue with a dedup key):
N workers running it N times an interval start one job. A duty that raises is
logged and run again at its next turn; it never stops the thread or the others.
A burst worker (tests, one-off drains) ends when the queue is empty and runs no
duty.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

from django.db import DatabaseError

from . import dbsession

log = logging.getLogger(__name__)

# How often the thread looks at which duty is due; a duty's own interval is at least this.
TICK = 0.5


@dataclass(frozen=True)
class Duty:
    name: str
    func: Callable[[], object]
    # Seconds between two runs in one worker; a callable is read at every turn (a setting).
    every: float | Callable[[], float]

    def interval(self) -> float:
        return max(TICK, float(self.every() if callable(self.every) else self.every))


_DUTIES: dict[str, Duty] = {}


def register(name: str, func: Callable[[], object], *, every: float | Callable[[], float]) -> Duty:
    """Have every long-running worker call ``func()`` every ``every`` seconds; registering a name again replaces it."""
    duty = Duty(name, func, every)
    _DUTIES[name] = duty
    return duty


def unregister(name: str) -> None:
    _DUTIES.pop(name, None)


def all_duties() -> list[Duty]:
    return list(_DUTIES.values())


@contextmanager
def registered(*duties: Duty):
    """Tests: exactly these duties while the block runs, the registry restored after."""
    saved = dict(_DUTIES)
    _DUTIES.clear()
    _DUTIES.update({d.name: d for d in duties})
    try:
        yield
    finally:
        _DUTIES.clear()
        _DUTIES.update(saved)


def run_one(duty: Duty) -> bool:
    """Run ``duty`` once; False (logged) if it raised. A database error drops this thread's connection."""
    try:
        duty.func()
    except DatabaseError as exc:
        log.warning("duty %s failed: %s: %s", duty.name, type(exc).__name__, dbsession.first_line(exc))
        dbsession.close_quietly()
        return False
    except Exception:
        log.exception("duty %s failed", duty.name)
        return False
    return True


class Duties(threading.Thread):
    """Runs every registered duty at its interval, on this thread's own connection, until ``stop``.

    The first turn of each duty comes at once: a worker started after a crash
    looks at what the crash left before anything else happens.
    """

    def __init__(self):
        super().__init__(name="job-duties", daemon=True)
        self._halt = threading.Event()

    def stop(self, timeout: float = 10) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(timeout=timeout)

    def run(self) -> None:
        last: dict[str, float] = {}
        try:
            while not self._halt.is_set():
                for duty in all_duties():
                    if self._halt.is_set():
                        break
                    now = time.monotonic()
                    if duty.name not in last or now - last[duty.name] >= duty.interval():
                        last[duty.name] = now
                        run_one(duty)
                self._halt.wait(TICK)
        finally:
            dbsession.close_quietly()
