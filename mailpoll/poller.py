"""The poll loop behind ``manage.py pollmail``.

Every cycle claims the due mailboxes (``FOR UPDATE SKIP LOCKED``: replicas get
disjoint sets without a coordinator), bumps their ``last_polled_at`` and
commits before any network I/O — a replica that dies mid-poll leaves the
mailbox due again one interval later. Each mailbox is then polled folder by
folder under the cursor rules of ``mailpoll.cursor``; each fetched batch is
stored in one transaction, and a batch that fails is stored again message by
message, so only a message that really cannot be stored holds the cursor
(``mailpoll.store``). Any exception of a mailbox is recorded
on it and swallowed, and every cycle ends with the watchdog: the loop never dies.

Up to ``MAILPOLL_CONCURRENCY`` mailboxes are polled at once, each in its own
thread with its own IMAP and database connections. Each poll has an overall
deadline (``MAILPOLL_POLL_DEADLINE``): a watcher thread shuts the poll's socket
down when it passes, or a few seconds after SIGTERM, so neither a server that
never answers nor one that trickles can hold the others or the shutdown. A
mailbox that fails is retried later and later (``sql.RECORD_POLL_FAILURE``).
"""

from __future__ import annotations

import logging
import random
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection
from django.utils import timezone

from jobs import dbsession

from . import conf, cursor, sql, store, watchdog
from .models import FolderCursor, Mailbox, Request
from .parse import parse_headers
from .providers import FolderError, ProviderError, for_mailbox

log = logging.getLogger(__name__)

SYNC_COMMIT_OFF = "SET synchronous_commit = off"
# After SIGTERM, a poll has this long to end on its own (between batches) before its connection is cut.
STOP_GRACE = 2.0


@dataclass
class FolderResult:
    folder: str
    mode: str  # the cursor plan's mode, or "failed": the folder could not be read
    fetched: int = 0
    stored: int = 0
    duplicates: int = 0
    rejected: int = 0
    failed: dict = field(default_factory=dict)  # uid -> error
    last_uid: int | None = None  # the stored cursor after this poll; None while the folder has none
    error: str = ""  # why the folder could not be read at all


class Poller:
    def __init__(self, *, interval: float | None = None, store_messages=None, concurrency: int | None = None):
        self.interval = interval or conf.get("MAILPOLL_INTERVAL")
        self.concurrency = max(1, concurrency or conf.get("MAILPOLL_CONCURRENCY"))
        # The storage step, replaceable so tests can make one message fail.
        self.store_messages = store_messages or store.store_messages
        self._stop = threading.Event()
        # Failures that could not be written (the database was down), by mailbox id: written at the next cycle.
        self._unrecorded: dict[int, tuple[str, datetime, bool]] = {}
        self._unrecorded_lock = threading.Lock()

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
        while not self._stop.is_set():
            self.cycle()
            if once:
                break
            self._stop.wait(self.interval * random.uniform(0.9, 1.1))
        log.info("poller stopped")

    def cycle(self) -> list[int]:
        """One cycle: claim, poll the claimed mailboxes, watchdog. Returns the mailbox ids polled."""
        polled = []
        try:
            self._record_unrecorded()
            ids = self.claim_due()
            _sync_commit_off()
            mailboxes = list(Mailbox.objects.filter(pk__in=ids).select_related("org").order_by("pk"))
            polled = self._poll_all(mailboxes)
        except Exception:
            log.exception("poll cycle failed")
            _reset_connection()
        try:
            watchdog.run_once()
        except Exception:
            log.exception("watchdog failed")
            _reset_connection()
        return polled

    def _poll_all(self, mailboxes: list[Mailbox]) -> list[int]:
        """Poll each mailbox, up to ``concurrency`` at once; a lone mailbox in this thread."""
        if self.concurrency == 1 or len(mailboxes) <= 1:
            polled = []
            for mailbox in mailboxes:
                if self._stop.is_set():
                    break
                self.poll(mailbox)
                polled.append(mailbox.pk)
            return polled
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(mailboxes)),
                                thread_name_prefix="pollmail") as pool:
            futures = [(mailbox.pk, pool.submit(self._poll_in_thread, mailbox)) for mailbox in mailboxes]
            return [pk for pk, future in futures if future.result()]

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
            _reset_connection()

    def claim_due(self) -> list[int]:
        with connection.cursor() as cur:
            cur.execute(sql.CLAIM_DUE_MAILBOXES, {"limit": conf.get("MAILPOLL_CLAIM_LIMIT")})
            return [row[0] for row in cur.fetchall()]

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
            provider = for_mailbox(mailbox)
            watch = _Watch(provider, conf.get("MAILPOLL_POLL_DEADLINE"), self._stop)
            with watch, provider:
                for folder in mailbox.folder_list:
                    try:
                        results.append(self.sync_folder(provider, mailbox, folder))
                    except FolderError as exc:
                        # The server refused this folder (renamed, deleted): the session is fine and so are
                        # the other folders. Reported on the mailbox below, but no reason to back it off.
                        results.append(self._folder_failed(mailbox, folder, exc))
        except Exception as exc:
            _reset_connection_if_broken()
            # A provider's error names its server and folder already; anything else is named by its type.
            error = str(exc) if isinstance(exc, ProviderError) else f"{type(exc).__name__}: {exc}"
            cause = watch.cause if watch else None
            if cause == _Watch.STOPPING:
                log.info("mailbox=%s poll cut short by the shutdown: %s", mailbox.pk, error)
                return results
            backoff = True
            if cause == _Watch.DEADLINE:
                stored = _stored_since(mailbox, started)
                # A poll that was getting somewhere (a first sweep of a big folder) resumes from its cursor
                # next time, at the usual interval; one that stored nothing is a server to back off from.
                backoff = not stored
                error = f"{error} ({stored} new message(s) stored before it)"
            self._record_failure(mailbox, error, backoff=backoff)
            log.warning("mailbox=%s poll failed: %s", mailbox.pk, error)
            return results
        failures = {f"{r.folder} uid {uid}": err for r in results for uid, err in r.failed.items()}
        problems = [f"folder {r.folder} could not be read: {r.error}" for r in results if r.error]
        if failures:
            first = next(iter(failures.items()))
            problems.append(f"{len(failures)} message(s) not stored; first: {first[0]}: {first[1]}")
        if problems:
            # The server answered: a folder or a message failed, not the mailbox. No backoff.
            self._record_failure(mailbox, "; ".join(problems), backoff=False)
        else:
            self._record_success(mailbox)
        for r in results:
            log.info("mailbox=%s folder=%s mode=%s fetched=%s stored=%s duplicates=%s rejected=%s failed=%s "
                     "last_uid=%s", mailbox.pk, r.folder, r.mode, r.fetched, r.stored, r.duplicates, r.rejected,
                     len(r.failed), r.last_uid)
        return results

    def sync_folder(self, provider, mailbox: Mailbox, folder: str) -> FolderResult:
        """Read one folder under the cursor rules (seed 002), storing the cursor after every batch.

        The cursor moves only over what this poll attempted and stored
        (``cursor.next_cursor``): a poll stopped before the folder's first batch
        leaves its cursor as it was, or absent; an error in a later batch (a
        dropped connection) keeps the batches already stored. A ``FolderError``
        from SELECT or SEARCH propagates.
        """
        status = provider.folder_status(folder)
        saved = FolderCursor.objects.filter(mailbox=mailbox, folder=folder).first()
        state = saved.state() if saved else None
        plan = cursor.plan_folder_sync(mailbox.initial_mode, mailbox.initial_since, status, state)
        if plan.uidvalidity_reset:
            log.warning("mailbox=%s folder=%s UIDVALIDITY changed %s -> %s: full sweep, dedup absorbs repeats",
                        mailbox.pk, folder, state.uidvalidity, status.uidvalidity)
        uids = cursor.uids_to_fetch(plan, provider.search(plan.search, start_uid=plan.start_uid, since=plan.since))
        result = FolderResult(folder, plan.mode, last_uid=state.last_uid if state else None)
        succeeded: set[int] = set()
        batch_size = conf.get("MAILPOLL_FETCH_BATCH")
        for start in range(0, len(uids), batch_size):
            if self._stop.is_set():
                log.info("mailbox=%s folder=%s stopping: %s of %s messages left for the next poll",
                         mailbox.pk, folder, len(uids) - start, len(uids))
                break
            end = min(start + batch_size, len(uids))
            batch = uids[start:end]
            self._store_batch(provider, mailbox, status, batch, result, succeeded)
            # Stored now, not after the loop: an error in a later batch must not throw this one's progress away.
            # Every batch before this one is stored (the loop stops after a failure): cursor_after_batch applies.
            self._save_cursor(mailbox, folder, cursor.cursor_after_batch(plan, uids, start, end, succeeded), result)
            if not all(uid in succeeded for uid in batch):
                break  # the cursor cannot pass the failure; fetch no further this tick
        if not uids:
            self._save_cursor(mailbox, folder, cursor.next_cursor(plan, uids, [], succeeded), result)
        return result

    def _save_cursor(self, mailbox, folder, state: cursor.CursorState | None, result: FolderResult) -> None:
        """Store the cursor ``cursor.next_cursor`` allows (None: leave it), with this poll's problem in the folder.

        A cursor stops right before a failed message, so once it moves again that message
        is stored: an older problem is cleared by any poll that gets further without one.
        """
        if state is None:
            return
        now = timezone.now()
        error = ""
        if result.failed:
            uid, reason = min(result.failed.items())
            error = f"uid {uid} not stored: {reason}"
        # A plain upsert, one statement per batch: every writer vouches only for messages it stored itself, so
        # even a late write by an overlapping poller is a true cursor; at worst it moves back and the folder is
        # read again (dedup).
        with connection.cursor() as cur:
            cur.execute(sql.SAVE_CURSOR, {
                "mailbox_id": mailbox.pk, "folder": folder, "uidvalidity": state.uidvalidity,
                "last_uid": state.last_uid, "sweep_until": state.sweep_until, "sweep_since": state.sweep_since,
                "now": now, "last_error": error[:2000], "last_error_at": now if error else None,
            })
        result.last_uid = state.last_uid

    def _folder_failed(self, mailbox, folder, exc: FolderError) -> FolderResult:
        """Record on the folder's cursor (created without a position if need be) why it could not be read."""
        error = str(exc)
        log.warning("mailbox=%s folder=%s could not be read: %s", mailbox.pk, folder, error)
        row, _ = FolderCursor.objects.update_or_create(
            mailbox=mailbox, folder=folder, defaults={"last_error": error[:2000], "last_error_at": timezone.now()},
        )
        return FolderResult(folder, "failed", last_uid=row.last_uid if row.uidvalidity is not None else None,
                            error=error)

    def _store_batch(self, provider, mailbox, status: cursor.FolderStatus, batch, result, succeeded) -> None:
        folder = status.name
        limit = conf.get("MAILPOLL_MAX_MESSAGE_BYTES")
        sizes = self._ask_server(provider.sizes, provider, mailbox, status, batch, result)
        small = []
        for uid in batch:
            if uid in result.failed:
                continue  # the server would not even give its size
            if uid not in sizes:
                succeeded.add(uid)  # expunged since SEARCH: nothing to store, nothing lost
            elif sizes[uid] <= limit:
                small.append(uid)
            else:
                try:
                    outcome = self._reject_oversized(provider, mailbox, folder, uid, sizes[uid], limit)
                except Exception as exc:
                    self._not_stored(mailbox, folder, uid, exc, result)
                else:
                    _count(uid, outcome, result, succeeded)
        for group in cursor.fetch_groups(small, sizes, conf.get("MAILPOLL_FETCH_MAX_BYTES")):
            raws = self._ask_server(provider.fetch, provider, mailbox, status, group, result)
            # Absent and not refused: expunged since SIZE, likewise.
            succeeded.update(uid for uid in group if uid not in raws and uid not in result.failed)
            self._store_fetched(mailbox, folder, [(uid, raws[uid]) for uid in group if uid in raws], result,
                                succeeded)

    def _ask_server(self, call, provider, mailbox, status: cursor.FolderStatus, uids: list[int],
                    result: FolderResult) -> dict:
        """``call(uids)`` (sizes or messages); if the server refuses the batch, ask again one message at a time.

        One message the server cannot read (a damaged file, say) then fails alone, by its UID, instead
        of taking its whole batch with it; a server that hangs up with its refusal gets a new session
        first. A lost connection is no refusal: it propagates.
        """
        try:
            return call(uids)
        except FolderError as exc:
            self._reopen_if_lost(exc, provider, mailbox, status)
            if len(uids) == 1:
                self._not_stored(mailbox, status.name, uids[0], exc, result)
                return {}
            log.warning("mailbox=%s folder=%s the server refused %s messages at once (%s): asking one by one",
                        mailbox.pk, status.name, len(uids), exc)
        answers = {}
        for uid in uids:
            try:
                answers.update(call([uid]))
            except FolderError as exc:
                self._not_stored(mailbox, status.name, uid, exc, result)
                self._reopen_if_lost(exc, provider, mailbox, status)
        return answers

    def _reopen_if_lost(self, exc: FolderError, provider, mailbox, status: cursor.FolderStatus) -> None:
        """After a refusal that ended the session: a new one, on the same folder of the same UIDVALIDITY."""
        if not exc.session_lost:
            return
        log.info("mailbox=%s folder=%s the server hung up with its refusal: reconnecting", mailbox.pk, status.name)
        provider.close()
        provider.connect()
        now = provider.folder_status(status.name)
        if now.uidvalidity != status.uidvalidity:
            # Stored UIDs of this poll belong to the old generation: stop here, the next poll sweeps the folder.
            raise ProviderError(f"folder {status.name}: UIDVALIDITY changed from {status.uidvalidity} to "
                                f"{now.uidvalidity} while it was being read")

    def _store_fetched(self, mailbox, folder, fetched, result, succeeded) -> None:
        result.fetched += len(fetched)
        if len(fetched) > 1:
            try:
                outcomes = self.store_messages(mailbox, folder, fetched)
            except Exception as exc:
                _reset_connection_if_broken()
                log.warning("mailbox=%s folder=%s a batch of %s messages was not stored (%s: %s): "
                            "storing them one by one", mailbox.pk, folder, len(fetched), type(exc).__name__, exc)
            else:
                for (uid, _), outcome in zip(fetched, outcomes):
                    _count(uid, outcome, result, succeeded)
                return
        # One by one (a batch of one, or a failed batch): only a message that
        # really cannot be stored fails, and holds the cursor.
        for uid, raw in fetched:
            try:
                [outcome] = self.store_messages(mailbox, folder, [(uid, raw)])
            except Exception as exc:
                self._not_stored(mailbox, folder, uid, exc, result)
            else:
                _count(uid, outcome, result, succeeded)

    def _not_stored(self, mailbox, folder, uid, exc, result) -> None:
        _reset_connection_if_broken()
        # A refusal's text is the server's own ("fetch failed: ..."); anything else is named by its type.
        result.failed[uid] = str(exc) if isinstance(exc, FolderError) else f"{type(exc).__name__}: {exc}"
        log.error("mailbox=%s folder=%s uid=%s not stored: %s", mailbox.pk, folder, uid, result.failed[uid])

    def _reject_oversized(self, provider, mailbox, folder, uid, size, limit):
        headers = provider.fetch_headers(uid) or b""
        # Decoded exactly as an accepted message's headers are: same sender, subject and dedup name.
        parsed = parse_headers(headers)
        source_ref = parsed.source_ref or store.raw_ref(headers + str(size).encode())
        return store.store_rejected(
            mailbox, folder, uid, source_ref,
            f"message is {size:,} bytes, over the {limit:,}-byte limit", size=size,
            sender=parsed.sender, subject=parsed.subject,
        )

    def _record_success(self, mailbox: Mailbox) -> None:
        # A success ends any backoff: the mailbox is back on its poll_interval.
        try:
            Mailbox.objects.filter(pk=mailbox.pk).update(last_success_at=timezone.now(), consecutive_failures=0,
                                                         next_attempt_at=None)
        except Exception:
            log.exception("mailbox=%s could not record its success", mailbox.pk)
            _reset_connection()

    def _record_failure(self, mailbox: Mailbox, error: str, *, backoff: bool = True,
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
            _reset_connection()
            with self._unrecorded_lock:
                self._unrecorded[mailbox.pk] = (error, failed_at, backoff)
            return False
        return True

    def _record_unrecorded(self) -> None:
        """Write the failures kept through a database outage (the first that fails again waits for the next)."""
        with self._unrecorded_lock:
            kept = sorted(self._unrecorded.items(), key=lambda item: item[1][1])
            self._unrecorded.clear()
        for n, (pk, (error, failed_at, backoff)) in enumerate(kept):
            if not self._record_failure(Mailbox(pk=pk), error, backoff=backoff, failed_at=failed_at):
                with self._unrecorded_lock:
                    for later_pk, later in kept[n + 1:]:
                        self._unrecorded.setdefault(later_pk, later)
                return
            log.info("mailbox=%s failure of %s recorded after the database came back", pk, failed_at.isoformat())


class _Watch:
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


def _count(uid: int, outcome: store.Stored, result: FolderResult, succeeded: set[int]) -> None:
    succeeded.add(uid)
    if not outcome.created:
        result.duplicates += 1
    elif outcome.status == "rejected":
        result.rejected += 1
    else:
        result.stored += 1


def _reset_connection_if_broken() -> None:
    """After an error: a dead database connection is dropped so the next query reconnects."""
    if connection.connection is not None and not connection.in_atomic_block and not connection.is_usable():
        _reset_connection()


def _reset_connection() -> None:
    try:
        connection.close()
    except Exception:
        pass


def _sync_commit_off() -> None:
    with connection.cursor() as cur:
        # Safe to trade durability for speed here, and only here: the poller
        # changes nothing on the mail server, and a crash loses a suffix of
        # commits — the cursor is committed after the messages it covers, so
        # it can never survive them. Lost messages are simply fetched again.
        cur.execute(SYNC_COMMIT_OFF)


def _stored_since(mailbox: Mailbox, started: datetime) -> int:
    """Requests this mailbox stored since ``started`` (0 if the database cannot say)."""
    try:
        return Request.objects.filter(mailbox_id=mailbox.pk, created_at__gte=started).count()
    except Exception:
        _reset_connection_if_broken()
        return 0
