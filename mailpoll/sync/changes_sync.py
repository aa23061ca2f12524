"""An API folder (Gmail label, Graph mail folder) read as changes since its cursor, batch by batch.

The provider yields ``changes.Batch``es. Each is stored (raw messages through the same
``store_messages`` as IMAP's, oversized ones as rejected Requests) and only then is its
cursor committed, so the cursor moves only over what is durably stored. A message that
cannot be stored ends the read before its batch's cursor: the next poll reads that batch
again, and dedup absorbs what it had stored. The downstream outbox's gate is asked before
every batch is fetched (``folder_sync.intake_gate``): full, the read stops at the last
committed cursor, and the next poll goes on from there.

When the provider has forgotten the cursor (``CursorExpired``), the folder is resynced: its
position is dropped, the resync is recorded on its FolderCursor (count, reason, start) and
the whole folder is read again with dedup, at most once per poll. A resync whose own read
expires again fails the folder; the next poll starts it over. A resync ends when a cursor
that completes the read is committed (``ChangesProvider.completes_read``).
"""

from __future__ import annotations

import logging

from django.db.models import F
from django.utils import timezone

from .. import conf, cursor
from . import store
from .folder_sync import BatchStore, FolderResult, count_outcome, intake_gate
from ..models import FolderCursor, Mailbox
from ..providers import FolderError
from ..providers.changes import CursorExpired, TooBig

log = logging.getLogger("mailpoll.poller")


class ResyncExpired(FolderError):
    """The resync's own read lost its cursor too: the folder fails this poll, and is resynced from scratch next."""


class ChangesSync(BatchStore):
    """Reads API folders for a poller, through a ``ChangesProvider``."""

    def sync_folder(self, provider, mailbox: Mailbox, folder: str) -> FolderResult:
        row = FolderCursor.objects.filter(mailbox=mailbox, folder=folder).first()
        plan = cursor.plan_changes_read(row.position if row else "", bool(row and row.resync_started_at),
                                        mailbox.initial_mode)
        result = FolderResult(folder, plan.label, position=row.position if row else "")
        try:
            self._read(provider, mailbox, folder, plan, result)
        except CursorExpired as exc:
            self._start_resync(mailbox, folder, str(exc))
            plan = cursor.plan_changes_read("", True, mailbox.initial_mode)
            result.mode, result.position = plan.label, ""
            try:
                self._read(provider, mailbox, folder, plan, result)
            except CursorExpired as again:
                raise ResyncExpired(f"folder {folder}: the resync's cursor expired too ({again}); "
                                    "the next poll starts it over") from again
        return result

    def _read(self, provider, mailbox, folder, plan: cursor.ReadPlan, result: FolderResult) -> None:
        limit = conf.get("MAILPOLL_MAX_MESSAGE_BYTES")
        since = mailbox.initial_since if plan.mode == "since" else None
        # A first "new only" read fetches no message, it only takes the current position: never held back.
        if not (plan.cursor is None and plan.mode == "new-only") and self._held(mailbox, folder, result):
            return
        for batch in provider.changes(folder, plan.cursor, mode=plan.mode, since=since):
            succeeded: set = set()
            raws = [(ref, item) for ref, item in batch.items if not isinstance(item, TooBig)]
            for ref, item in batch.items:
                if isinstance(item, TooBig):
                    try:
                        outcome = store.store_oversized(mailbox, folder, ref, item.size, item.headers, limit)
                    except Exception as exc:
                        self._not_stored(mailbox, folder, ref, exc, result)
                    else:
                        count_outcome(ref, outcome, result, succeeded)
            self._store_fetched(mailbox, folder, raws, result, succeeded)
            if result.failed:
                # The batch's cursor would pass a message that is not stored: stop before it.
                self._record_error(mailbox, folder, result)
                return
            if batch.cursor is not None:
                self._commit(provider, mailbox, folder, batch.cursor, result)
            # Checked once the batch in hand is stored (it was fetched already): the source is lazy, so
            # leaving the loop here fetches nothing more.
            if self._stop.is_set():
                log.info("mailbox=%s folder=%s stopping: the rest is read from the cursor next poll",
                         mailbox.pk, folder)
                return
            if self._held(mailbox, folder, result):
                return

    def _held(self, mailbox, folder, result: FolderResult) -> bool:
        """The outbox's gate before the next batch is fetched (the source is lazy: leaving fetches nothing)."""
        _room, result.held = intake_gate(mailbox)
        if result.held:
            log.warning("mailbox=%s folder=%s the rest is read from the cursor once there is room: %s",
                        mailbox.pk, folder, result.held)
        return bool(result.held)

    def _commit(self, provider, mailbox, folder, position: str, result: FolderResult) -> None:
        """Store the folder's new position; a position that completes the read also ends a resync."""
        now = timezone.now()
        changes = {"position": position, "last_sync_ts": now, "last_error": "", "last_error_at": None}
        if provider.completes_read(position):
            changes["resync_started_at"] = None
        # Upsert: the folder's first committed batch creates the row. As with IMAP, every writer vouches only for
        # what it stored itself, so a late write by an overlapping poller is still a true position.
        FolderCursor.objects.update_or_create(mailbox=mailbox, folder=folder, defaults=changes)
        result.position = position

    def _start_resync(self, mailbox, folder, reason: str) -> None:
        log.warning("mailbox=%s folder=%s cursor expired (%s): resyncing the whole folder, dedup absorbs repeats",
                    mailbox.pk, folder, reason)
        now = timezone.now()
        row, created = FolderCursor.objects.get_or_create(
            mailbox=mailbox, folder=folder,
            defaults={"resyncs": 1, "resync_started_at": now, "last_resync_at": now, "resync_reason": reason[:2000]})
        if not created:
            FolderCursor.objects.filter(pk=row.pk).update(position="", resyncs=F("resyncs") + 1, resync_started_at=now,
                                                          last_resync_at=now, resync_reason=reason[:2000])

    def _record_error(self, mailbox, folder, result: FolderResult) -> None:
        ref, reason = next(iter(result.failed.items()))
        FolderCursor.objects.update_or_create(mailbox=mailbox, folder=folder, defaults={
            "last_error": f"message {ref} not stored: {reason}"[:2000], "last_error_at": timezone.now()})
