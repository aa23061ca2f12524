"""One folder of a mailbox read under the cursor rules of ``mailpoll.cursor``, batch by batch.

Each fetched batch is stored in one transaction, and a batch that fails is
stored again message by message, so only a message that really cannot be
stored holds the cursor (``mailpoll.sync.store``). The cursor is saved after every
batch, and only over what this poll attempted and stored.

Before every batch the downstream outbox's gate is asked (``intake_gate``, seed
004): a read stops where the outbox is full, its cursor right after the last
message taken, and the rest waits on the server until there is room.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from django.db import connection
from django.utils import timezone

from jobs import dbsession
from outbox import capacity as outbox_capacity
from outbox.wake import wake as outbox_wake

from .. import conf, cursor
from . import sql, store
from ..models import FolderCursor, Mailbox
from ..providers import FolderError, ProviderError

# The poller's log, as before it was split into modules: operators grep for it (docs/mail.md).
log = logging.getLogger("mailpoll.poller")


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
    position: str = ""  # an API folder's stored cursor after this poll (it has no last_uid)
    error: str = ""  # why the folder could not be read at all
    held: str = ""  # why the read stopped at the outbox's gate before the folder's end (``intake_gate``)


def intake_gate(mailbox) -> tuple[int | None, str]:
    """The outbox's bound (outbox.capacity), asked before a fetch: (documents intake may take now, why it may take none).

    ``(None, "")`` while the outbox is off: no bound, no statement run. Otherwise one statement
    (``outbox.capacity.intake_depth``: held entries and documents on their way). Full, it is
    ``(0, reason)``, the reason being what the mailbox records, and a sender is queued so the
    outbox drains whatever else has stopped.
    """
    current = outbox_capacity.intake_gate()
    if current is None:
        return None, ""
    if not current.full:
        return current.room, ""
    outbox_wake(mailbox.org_id)
    return 0, outbox_capacity.full_reason(current)


class BatchStore:
    """What every folder reader shares: storing fetched messages batch by batch, and recording failures.

    Stops between batches once ``stop`` is set; stores through ``store_messages``.
    """

    def __init__(self, store_messages, stop: threading.Event):
        # The storage step, replaceable so tests can make one message fail.
        self.store_messages = store_messages
        self._stop = stop

    def folder_failed(self, mailbox, folder, exc: FolderError) -> FolderResult:
        """Record on the folder's cursor (created without a position if need be) why it could not be read."""
        error = str(exc)
        log.warning("mailbox=%s folder=%s could not be read: %s", mailbox.pk, folder, error)
        row, _ = FolderCursor.objects.update_or_create(
            mailbox=mailbox, folder=folder, defaults={"last_error": error[:2000], "last_error_at": timezone.now()},
        )
        return FolderResult(folder, "failed", last_uid=row.last_uid if row.uidvalidity is not None else None,
                            error=error)

    def _store_fetched(self, mailbox, folder, fetched, result, succeeded, **generation) -> None:
        """``generation``: an IMAP folder's ``uidvalidity``, which its UIDs need to name a message."""
        result.fetched += len(fetched)
        if len(fetched) > 1:
            try:
                outcomes = self.store_messages(mailbox, folder, fetched, **generation)
            except Exception as exc:
                reset_connection_if_broken()
                log.warning("mailbox=%s folder=%s a batch of %s messages was not stored (%s: %s): "
                            "storing them one by one", mailbox.pk, folder, len(fetched), type(exc).__name__, exc)
            else:
                for (uid, _), outcome in zip(fetched, outcomes, strict=False):
                    count_outcome(uid, outcome, result, succeeded)
                return
        # One by one (a batch of one, or a failed batch): only a message that
        # really cannot be stored fails, and holds the cursor.
        for uid, raw in fetched:
            try:
                [outcome] = self.store_messages(mailbox, folder, [(uid, raw)], **generation)
            except Exception as exc:
                self._not_stored(mailbox, folder, uid, exc, result)
            else:
                count_outcome(uid, outcome, result, succeeded)

    def _not_stored(self, mailbox, folder, uid, exc, result) -> None:
        reset_connection_if_broken()
        # A refusal's text is the server's own ("fetch failed: ..."); anything else is named by its type.
        result.failed[uid] = str(exc) if isinstance(exc, FolderError) else f"{type(exc).__name__}: {exc}"
        log.error("mailbox=%s folder=%s uid=%s not stored: %s", mailbox.pk, folder, uid, result.failed[uid])


class FolderSync(BatchStore):
    """Reads IMAP folders under the UID cursor rules."""

    def sync_folder(self, provider, mailbox: Mailbox, folder: str) -> FolderResult:
        """Read one folder under the cursor rules (mailpoll.cursor), storing the cursor after every batch.

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
        start = 0
        while start < len(uids):
            if self._stop.is_set():
                log.info("mailbox=%s folder=%s stopping: %s of %s messages left for the next poll",
                         mailbox.pk, folder, len(uids) - start, len(uids))
                break
            room, result.held = intake_gate(mailbox)
            if result.held:
                log.warning("mailbox=%s folder=%s %s of %s messages left on the server: %s", mailbox.pk, folder,
                            len(uids) - start, len(uids), result.held)
                break
            # No more than the outbox has room for: the bound is passed only by messages of several documents.
            end = min(start + (batch_size if room is None else min(batch_size, room)), len(uids))
            batch = uids[start:end]
            self._store_batch(provider, mailbox, status, batch, result, succeeded)
            # Stored now, not after the loop: an error in a later batch must not throw this one's progress away.
            # Every batch before this one is stored (the loop stops after a failure): cursor_after_batch applies.
            self._save_cursor(mailbox, folder, cursor.cursor_after_batch(plan, uids, start, end, succeeded), result)
            if not all(uid in succeeded for uid in batch):
                break  # the cursor cannot pass the failure; fetch no further this tick
            start = end
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
                    count_outcome(uid, outcome, result, succeeded)
        for group in cursor.fetch_groups(small, sizes, conf.get("MAILPOLL_FETCH_MAX_BYTES")):
            raws = self._ask_server(provider.fetch, provider, mailbox, status, group, result)
            # Absent and not refused: expunged since SIZE, likewise.
            succeeded.update(uid for uid in group if uid not in raws and uid not in result.failed)
            self._store_fetched(mailbox, folder, [(uid, raws[uid]) for uid in group if uid in raws], result,
                                succeeded, uidvalidity=status.uidvalidity)

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

    def _reject_oversized(self, provider, mailbox, folder, uid, size, limit):
        return store.store_oversized(mailbox, folder, uid, size, provider.fetch_headers(uid) or b"", limit)


def count_outcome(uid: int, outcome: store.Stored, result: FolderResult, succeeded: set[int]) -> None:
    succeeded.add(uid)
    if not outcome.created:
        result.duplicates += 1
    elif outcome.status == "rejected":
        result.rejected += 1
    else:
        result.stored += 1


def reset_connection_if_broken() -> None:
    """After an error: a dead database connection is dropped so the next query reconnects."""
    if connection.connection is not None and not connection.in_atomic_block and not connection.is_usable():
        dbsession.close_quietly()
