"""The small shared vocabulary of "changes since a cursor" (issue 11).

An API mailbox source (Gmail, Microsoft Graph) reads a folder as a sequence of
``Batch``es: each holds items ``(provider message id, raw RFC 5322 bytes | TooBig)``
and the cursor value that is safe to commit once every item of that batch is
durably stored (never before: the cursor moves only over what is stored). The
cursor is opaque to the caller (a Gmail ``historyId``, a Graph ``deltaLink``).

The exceptions are what a source raises for the caller to decide on:
``CursorExpired`` asks for a bounded resync with dedup (recorded on the mailbox),
``Throttled`` means the provider kept refusing after a bounded backoff. Both are
``ProviderError``s, so a caller that only knows the IMAP errors still records them.
Their messages never carry secrets or tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .base import ProviderError


@dataclass(frozen=True)
class TooBig:
    """A message over ``MAILPOLL_MAX_MESSAGE_BYTES``: not fetched, only its size and header block.

    ``headers`` is the raw header block (RFC 5322 bytes, ending with a blank line) so the
    store can make a rejected Request with its Message-ID, sender and subject; it may be
    empty when the provider gave none.
    """

    size: int
    headers: bytes = b""


@dataclass(frozen=True)
class Batch:
    """Some changes of one folder and the cursor to commit once they are all stored.

    ``items`` are ``(provider message id, raw bytes or TooBig)`` in the provider's order;
    a batch may be empty (a page that only moved the cursor). ``cursor`` is ``None`` when
    this batch alone does not make a safe point (a later batch of the same run carries it).
    """

    items: list[tuple[str, bytes | TooBig]] = field(default_factory=list)
    cursor: str | None = None


class CursorExpired(ProviderError):
    """The provider no longer knows the cursor (Gmail history too old: 404; Graph 410 /
    ``SyncStateNotFound``), possibly in the middle of paging.

    Nothing after the last committed batch may be assumed read: the caller starts a
    bounded full resync of the folder, with dedup, and records it on the mailbox.
    """


class Throttled(ProviderError):
    """The provider kept answering "slow down" (429, quota 403, 503) after a bounded backoff.

    ``retry_after`` is the provider's last hint in seconds, if it gave one. The caller
    records the mailbox's error and tries again on a later poll, never in a hot loop.
    """

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after
