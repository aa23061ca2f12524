"""Live mailboxes: the first folder watched with IMAP IDLE inside ``pollmail``, by one process across replicas.

One supervisor per pollmail looks at the table every ``MAILPOLL_LIVE_RECONCILE``
seconds and runs one loop per live mailbox whose advisory lock it holds. The lock
is session-level, on a connection of the supervisor's own (namespace
``LOCK_NAMESPACE``, key the mailbox id): when the process dies its connection
drops, the lock frees, and another replica's supervisor takes the mailbox at its
next look. Invariant: a loop runs only while its process holds the mailbox's lock
— a lock connection found dead stops every loop before anything else.

A loop reads its folder through the poll's own path (``FolderSync.sync_folder``,
the same store, the same cursor rules) after every (re)connect, on new mail,
and after a silence; the poll cycle reads the folder as well, dedup absorbing the
overlap. While the downstream outbox is full a loop reads nothing (the poll's gate,
``folder_sync.intake_gate``, which also queues a sender) and asks the gate again every
``GATE_RECHECK`` seconds from IDLE, reading the folder as soon as there is room, not
at the next event, silence check or poll. A loop crash is logged with its mailbox and swallowed, then retried after
a growing, jittered delay; it never takes the process down. Gmail and Graph
mailboxes are never live: their push needs a public endpoint.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
from dataclasses import dataclass

from django.db import connections
from django.db.models import Q
from django.utils import timezone

from jobs import dbsession, processes
from outbox import capacity as outbox_capacity
from seoinsight import backoff

from .. import conf
from .folder_sync import FolderSync, intake_gate, reset_connection_if_broken
from .mailbox_poll import first_reads, positioned_folders
from ..models import Auth, GrantState, LiveWatch, Mailbox, Provider, folder_list
from ..providers import ProviderError, for_mailbox

log = logging.getLogger("mailpoll.live")  # its name before the move: operators grep it

# First key of the two-int advisory lock of a live mailbox (jobs' claim guard has 0x5E01).
LOCK_NAMESPACE = 0x5E12
# Server-side keepalives of the lock connection (session settings any role may change).
LOCK_SESSION_KEEPALIVES = "SET tcp_keepalives_idle = 30; SET tcp_keepalives_interval = 10; SET tcp_keepalives_count = 3"
# RFC 2177: a server may drop a client idle for 30 minutes; IDLE is re-issued before 29.
RFC_IDLE_LIMIT = 29 * 60.0
# How often a loop in IDLE looks at its stop flag: SIGTERM is answered within about this.
TICK = 0.5
# After its stop flag, a loop has this long to leave IDLE and log out before its socket is shut down.
STOP_GRACE = 2.0
HOST = socket.gethostname()
# While its reads are held back by a full outbox, a loop asks the gate this often (one statement each).
GATE_RECHECK = 2.0

# What a loop does next in IDLE (``idle_step``; ``ROOM``: the outbox that held its reads has room again).
WAIT, REIDLE, CHECK, NEW_MAIL, ROOM = "wait", "reidle", "check", "new-mail", "room"
# Untagged responses that may mean new mail in the selected folder.
NEW_MAIL_RESPONSES = (b"EXISTS", b"RECENT")


# -- pure decisions ------------------------------------------------------------------------------------------


def backoff_delay(failures: int, base: float, cap: float, rand: float) -> float:
    """Seconds before reconnecting after ``failures`` consecutive failures (0: at once).

    Doubling from ``base`` up to ``cap``, then "equal jitter": ``rand`` in [0, 1) picks a point in the upper
    half, so replicas that lost the same server do not come back in step, and none waits less than half.
    """
    return backoff.doubling(failures, base, cap) * (0.5 + rand / 2)


def idle_step(now: float, idle_since: float, heard_at: float, reidle_after: float, max_silence: float) -> str:
    """In IDLE with nothing new: ``CHECK`` after ``max_silence`` without a word from the server (a connection
    may die silently), else ``REIDLE`` once this IDLE is ``reidle_after`` old (never past RFC 2177's 29 minutes),
    else ``WAIT``."""
    if now - heard_at >= max_silence:
        return CHECK
    if now - idle_since >= min(reidle_after, RFC_IDLE_LIMIT):
        return REIDLE
    return WAIT


def means_new_mail(responses: list) -> bool:
    """An ``EXISTS`` or ``RECENT`` among imapclient's parsed responses, e.g. ``[(3, b'EXISTS')]``."""
    return any(len(r) > 1 and isinstance(r[1], bytes) and r[1].upper() in NEW_MAIL_RESPONSES for r in responses)


def server_said_bye(responses: list) -> bool:
    return any(r and isinstance(r[0], bytes) and r[0].upper() == b"BYE" for r in responses)


@dataclass(frozen=True)
class Plan:
    start: list[int]  # mailboxes to start a loop for (new, or re-pointed: stopped first)
    stop: list[int]  # loops to stop (gone from the wanted set, or re-pointed)


def reconcile(wanted: dict[int, tuple], running: dict[int, tuple]) -> Plan:
    """The loops to stop and start so that one runs per wanted mailbox, with the configuration it wants.

    Both map a mailbox id to its watch key (``watch_key``); a changed key is a re-pointed mailbox.
    """
    stop = sorted(pk for pk, key in running.items() if wanted.get(pk) != key)
    start = sorted(pk for pk, key in wanted.items() if running.get(pk) != key)
    return Plan(start, stop)


KEY_FIELDS = ("host", "port", "security", "username", "auth", "oauth_provider", "secret", "folders")


def watch_key(values: dict) -> tuple:
    """What a running loop depends on: a change of any (a new host, password, first folder) restarts it."""
    return (*(values[name] for name in KEY_FIELDS if name != "folders"), folder_list(values["folders"])[0])


def live_mailboxes() -> dict[int, tuple]:
    """The mailboxes to watch now, with their watch keys: live, enabled, IMAP, and an OAuth one connected."""
    rows = (Mailbox.objects.filter(live=True, enabled=True, provider=Provider.IMAP)
            .filter(~Q(auth=Auth.OAUTH) | Q(oauth_grant__state=GrantState.ACTIVE))
            .values("pk", *KEY_FIELDS))
    return {row["pk"]: watch_key(row) for row in rows}


def has_room() -> bool:
    """Whether intake may fetch now: the outbox is off, or below its capacity (held and on their way)."""
    current = outbox_capacity.intake_gate()
    return current is None or not current.full


# -- the supervisor ----------------------------------------------------------------------------------------------


class LiveSupervisor:
    """Runs the live loops of one pollmail process until ``stop`` (the poller's) is set; see the module docstring."""

    def __init__(self, folder_sync: FolderSync, stop: threading.Event):
        self.folder_sync = folder_sync
        self._stop = stop
        self._loops: dict[int, LiveLoop] = {}
        self._locks: set[int] = set()
        self._db = None  # the lock connection: a DatabaseWrapper of our own
        self._thread = threading.Thread(target=self._run, name="pollmail-live", daemon=True)

    def start(self) -> LiveSupervisor:
        self._thread.start()
        return self

    def join(self, timeout: float = 15.0) -> None:
        """After ``stop`` is set: wait for every loop to leave IDLE and log out."""
        self._thread.join(timeout)

    def _run(self) -> None:
        log.info("live supervisor started: reconcile=%gs reidle=%gs max_silence=%gs", conf.get("MAILPOLL_LIVE_RECONCILE"),
                 conf.get("MAILPOLL_LIVE_REIDLE"), conf.get("MAILPOLL_LIVE_MAX_SILENCE"))
        try:
            while not self._stop.is_set():
                try:
                    self.reconcile_once()
                except Exception as exc:
                    log.warning("live supervisor: reconcile failed (%s: %s); trying again in %gs",
                                type(exc).__name__, exc, conf.get("MAILPOLL_LIVE_RECONCILE"))
                    reset_connection_if_broken()
                self._stop.wait(conf.get("MAILPOLL_LIVE_RECONCILE"))
        finally:
            self._stop_loops(list(self._loops))
            self._close_lock_connection()
            dbsession.close_quietly()
            log.info("live supervisor stopped")

    def reconcile_once(self) -> None:
        if not self._lock_connection_alive():
            if self._loops:
                log.warning("live supervisor: lost its lock connection; stopping %s live loop(s) (%s), another "
                            "replica may hold their mailboxes now", len(self._loops), _pks(self._loops))
                self._stop_loops(list(self._loops))
            self._locks.clear()
            self._close_lock_connection()
            self._db = connections.create_connection("default")
            with self._db.cursor() as cur:
                # The server probes this connection itself: a holder cut off by the network (no FIN, unlike a
                # kill -9) frees its locks after about a minute, not after the kernel's two hours.
                cur.execute(LOCK_SESSION_KEEPALIVES)
        wanted = live_mailboxes()
        plan = reconcile(wanted, {pk: loop.key for pk, loop in self._loops.items()})
        self._stop_loops(plan.stop)
        for pk in set(self._locks) - set(wanted):
            self._unlock(pk)
        for pk in plan.start:
            if self._stop.is_set():
                return
            if pk in self._locks or self._try_lock(pk):
                self._start_loop(pk, wanted[pk])
        # A holder killed -9 leaves its row; once the mailbox is not live (or not enabled) any more, nobody
        # would overwrite it.
        LiveWatch.objects.exclude(mailbox__live=True, mailbox__enabled=True).delete()

    def _start_loop(self, pk: int, key: tuple) -> None:
        now = timezone.now()
        LiveWatch.objects.update_or_create(mailbox_id=pk, defaults={
            "host": HOST, "pid": os.getpid(), "since": now, "last_event_at": now, "last_event": "starting"})
        loop = LiveLoop(pk, key, self.folder_sync)
        self._loops[pk] = loop
        log.info("mailbox=%s live: watching (lock held by %s/%s)", pk, HOST, os.getpid())
        loop.start()

    def _stop_loops(self, pks: list[int]) -> None:
        """Stop these loops (all told first, then each awaited) and remove their watch rows; locks stay held."""
        loops = [self._loops.pop(pk) for pk in pks if pk in self._loops]
        for loop in loops:
            loop.stop()
        for loop in loops:
            if not loop.join(STOP_GRACE):
                log.error("mailbox=%s live loop did not stop; left to end with the process", loop.mailbox_id)
            try:
                LiveWatch.objects.filter(mailbox_id=loop.mailbox_id, host=HOST, pid=os.getpid()).delete()
            except Exception as exc:
                log.warning("mailbox=%s live: could not remove its watch row (%s: %s)", loop.mailbox_id,
                            type(exc).__name__, exc)
                reset_connection_if_broken()

    # -- the lock connection ------------------------------------------------------------------------------

    def _lock_connection_alive(self) -> bool:
        if self._db is None:
            return False
        try:
            with self._db.cursor() as cur:
                cur.execute("SELECT 1")
            return True
        except Exception:
            return False

    def _try_lock(self, pk: int) -> bool:
        with self._db.cursor() as cur:
            cur.execute("SELECT pg_try_advisory_lock(%s, %s)", [LOCK_NAMESPACE, pk])
            got = bool(cur.fetchone()[0])
        if got:
            self._locks.add(pk)
        return got

    def _unlock(self, pk: int) -> None:
        self._locks.discard(pk)
        try:
            with self._db.cursor() as cur:
                cur.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_NAMESPACE, pk])
        except Exception as exc:
            log.warning("mailbox=%s live: could not release its lock (%s: %s); the next reconcile looks again",
                        pk, type(exc).__name__, exc)

    def _close_lock_connection(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            try:
                db.close()
            except Exception:
                pass


def _pks(loops) -> str:
    return ", ".join(f"mailbox={pk}" for pk in sorted(loops))


# -- one live mailbox ------------------------------------------------------------------------------------------


class LiveLoop:
    """Watches one mailbox's first folder on its own thread and IMAP and database connections, until ``stop()``."""

    def __init__(self, mailbox_id: int, key: tuple, folder_sync: FolderSync):
        self.mailbox_id = mailbox_id
        self.key = key
        self.folder_sync = folder_sync
        self._stop = threading.Event()
        self._provider = None
        self._held = False  # the last read stopped at a full outbox: the gate is asked again from IDLE
        self._thread = threading.Thread(target=self._run, name=f"pollmail-live-{mailbox_id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def join(self, grace: float) -> bool:
        """Wait ``grace`` seconds for the loop to leave on its own, then shut its connection. True once it ended."""
        self._thread.join(grace)
        if self._thread.is_alive():
            provider = self._provider
            if provider is not None:
                provider.interrupt("the live loop is stopping")
            self._thread.join(5.0)
        return not self._thread.is_alive()

    def _run(self) -> None:
        dbsession.set_label(f"mailbox={self.mailbox_id}")
        try:
            # In the process list as watched for the loop's whole life, reconnects included (jobs.processes).
            with processes.doing(mailbox=self.mailbox_id, live=True):
                self._reconnecting()
        finally:
            dbsession.set_label(None)
            dbsession.close_quietly()

    def _reconnecting(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                if self._session():
                    failures = 0
            except Exception as exc:
                if self._stop.is_set():
                    break
                reset_connection_if_broken()
                failures += 1
                delay = backoff_delay(failures, conf.get("MAILPOLL_LIVE_BACKOFF"),
                                      conf.get("MAILPOLL_LIVE_BACKOFF_MAX"), random.random())
                error = str(exc) if isinstance(exc, ProviderError) else f"{type(exc).__name__}: {exc}"
                if isinstance(exc, ProviderError):
                    log.warning("mailbox=%s live loop: %s; reconnecting in %.1fs", self.mailbox_id, error, delay)
                else:
                    log.exception("mailbox=%s live loop crashed; reconnecting in %.1fs", self.mailbox_id, delay)
                self._note(f"reconnecting after: {error}")
                self._stop.wait(delay)

    def _session(self) -> bool:
        """One connection: catch up, then IDLE until stopped. True if it got as far as IDLE (failures reset)."""
        mailbox = Mailbox.objects.select_related("org").get(pk=self.mailbox_id)
        folder = mailbox.folder_list[0]
        provider = for_mailbox(mailbox)
        self._provider = provider
        try:
            with provider:
                if not provider.idle_supported():
                    raise ProviderError(f"{mailbox.host}:{mailbox.port} does not offer IDLE")
                # Whatever came while there was no connection: the same read as a poll's.
                self._sync(provider, mailbox, folder, "connected")
                self._watch(provider, mailbox, folder)
                return True
        finally:
            self._provider = None

    def _watch(self, provider, mailbox: Mailbox, folder: str) -> None:
        reidle, silence = conf.get("MAILPOLL_LIVE_REIDLE"), conf.get("MAILPOLL_LIVE_MAX_SILENCE")
        heard = time.monotonic()
        while not self._stop.is_set():
            pending = provider.idle_start()  # news sent with the go-ahead counts as heard in IDLE
            idle_since = gate_asked = time.monotonic()
            self._note("idle")
            while True:
                asked = time.monotonic()
                responses, pending = pending or provider.idle_wait(TICK), []
                now = time.monotonic()
                if responses:
                    heard = now
                if server_said_bye(responses):
                    raise ProviderError(f"{mailbox.host}:{mailbox.port} ended the session: {responses}")
                if self._stop.is_set():
                    provider.idle_end()
                    return
                if means_new_mail(responses):
                    step = NEW_MAIL
                elif not responses and now - asked < TICK / 2:
                    step = CHECK  # woken early with nothing to read: a closed connection, most likely
                elif self._held and now - gate_asked >= GATE_RECHECK:
                    gate_asked = now
                    step = ROOM if has_room() else WAIT
                else:
                    step = idle_step(now, idle_since, heard, reidle, silence)
                if step != WAIT:
                    break
            provider.idle_end()
            log.debug("mailbox=%s live: left IDLE (%s)", mailbox.pk, step)
            if step == NEW_MAIL:
                self._sync(provider, mailbox, folder, "new mail")
            elif step == ROOM:
                self._sync(provider, mailbox, folder, "room in the outbox")
            elif step == CHECK:
                provider.noop()  # a dead connection fails here
                heard = time.monotonic()
                self._sync(provider, mailbox, folder, "check after silence")

    def _sync(self, provider, mailbox: Mailbox, folder: str, why: str) -> None:
        _room, full = intake_gate(mailbox)  # full, it has queued a sender
        if full and not first_reads(mailbox.initial_mode, [folder], positioned_folders(mailbox)):
            # The same gate as a poll's (outbox.capacity): the mail waits on the server, the cursor stays; the loop
            # asks again from IDLE and reads once there is room. A first "new only" read fetches nothing and
            # goes through: held, it would start "new" only after the drain.
            log.warning("mailbox=%s folder=%s live %s: the downstream outbox is full, nothing fetched", mailbox.pk,
                        folder, why)
            self._note(f"{why}: held, the downstream outbox is full")
            self._held = True
            # Selected all the same: IDLE reports new mail only in the selected folder.
            provider.folder_status(folder)
            return
        while True:
            result = self.folder_sync.sync_folder(provider, mailbox, folder)
            self._held = bool(result.held)  # stopped at the gate between batches
            log.info("mailbox=%s folder=%s live %s: fetched=%s stored=%s duplicates=%s rejected=%s failed=%s",
                     mailbox.pk, folder, why, result.fetched, result.stored, result.duplicates, result.rejected,
                     len(result.failed))
            self._note(f"{why}: {result.stored} stored" + (", then held: the downstream outbox is full"
                                                           if self._held else ""))
            if self._held or not provider.new_mail_during_read():
                return
            # Announced inside this read's own answers, and not to be repeated in IDLE: read again now.
            why = "new mail during the last read"

    def _note(self, event: str) -> None:
        """The last event on this mailbox's watch row (display only: a failure to write it is only logged)."""
        try:
            LiveWatch.objects.filter(mailbox_id=self.mailbox_id, host=HOST, pid=os.getpid()).update(
                last_event_at=timezone.now(), last_event=event[:200])
        except Exception as exc:
            log.warning("mailbox=%s live: could not note %r (%s: %s)", self.mailbox_id, event, type(exc).__name__, exc)
            reset_connection_if_broken()
