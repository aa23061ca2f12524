"""What the poller needs from a mail server: two shapes of one boundary.

``MailProvider`` is IMAP's: UIDVALIDITY, UID search, sizes and fetches, planned by
the UID cursor rules of ``mailpoll.cursor`` (``folder_sync``). ``ChangesProvider`` is
the APIs': a folder's *changes since an opaque cursor*, in ``changes.Batch``es, each
with the cursor that is safe to commit once it is stored (``changes_sync``). Either
way the cursor moves only over what is durably stored.

The poller reaches a server only through these interfaces, and everything after
the fetch (``store.store_messages``: parse, dedup, triage, rows, jobs) takes
raw RFC 5322 bytes, whoever fetched them. An API provider that can hand those
over (Gmail's ``format=raw``, Graph's ``$value``) reuses all of it unchanged;
what it brings of its own is its cursor (a history id, a delta link) in place
of the UID cursor of ``mailpoll.cursor``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from datetime import date, datetime

from ..cursor import FolderStatus
# A provider's part in post-actions: these items and results, and the outcomes' names.
from ..post_actions import DONE, ERROR, GONE, LABEL, MARK_READ, MOVE, PostActionItem, PostActionResult  # noqa: F401


class RawMessage(bytes):
    """A message's raw RFC 5322 bytes (or its header block) as its server handed them over, with the time the
    server received it: IMAP's INTERNALDATE, Gmail's ``internalDate``, Graph's ``receivedDateTime``.

    ``received_at`` is aware, or None when the server did not say. The store falls back to it for a message
    without a usable ``Date:`` header. Being bytes, it passes unchanged through everything between the fetch
    and the store (batches, a failed batch stored again one by one), which need not know it is there.
    """

    received_at: datetime | None

    def __new__(cls, raw: bytes, received_at: datetime | None = None):
        message = super().__new__(cls, raw)
        message.received_at = received_at
        return message


def received_by_server(raw: bytes) -> datetime | None:
    """When the server received ``raw``, if it is a ``RawMessage`` that knows; else None."""
    return getattr(raw, "received_at", None)


class ProviderError(Exception):
    """The server or the configuration failed; the message is safe to show (no secrets)."""


class FolderError(ProviderError):
    """The server refused a command on one folder or message (it answered NO or BAD).

    The session is still usable (unless ``session_lost``): the poller records the
    error on that folder (or message) and goes on with the others. A lost or broken
    connection is never one.
    """

    session_lost = False


class RefusalEndedSession(FolderError):
    """The server refused a message and hung up with it: Dovecot answers a message it cannot read
    with ``* BYE FETCH failed: Internal error occurred``. The poller reconnects and goes on."""

    session_lost = True


class MessageTooLarge(ProviderError):
    """A message turned out larger than the message limit, whatever size the server announced.

    The connection was closed rather than read it. The provider remembers the real
    size, so the next poll's sizes report it and the message becomes a rejected Request.
    """


class MessageArrivedTooLarge(MessageTooLarge, FolderError):
    """The same, for a message that arrived whole (and was dropped): the session is still usable."""


class PollInterrupted(ProviderError):
    """The poller shut the connection down on purpose (its deadline passed, or it is stopping)."""


class _Session(ABC):
    """One poll's connection to a mailbox's server: opened on entering, closed on leaving."""

    def __init__(self, mailbox):
        self.mailbox = mailbox

    def apply_post_actions(self, folder: str, items: list[PostActionItem]) -> dict[int, PostActionResult]:
        """Apply each item to its message in ``folder``; a result per item id.

        Called after the folders are read, on the poll's open session. A refusal that concerns only
        some messages is their ``ERROR`` (or ``GONE``); one that ends the session raises ``ProviderError``
        (the caller records it on every item left). Never changes anything but the items' messages.
        """
        return {item.id: PostActionResult(ERROR, f"{type(self).__name__} cannot change messages on the server")
                for item in items}

    def __enter__(self):
        self.connect()
        return self

    def __exit__(self, *exc):
        self.close()

    @abstractmethod
    def connect(self) -> None: ...

    @abstractmethod
    def close(self) -> None: ...


class MailProvider(_Session):

    @abstractmethod
    def interrupt(self, reason: str) -> None:
        """Called from another thread: make whatever the provider is blocked in fail now, and
        every later call too, with ``PollInterrupted``. Must be safe at any moment, even
        before ``connect`` or after ``close``."""

    @abstractmethod
    def folder_status(self, folder: str) -> FolderStatus:
        """Select ``folder`` (read-only) and return its UIDVALIDITY and UIDNEXT."""

    @abstractmethod
    def check_folder(self, folder: str) -> int | None:
        """Select ``folder`` read-only, as a poll would, reading and changing nothing: how many messages it
        holds (the admin's *Test connection*). ``FolderError`` if the server refuses it."""

    @abstractmethod
    def search(self, search: str, *, start_uid: int | None = None, since: date | None = None) -> list[int]:
        """UIDs of the selected folder matching a cursor plan's search."""

    @abstractmethod
    def sizes(self, uids: list[int]) -> dict[int, int]:
        """Message sizes in bytes; an expunged UID is absent."""

    @abstractmethod
    def fetch(self, uids: list[int]) -> dict[int, bytes]:
        """Raw messages, without changing their read state; an expunged UID is absent."""

    @abstractmethod
    def fetch_headers(self, uid: int) -> bytes | None:
        """The header block only (for messages too big to fetch whole)."""


class ChangesProvider(_Session):
    """An API mailbox (Gmail, Microsoft Graph): each folder read as changes since a cursor.

    ``changes`` yields ``changes.Batch``es; the caller stores each batch, then commits its
    cursor (when it has one). It may raise ``changes.CursorExpired`` (the caller resyncs,
    once per poll), ``changes.Throttled`` or any ``ProviderError``; token errors come from
    ``mailpoll.oauth``. ``interrupt`` has ``MailProvider.interrupt``'s contract.
    """

    @abstractmethod
    def interrupt(self, reason: str) -> None: ...

    @abstractmethod
    def changes(self, folder: str, cursor: str | None, *, mode: str, since: date | None = None) -> Iterator:
        """The folder's changes since ``cursor``; without one, a first read in ``mode`` (``full`` for a resync)."""

    def check_folder(self, folder: str) -> int | None:
        """``MailProvider.check_folder`` for an API: the first batch of a "new only" read, which only takes
        the folder's current position (no message is fetched, nothing is stored or changed). None: an API does
        not say how many messages a folder holds."""
        for _batch in self.changes(folder, None, mode="new-only"):
            break
        return None

    def completes_read(self, cursor: str) -> bool:
        """Whether committing ``cursor`` means the folder has been read through (a resync is over).

        False for a point inside an unfinished listing (Gmail's sweep cursors)."""
        return True
