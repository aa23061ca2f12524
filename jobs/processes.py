"""The process list: every ``runjobs`` and ``pollmail`` says who it is and what it is doing.

``ProcessEntry`` is a thread started by the worker's and the poller's loop. On
its own database connection it inserts the process's ``Process`` row, then
refreshes ``heartbeat_at`` every ``HEARTBEAT_EVERY`` seconds, and ``doing`` as
soon as it changes (at most once per ``MIN_SPACING``, so a fast worker costs one
small UPDATE a second at most, off its loop); on stop it deletes the row. Its
first refresh, and then one at most every ``FORGET_EVERY`` seconds, also forgets
the rows of processes silent for ``FORGET_AFTER`` (killed, or on a host that
vanished), so the list ages out without a sweeper of its own, and a busy worker
refreshing every second does not run that DELETE every second.

``doing(job=..., mailbox=...)`` names the work of the calling thread for the
list and, through ``seoinsight.logs.context``, for every log record inside.

The list is for people and for ``/health/ready``; nothing claims or locks by
it, so a database outage only leaves it stale (logged once per outage).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time

from django.db import DatabaseError, InterfaceError
from django.db.models import Func

from seoinsight import logs

from . import dbsession
from .models import Process, ProcessKind

log = logging.getLogger(__name__)

HEARTBEAT_EVERY = 10.0
# A process seen within this many seconds counts as running (health, admin).
ALIVE_WITHIN = 60.0
# A row silent this long is deleted by any other process's refresh.
FORGET_AFTER = 600.0
# How often one process deletes the dead rows (a refresh does it when this long has passed since its last):
# far below FORGET_AFTER, so a dead row is gone at most this long after it became forgettable.
FORGET_EVERY = 60.0
MIN_SPACING = 1.0

_doing: dict[int, str] = {}
_doing_lock = threading.Lock()
_changed = threading.Event()


def worker_id() -> str:
    """This process as ``host:pid``: what its claims append to a job's ``worker_ids``, as the list shows it."""
    return f"{socket.gethostname()}:{os.getpid()}"


def describe(*, job=None, job_type=None, mailbox=None, live=False) -> str:
    """The ``doing`` text of one unit of work; ``live``: a live loop watching the mailbox (IMAP IDLE).

    >>> describe(job="0190", job_type="import_csv"), describe(mailbox=7), describe(mailbox=7, live=True)
    ('job=0190 type=import_csv', 'mailbox=7', 'mailbox=7 live')
    >>> describe()
    ''
    """
    parts = []
    if job is not None:
        parts.append(f"job={job}")
    if job_type is not None:
        parts.append(f"type={job_type}")
    if mailbox is not None:
        parts.append(f"mailbox={mailbox}")
        if live:
            parts.append("live")
    return " ".join(parts)


class doing:  # lower case: it is called like a function, ``with processes.doing(job=...)``
    """The calling thread works on this job or mailbox for the enclosed block (process list and logs).

    A live loop holds ``doing(mailbox=..., live=True)`` for as long as it watches its mailbox, so the
    process's row lists every mailbox it watches beside the one it may be polling. A class rather
    than a generator function: a worker enters one for every job it runs.
    """

    __slots__ = ("_ident", "_text", "_context")

    def __init__(self, *, job=None, job_type=None, mailbox=None, org=None, live=False):
        self._text = describe(job=job, job_type=job_type, mailbox=mailbox, live=live)
        self._context = logs.context(job=job, mailbox=mailbox, org=org)

    def __enter__(self) -> None:
        self._ident = ident = threading.get_ident()
        with _doing_lock:
            _doing[ident] = self._text
        _note_change()
        self._context.__enter__()

    def __exit__(self, *exc) -> None:
        try:
            self._context.__exit__(*exc)
        finally:
            with _doing_lock:
                _doing.pop(self._ident, None)
            _note_change()


def _note_change() -> None:
    """Tell the process entry to refresh. A flag already set needs no setting: it has not refreshed since it
    was set, so its next refresh, which reads what changed before this call, is still to come."""
    if not _changed.is_set():
        _changed.set()


def current_doing() -> str:
    """Every thread's current work, in a stable order, comma-separated ('' when idle)."""
    with _doing_lock:
        return ", ".join(sorted(text for text in _doing.values() if text))


def forget_dead(after: float = FORGET_AFTER) -> int:
    """Delete the rows of processes silent for ``after`` seconds; returns how many."""
    deleted, _ = Process.objects.silent_for(after).delete()
    return deleted


def forget_due(now: float, last: float | None, every: float) -> bool:
    """Whether a refresh at ``now`` also deletes the dead rows: the first one does, then one ``every`` s later.

    >>> forget_due(5.0, None, 60), forget_due(50.0, 0.0, 60), forget_due(60.0, 0.0, 60)
    (True, False, True)
    """
    return last is None or now - last >= every


class ProcessEntry(threading.Thread):
    """This process's row in the process list, kept fresh from its own thread; ``stop()`` removes it."""

    def __init__(self, kind: str, every: float = HEARTBEAT_EVERY, forget_every: float = FORGET_EVERY):
        super().__init__(name=f"{kind}-process-entry", daemon=True)
        self.kind = kind
        self.every = every
        self.forget_every = forget_every
        self._forgot_at: float | None = None  # time.monotonic() of this entry's last forget_dead
        self.pk: int | None = None
        self.registered = threading.Event()
        self._halt = threading.Event()
        self._failing = False

    def stop(self, timeout: float = 5.0) -> None:
        self._halt.set()
        _changed.set()
        if self.is_alive():
            self.join(timeout)

    def run(self) -> None:
        try:
            self._refresh()
            self.registered.set()
            while not self._halt.is_set():
                _changed.wait(self.every)
                _changed.clear()
                if self._halt.is_set():
                    break
                self._refresh()
                self._halt.wait(MIN_SPACING)
        finally:
            self._remove()
            dbsession.close_quietly()

    def _refresh(self) -> None:
        """Insert or refresh the row (inserted again if it was forgotten meanwhile); forget the dead when due."""
        try:
            text = current_doing()
            if self.pk is None or not Process.objects.filter(pk=self.pk).update(
                    heartbeat_at=Func(function="now"), doing=text):
                self.pk = Process.objects.create(kind=self.kind, host=socket.gethostname(), pid=os.getpid(),
                                                 doing=text).pk
                log.info("process list: %s registered as %s", self.kind, self.pk)
            if forget_due(time.monotonic(), self._forgot_at, self.forget_every):
                forget_dead()
                self._forgot_at = time.monotonic()
            self._failing = False
        except Exception as exc:
            # Whatever it is, this thread must go on: a dead entry would mark a working process as gone.
            if not self._failing:
                log.warning("process list: %s heartbeat not recorded (%s: %s); retrying", self.kind,
                            type(exc).__name__, dbsession.first_line(exc))
            self._failing = True
            dbsession.close_quietly()

    def _remove(self) -> None:
        if self.pk is None:
            return
        try:
            Process.objects.filter(pk=self.pk).delete()
        except (DatabaseError, InterfaceError) as exc:
            log.warning("process list: %s entry %s not removed (%s); it ages out", self.kind, self.pk,
                        dbsession.first_line(exc))


def readiness(within: float = ALIVE_WITHIN) -> list[str]:
    """What ``/health/ready`` misses in the process list: a kind with no process seen within ``within`` s."""
    seen = set(Process.objects.seen_within(within).values_list("kind", flat=True).distinct())
    return [f"no {kind} process seen in the last {within:g} s" for kind in ProcessKind.values if kind not in seen]
