"""The poll loop behind ``manage.py pollmail``.

Every cycle claims the due mailboxes (``FOR UPDATE SKIP LOCKED``: replicas get
disjoint sets without a coordinator), bumps their ``last_polled_at`` and
commits before any network I/O — a replica that dies mid-poll leaves the
mailbox due again one interval later. Each mailbox is then polled folder by
folder (``mailpoll.sync.mailbox_poll``, ``mailpoll.sync.folder_sync``) under the cursor
rules of ``mailpoll.cursor``. Any exception of a mailbox is recorded on it and
swallowed, and every cycle ends with the watchdog: the loop never dies.

Up to ``MAILPOLL_CONCURRENCY`` mailboxes are polled at once, each in its own
thread with its own IMAP and database connections; a thread that is done claims
the next due mailbox, so one slow server never holds the others back.

Between cycles the loop LISTENs on ``POLL_NOW_CHANNEL`` (through the job workers' ``Waker``): the admin's
*Poll now* marks mailboxes due and notifies at its commit (``mark_due``), so every running pollmail starts a
cycle at once and one of them claims them. A notification that comes during a cycle ends the next wait at
once. The wait is still bounded by the interval: a notification lost (the LISTEN connection reconnecting, a
database outage, ``JOBS_LISTEN_NOTIFY`` off behind PgBouncer) delays a Poll now by one interval at most.
"""

from __future__ import annotations

import logging
import random
import signal
import threading
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import psycopg
from django.db import connection, transaction

from jobs import conf as jobs_conf
from jobs import dbsession, processes
from jobs.worker import Waker

from .. import conf
from . import sql, store, watchdog
from .changes_sync import ChangesSync
from .folder_sync import FolderResult, FolderSync
from .live import LiveSupervisor
from .mailbox_poll import STOP_GRACE, MailboxPoll
from ..models import Mailbox

log = logging.getLogger("mailpoll.poller")  # its name before the move: operators grep it

SYNC_COMMIT_OFF = "SET synchronous_commit = off"
# What a running pollmail LISTENs on between cycles; Poll now notifies it (``mark_due``).
POLL_NOW_CHANNEL = "mailpoll_poll_now"


# How long one cycle keeps claiming more mailboxes as its threads free up; then it ends and the watchdog runs.
REFILL_FOR = 60.0


def pause_after(more_due: bool, interval: float) -> float:
    """Seconds to wait before the next cycle: none while mailboxes may still be due, else about one interval.

    ``more_due``: the cycle's last claim got all it asked for, so more may be
    due now; waiting a whole interval then would poll a large set of mailboxes
    at one claim per interval instead of each within its own ``poll_interval``.
    The jitter keeps replicas from cycling in step.

    >>> pause_after(True, 120.0)
    0.0
    >>> 108.0 <= pause_after(False, 120.0) <= 132.0
    True
    """
    if more_due:
        return 0.0
    return interval * random.uniform(0.9, 1.1)


def mark_due(ids) -> int:
    """Make these enabled mailboxes due now, and wake every running pollmail at the commit; how many were.

    NULL ``last_polled_at`` is "due": the next claim of any replica takes them first, backoff or not.
    """
    with transaction.atomic():
        changed = Mailbox.objects.filter(pk__in=ids, enabled=True).update(last_polled_at=None)
        if changed:
            with connection.cursor() as cur:
                cur.execute("SELECT pg_notify(%s, '')", [POLL_NOW_CHANNEL])
    return changed


class Poller:
    """Claims due mailboxes and polls them, cycle after cycle, until ``stop()`` (or SIGTERM); ``cycle()`` runs one."""

    def __init__(self, *, interval: float | None = None, store_messages=None, concurrency: int | None = None):
        self.interval = interval or conf.get("MAILPOLL_INTERVAL")
        self.concurrency = max(1, concurrency or conf.get("MAILPOLL_CONCURRENCY"))
        self._stop = threading.Event()
        self.more_due = False  # the last cycle's last claim got all it asked for
        store_messages = store_messages or store.store_messages
        self.folder_sync = FolderSync(store_messages, self._stop)
        self.mailbox_poll = MailboxPoll(self.folder_sync, ChangesSync(store_messages, self._stop), self._stop)
        self.waker: Waker | None = None  # run()'s, between its cycles

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum, frame):
        log.info("%s received: finishing the current batch of each mailbox (connections still busy in %.0f s are "
                 "cut), then exiting", signal.Signals(signum).name, STOP_GRACE)
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()

    def run(self, once: bool = False) -> None:
        log.info("poller started: interval=%gs concurrency=%s deadline=%gs", self.interval, self.concurrency,
                 conf.get("MAILPOLL_POLL_DEADLINE"))
        entry = processes.ProcessEntry("pollmail")
        entry.start()
        # Live mailboxes are watched alongside the cycles, through the same folder reader (mailpoll.live).
        supervisor = None if once else LiveSupervisor(self.folder_sync, self._stop).start()
        self.waker = None if once else Waker(jobs_conf.get("JOBS_LISTEN_NOTIFY"), POLL_NOW_CHANNEL)
        try:
            while not self._stop.is_set():
                if self.waker is not None:
                    # Before the cycle: a Poll now that comes while it runs ends the wait after it.
                    self._listen()
                self.cycle()
                if once:
                    break
                self._wait(pause_after(self.more_due, self.interval))
        finally:
            if supervisor is not None:
                self._stop.set()
                supervisor.join()
            if self.waker is not None:
                self.waker.shutdown()
            entry.stop()
        log.info("poller stopped")

    def _listen(self) -> None:
        """LISTEN for Poll now, (re)connecting if need be; without it, the wait is a plain one."""
        if not self.waker.listen:
            return
        try:
            self.waker.ensure_listening()
        except (psycopg.Error, OSError) as exc:
            log.warning("cannot LISTEN for Poll now (%s: %s): waiting whole intervals until it can",
                        type(exc).__name__, dbsession.first_line(exc))
            self.waker.close()

    def _wait(self, seconds: float) -> None:
        """Until ``seconds`` have passed, a Poll now is notified, or the poller is told to stop."""
        ends = time.monotonic() + seconds
        try:
            self.waker.wait(seconds, self._stop)
        except (psycopg.Error, OSError):
            self.waker.close()  # the LISTEN connection died: the rest of the wait without it
            self._stop.wait(max(0.0, ends - time.monotonic()))

    def cycle(self) -> list[int]:
        """One cycle: claim, poll (claiming more as threads free up, while some are due), watchdog.

        Returns the mailbox ids polled, in the order their polls ended.
        """
        polled: list[int] = []
        self.more_due = False
        try:
            self.mailbox_poll.record_unrecorded()
            self._poll_due(polled)
        except Exception:
            log.exception("poll cycle failed")
            self.more_due = False
            dbsession.close_quietly()
        try:
            watchdog.run_once()
        except Exception:
            log.exception("watchdog failed")
            dbsession.close_quietly()
        return polled

    def _claim(self, limit: int) -> list[Mailbox]:
        """Claim up to ``limit`` due mailboxes (committed before any I/O) and load them."""
        ids = self.claim_due(limit)
        self.more_due = len(ids) >= limit
        return list(Mailbox.objects.filter(pk__in=ids).select_related("org").order_by("pk"))

    def _poll_due(self, polled: list[int]) -> None:
        """Poll a claim's mailboxes, up to ``concurrency`` at once; a lone mailbox in this thread.

        A thread that finishes takes the next claimed mailbox; once none is left
        and the last claim was full, the free threads claim more, for up to
        ``REFILL_FOR`` seconds. So a slow or hung server holds one thread, not
        the whole cycle, and each claim bumps only mailboxes that are about to
        be polled (other replicas take the rest).
        """
        queue = deque(self._claim(conf.get("MAILPOLL_CLAIM_LIMIT")))
        _sync_commit_off()
        if self.concurrency == 1 or len(queue) <= 1:
            while queue and not self._stop.is_set():
                mailbox = queue.popleft()
                self.poll(mailbox)
                polled.append(mailbox.pk)
            return
        refill_until = time.monotonic() + REFILL_FOR
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="pollmail") as pool:
            running: dict = {}
            while True:
                while queue and len(running) < self.concurrency and not self._stop.is_set():
                    mailbox = queue.popleft()
                    running[pool.submit(self._poll_in_thread, mailbox)] = mailbox.pk
                if (not queue and self.more_due and len(running) < self.concurrency and not self._stop.is_set()
                        and time.monotonic() < refill_until):
                    queue.extend(self._claim(self.concurrency - len(running)))
                    if queue:
                        continue
                if not running:
                    return
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    pk = running.pop(future)
                    if future.result():
                        polled.append(pk)

    def _poll_in_thread(self, mailbox: Mailbox) -> bool:
        """One poll on a pool thread, on the thread's own database connection, closed at the end."""
        if self._stop.is_set():
            return False
        try:
            _sync_commit_off()
            self.poll(mailbox)
            return True
        except Exception:
            log.exception("mailbox=%s poll failed outside its own handling", mailbox.pk)
            return True
        finally:
            dbsession.close_quietly()

    def claim_due(self, limit: int | None = None) -> list[int]:
        with connection.cursor() as cur:
            cur.execute(sql.CLAIM_DUE_MAILBOXES, {"limit": limit or conf.get("MAILPOLL_CLAIM_LIMIT")})
            return [row[0] for row in cur.fetchall()]

    def poll(self, mailbox: Mailbox) -> list[FolderResult]:
        """One mailbox, now, whether due or not (``MailboxPoll.poll``)."""
        with processes.doing(mailbox=mailbox.pk, org=mailbox.org_id):
            return self.mailbox_poll.poll(mailbox)


def _sync_commit_off() -> None:
    with connection.cursor() as cur:
        # Safe to trade durability for speed here, and only here: the poller
        # changes nothing on the mail server, and a crash loses a suffix of
        # commits — the cursor is committed after the messages it covers, so
        # it can never survive them. Lost messages are simply fetched again.
        cur.execute(SYNC_COMMIT_OFF)
