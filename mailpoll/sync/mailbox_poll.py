"""Polling one mailbox: every folder within the poll's deadline, and the outcome recorded on the mailbox.

Each poll has an overall deadline (``MAILPOLL_POLL_DEADLINE``): a watcher thread
shuts the poll's socket down when it passes, or a few seconds after SIGTERM, so
neither a server that never answers nor one that trickles can hold the others
or the shutdown. Any exception of a mailbox is recorded on it and swallowed. A
mailbox that fails is retried later and later (``sql.RECORD_POLL_FAILURE``); a
failure that cannot be written (the database is down) is kept and written at
the next cycle.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime

from django.db import connection
from django.db.models import Q
from django.utils import timezone

from jobs import dbsession
from seoinsight.outbound import scrub

from .. import conf
from . import after_store, sql
from .changes_sync import ChangesSync
from .folder_sync import FolderResult, FolderSync, intake_gate, reset_connection_if_broken
from ..models import FolderCursor, Mailbox, Request
from ..oauth.tokens import NeedsReauthorization, TokenRefreshError
from ..oauth.apps import NotConfigured, NotConnected
from ..providers import ChangesProvider, FolderError, ProviderError, for_mailbox
from ..providers.diagnosis import recorded

# The poller's log, as before it was split into modules: operators grep for it (docs/mail.md).
log = logging.getLogger("mailpoll.poller")

# Errors whose message says what happened without their type's name (and never holds a secret).
SELF_EXPLAINING = (ProviderError, NeedsReauthorization, TokenRefreshError, NotConfigured, NotConnected)

# After SIGTERM, a poll has this long to end on its own (between batches) before its connection is cut.
STOP_GRACE = 2.0


class MailboxPoll:
    """Polls a mailbox per call, from several threads at once; reads its folders through ``folder_sync``."""

    def __init__(self, folder_sync: FolderSync, changes_sync: ChangesSync, stop: threading.Event):
        self.folder_sync = folder_sync
        self.changes_sync = changes_sync
        self._stop = stop
        # Failures that could not be written (the database was down), by mailbox id: written at the next cycle.
        self._unrecorded: dict[int, tuple[str, datetime, bool]] = {}
        self._unrecorded_lock = threading.Lock()

    def poll(self, mailbox: Mailbox) -> list[FolderResult]:
        """Poll every folder of one mailbox within its deadline; record success or the error on the mailbox."""
        # So a statement the database stops answering is logged with its mailbox (jobs.dbsession).
        dbsession.set_label(f"mailbox={mailbox.pk}")
        try:
            return self._poll(mailbox)
        finally:
            dbsession.set_label(None)

    def _poll(self, mailbox: Mailbox) -> list[FolderResult]:
        results = []
        started = timezone.now()
        watch = None
        try:
            folders = mailbox.folder_list
            held = self._outbox_full(mailbox)
            if held:
                folders = first_reads(mailbox.initial_mode, folders, positioned_folders(mailbox))
                if not folders:
                    self.record_failure(mailbox, held, backoff=False)
                    return results
                log.info("mailbox=%s outbox full, but %s never read yet (new only): recording where new mail "
                         "starts, nothing fetched", mailbox.pk, ", ".join(folders))
            provider = for_mailbox(mailbox)
            watch = Watch(provider, conf.get("MAILPOLL_POLL_DEADLINE"), self._stop)
            # IMAP's UID cursor or an API's changes: the same storage, the same rule for the cursor.
            sync = self.changes_sync if isinstance(provider, ChangesProvider) else self.folder_sync
            with watch, provider:
                for folder in folders:
                    try:
                        results.append(sync.sync_folder(provider, mailbox, folder))
                    except FolderError as exc:
                        # The server refused this folder (renamed, deleted): the session is fine and so are
                        # the other folders. Reported on the mailbox below, but no reason to back it off.
                        results.append(sync.folder_failed(mailbox, folder, exc))
                if not self._stop.is_set():
                    # Last, on the same session: never before intake, and never a reason for the poll to fail.
                    after_store.apply_due(provider, mailbox)
        except Exception as exc:
            reset_connection_if_broken()
            # A provider's or the token machinery's error names its server, folder or grant already (and never a
            # secret); anything else is named by its type.
            error = str(exc) if isinstance(exc, SELF_EXPLAINING) else f"{type(exc).__name__}: {exc}"
            cause = watch.cause if watch else None
            if cause == Watch.STOPPING:
                log.info("mailbox=%s poll cut short by the shutdown: %s", mailbox.pk, error)
                return results
            backoff, note = True, ""
            if cause == Watch.DEADLINE:
                stored = _stored_since(mailbox, started)
                # A poll that was getting somewhere (a first sweep of a big folder) resumes from its cursor
                # next time, at the usual interval; one that stored nothing is a server to back off from.
                backoff = not stored
                note = f" ({stored} new message(s) stored before it)"
            # The words Test connection uses first, the exception's own text below (the admin shows it as details).
            error = recorded(exc, error, note=note)
            self.record_failure(mailbox, error, backoff=backoff)
            log.warning("mailbox=%s poll failed: %s", mailbox.pk, error.replace("\n", ": "))
            return results
        # IMAP names a message by its UID, an API by its id.
        failures = {f"{r.folder} {'uid' if isinstance(ref, int) else 'message'} {ref}": err
                    for r in results for ref, err in r.failed.items()}
        problems = [f"folder {r.folder} could not be read: {r.error}" for r in results if r.error]
        if failures:
            first = next(iter(failures.items()))
            problems.append(f"{len(failures)} message(s) not stored; first: {first[0]}: {first[1]}")
        # Held before the poll, or at a batch's gate: the rest waits for the drain, and the mailbox says why.
        held = held or next((r.held for r in results if r.held), "")
        if held:
            problems.append(held)
        if problems:
            # The server answered: a folder or a message failed, not the mailbox. No backoff.
            self.record_failure(mailbox, "; ".join(problems), backoff=False)
        else:
            self.record_success(mailbox)
        for r in results:
            # A Graph cursor is a URL: its origin only (the path and query name the user and hold the delta token).
            log.info("mailbox=%s folder=%s mode=%s fetched=%s stored=%s duplicates=%s rejected=%s failed=%s "
                     "%s", mailbox.pk, r.folder, r.mode, r.fetched, r.stored, r.duplicates, r.rejected,
                     len(r.failed), f"cursor={scrub(r.position)[:80]}" if r.position else f"last_uid={r.last_uid}")
        return results

    def _outbox_full(self, mailbox: Mailbox) -> str:
        """The capacity gate (outbox.capacity): with the outbox full, fetch nothing, so the mail waits on the server.

        Returns why the gate is closed ('' while it is open). Nothing is fetched and no cursor moves, except
        where a read fetches nothing anyway (``first_reads``); the reason is the mailbox's last error (no
        backoff: it is polled again at its interval, and fetches once the outbox has drained). A sender is
        queued too (``intake_gate``). Open, it is asked again before every batch.
        """
        _room, reason = intake_gate(mailbox)
        if reason:
            log.warning("mailbox=%s not polled: %s", mailbox.pk, reason)
        return reason

    def record_success(self, mailbox: Mailbox) -> None:
        # A success ends any backoff: the mailbox is back on its poll_interval.
        try:
            Mailbox.objects.filter(pk=mailbox.pk).update(last_success_at=timezone.now(), consecutive_failures=0,
                                                         next_attempt_at=None)
        except Exception:
            log.exception("mailbox=%s could not record its success", mailbox.pk)
            dbsession.close_quietly()

    def record_failure(self, mailbox: Mailbox, error: str, *, backoff: bool = True,
                       failed_at: datetime | None = None) -> bool:
        """Write a failure on the mailbox; if the database is down, keep it for the next cycle. True if written."""
        failed_at = failed_at or timezone.now()
        try:
            with connection.cursor() as cur:
                cur.execute(sql.RECORD_POLL_FAILURE, {
                    "id": mailbox.pk, "error": error[:2000], "failed_at": failed_at, "backoff": backoff,
                    "backoff_max": conf.get("MAILPOLL_BACKOFF_MAX"),
                })
        except Exception as exc:
            log.error("mailbox=%s could not record its failure (%s: %s); kept, to be recorded once the database "
                      "answers: %s", mailbox.pk, type(exc).__name__, exc, error)
            dbsession.close_quietly()
            with self._unrecorded_lock:
                self._unrecorded[mailbox.pk] = (error, failed_at, backoff)
            return False
        return True

    def record_unrecorded(self) -> None:
        """Write the failures kept through a database outage (the first that fails again waits for the next)."""
        with self._unrecorded_lock:
            kept = sorted(self._unrecorded.items(), key=lambda item: item[1][1])
            self._unrecorded.clear()
        for n, (pk, (error, failed_at, backoff)) in enumerate(kept):
            if not self.record_failure(Mailbox(pk=pk), error, backoff=backoff, failed_at=failed_at):
                with self._unrecorded_lock:
                    for later_pk, later in kept[n + 1:]:
                        self._unrecorded.setdefault(later_pk, later)
                return
            log.info("mailbox=%s failure of %s recorded after the database came back", pk, failed_at.isoformat())


def first_reads(initial_mode: str, folders: list[str], positioned: set[str]) -> list[str]:
    """The folders a full outbox still lets a poll read: a "new only" mailbox's first read of a folder.

    That read fetches nothing; it only records where "new" starts (``cursor.plan_folder_sync``'s
    ``initial-new-only``, an API's current position). Held back until the drain, it would start later, and
    the mail that arrived meanwhile would never be read. ``positioned``: the folders that have a position.

    >>> first_reads("new-only", ["INBOX", "Orders"], {"INBOX"}), first_reads("new-only", ["INBOX"], {"INBOX"})
    (['Orders'], [])
    >>> first_reads("full", ["INBOX"], set()), first_reads("since", ["INBOX"], set())
    ([], [])
    """
    if initial_mode != "new-only":
        return []
    return [folder for folder in folders if folder not in positioned]


def positioned_folders(mailbox: Mailbox) -> set[str]:
    """The mailbox's folders with a position: a UID cursor, an API cursor, or a resync under way."""
    return set(FolderCursor.objects.filter(mailbox=mailbox)
               .filter(Q(uidvalidity__isnull=False) | ~Q(position="") | Q(resync_started_at__isnull=False))
               .values_list("folder", flat=True))


class Watch:
    """Ends one poll from outside: at its deadline, or ``STOP_GRACE`` seconds after the poller is told to stop.

    It shuts the provider's connection down (``MailProvider.interrupt``), which wakes
    whatever the poll is blocked in; ``cause`` then says why the poll failed.
    """

    DEADLINE, STOPPING = "deadline", "stopping"
    TICK = 0.1

    def __init__(self, provider, deadline: float, stop: threading.Event):
        self.provider = provider
        self.deadline = deadline
        self.stop = stop
        self.cause: str | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="pollmail-watch", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        ends = time.monotonic() + self.deadline
        stop_seen = None
        while not self._done.wait(self.TICK):
            now = time.monotonic()
            if self.stop.is_set():
                stop_seen = stop_seen or now
            if now >= ends:
                self._cut(self.DEADLINE, f"the poll's deadline of {self.deadline:g} s passed")
                return
            if stop_seen is not None and now - stop_seen >= STOP_GRACE:
                self._cut(self.STOPPING, "pollmail is stopping")
                return

    def _cut(self, cause: str, reason: str) -> None:
        self.cause = cause
        self.provider.interrupt(reason)


def _stored_since(mailbox: Mailbox, started: datetime) -> int:
    """Requests this mailbox stored since ``started`` (0 if the database cannot say)."""
    try:
        return Request.objects.filter(mailbox_id=mailbox.pk, created_at__gte=started).count()
    except Exception:
        reset_connection_if_broken()
        return 0
