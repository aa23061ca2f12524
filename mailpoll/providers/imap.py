"""Generic IMAP through imapclient, over a bounded, interruptible connection (``transport``)."""

from __future__ import annotations

import ssl
import threading
from collections import OrderedDict
from contextlib import contextmanager
from datetime import date

from imapclient.exceptions import IMAPClientAbortError, IMAPClientError, LoginError, ProtocolError

from .. import conf
from ..cursor import SEARCH_ALL, SEARCH_FROM_UID, SEARCH_NONE, SEARCH_SINCE, FolderStatus
from . import register
from .base import (
    FolderError,
    MailProvider,
    MessageArrivedTooLarge,
    MessageTooLarge,
    PollInterrupted,
    ProviderError,
    RefusalEndedSession,
)
from .transport import BoundedIMAPClient, Channel, Limits, ResponseTooLarge

# Protocol lines around the largest literal a response may carry (FETCH items, UIDs, flags).
RESPONSE_SLACK = 1024 * 1024


@register("imap")
class ImapProvider(MailProvider):
    client: BoundedIMAPClient | None = None

    def __init__(self, mailbox):
        super().__init__(mailbox)
        limit = conf.get("MAILPOLL_MAX_MESSAGE_BYTES")
        # One FETCH is built to bring at most MAILPOLL_FETCH_MAX_BYTES, or one message over it.
        response = max(limit, conf.get("MAILPOLL_FETCH_MAX_BYTES")) + RESPONSE_SLACK
        self.channel = Channel(Limits(max_literal=limit, max_response=response))
        self.folder: str | None = None
        self.uidvalidity: int | None = None

    def connect(self) -> None:
        mb = self.mailbox
        timeout = conf.get("MAILPOLL_SOCKET_TIMEOUT")
        with self._context():
            try:
                if mb.security not in ("tls", "starttls", "none"):
                    # The CHECK constraint refuses such a row; never let one fall through to plaintext.
                    raise ProviderError(f"{mb.host}:{mb.port}: unknown security {mb.security!r}; refusing to connect")
                tls = mb.security == "tls"
                self.client = BoundedIMAPClient(mb.host, channel=self.channel, port=mb.port, ssl=tls,
                                                ssl_context=ssl.create_default_context() if tls else None,
                                                timeout=timeout)
                if mb.security == "starttls":
                    self.client.starttls(ssl.create_default_context())
                self.client.login(mb.username, mb.get_secret())
            except LoginError as exc:
                self.close()
                if self.channel.reason is not None:
                    raise  # interrupted during the login: not the credentials' fault
                raise ProviderError(f"IMAP login to {mb.host}:{mb.port} as {mb.username} failed: {exc}") from None
            except BaseException:
                self.close()
                raise

    def close(self) -> None:
        if self.client is not None:
            try:
                self.client.logout()
            except Exception:
                # Logging out of a dropped connection fails; the socket is gone either way.
                try:
                    self.client.shutdown()
                except Exception:
                    pass
            self.client = None
        self.channel.close()

    def interrupt(self, reason: str) -> None:
        self.channel.interrupt(reason)

    def folder_status(self, folder: str) -> FolderStatus:
        self.folder, self.uidvalidity = folder, None
        with self._context():
            info = self.client.select_folder(folder, readonly=True)
            self.uidvalidity = int(info[b"UIDVALIDITY"])
            return FolderStatus(folder, self.uidvalidity, int(info.get(b"UIDNEXT") or 1))

    def search(self, search: str, *, start_uid: int | None = None, since: date | None = None) -> list[int]:
        if search == SEARCH_NONE:
            return []
        if search == SEARCH_ALL:
            criteria = ["ALL"]
        elif search == SEARCH_SINCE:
            criteria = ["SINCE", since]
        elif search == SEARCH_FROM_UID:
            criteria = ["UID", f"{start_uid}:*"]
        else:
            raise ValueError(f"unknown search {search!r}")
        with self._context():
            return [int(uid) for uid in self.client.search(criteria)]

    def sizes(self, uids: list[int]) -> dict[int, int]:
        """The announced sizes, or what a fetch showed a message really is when that is more."""
        if not uids:
            return {}
        with self._context(reading=True):
            response = self.client.fetch(uids, ["RFC822.SIZE"])
            announced = {int(uid): int(data[b"RFC822.SIZE"]) for uid, data in response.items()
                         if b"RFC822.SIZE" in data}
        return {uid: max(size, _real_sizes.get(self._key(uid), 0)) for uid, size in announced.items()}

    def fetch(self, uids: list[int]) -> dict[int, bytes]:
        if not uids:
            return {}
        limit = self.channel.limits.max_literal
        with self._context(uids):
            # BODY.PEEK leaves \\Seen alone: the mailbox's read state is the user's, not ours.
            response = self.client.fetch(uids, ["BODY.PEEK[]"])
            raws = {int(uid): data[b"BODY[]"] for uid, data in response.items() if b"BODY[]" in data}
        # What counts is what arrived, not RFC822.SIZE: a server may announce 100 bytes and send 300 KB.
        too_big = sorted(uid for uid, raw in raws.items() if len(raw) > limit)
        for uid in too_big:
            _real_sizes.put(self._key(uid), len(raws[uid]))
        if too_big:
            # Arrived whole (not as a literal, which is refused unread), so the session is fine: a refusal
            # of these messages. The next SIZE of them reports what they are, and the poller rejects them.
            uid = too_big[0]
            raise MessageArrivedTooLarge(f"{self._where()}: uid {uid} is {len(raws[uid]):,} bytes, over the "
                                         f"{limit:,}-byte message limit (the server announced less)")
        return raws

    def fetch_headers(self, uid: int) -> bytes | None:
        with self._context([uid]):
            response = self.client.fetch([uid], ["BODY.PEEK[HEADER]"])
        data = response.get(uid)
        return data.get(b"BODY[HEADER]") if data else None

    # -- errors -----------------------------------------------------------------

    def _refused(self, refusal: ResponseTooLarge, uids: list[int] | None):
        # Learn what the server really sends, so the next SIZE of these messages tells the truth:
        # the one refused, and those read before it in the same response.
        uid = refusal.uid if refusal.uid is not None else (uids[0] if uids and len(uids) == 1 else None)
        for seen, size in [*self.channel.literals, (uid, refusal.size)]:
            if seen is not None:
                _real_sizes.put(self._key(seen), size)
        raise MessageTooLarge(f"{self._where()}: {refusal}") from refusal

    def _where(self) -> str:
        return f"{self.mailbox.host}:{self.mailbox.port}" + (f" {self.folder}" if self.folder else "")

    def _server_said_bye(self) -> bool:
        imap = getattr(self.client, "_imap", None)
        return bool(getattr(imap, "untagged_responses", {}).get("BYE"))

    def _key(self, uid: int) -> tuple:
        mb = self.mailbox
        return (mb.pk, mb.host, mb.port, mb.username, self.folder, self.uidvalidity, uid)

    @contextmanager
    def _context(self, uids: list[int] | None = None, *, reading: bool = False):
        """Every error leaves the provider as a ProviderError naming the server and folder.

        A NO or BAD answer is a ``FolderError`` (the session is still usable), and so is a BYE
        in answer to reading messages (``uids`` or ``reading``; ``RefusalEndedSession``); a
        refused response, an interruption, a lost or garbled connection, a timeout are not.
        """
        try:
            yield
        except ProviderError:
            raise
        except Exception as exc:
            if self.channel.refused is not None:
                self._refused(self.channel.refused, uids)
            if self.channel.reason is not None:
                raise PollInterrupted(f"{self._where()}: {self.channel.reason}") from exc
            if isinstance(exc, IMAPClientError) and not isinstance(exc, (IMAPClientAbortError, ProtocolError)):
                raise FolderError(f"{self._where()}: {exc}") from exc
            if (uids or reading) and isinstance(exc, IMAPClientAbortError) and self._server_said_bye():
                # A BYE in answer to reading messages is the server refusing one of them (Dovecot, for a
                # message file it cannot read), not the network failing: the poller reconnects and asks one by one.
                raise RefusalEndedSession(f"{self._where()}: {exc}") from exc
            raise ProviderError(f"{self._where()}: {type(exc).__name__}: {exc}") from exc


class _RealSizes:
    """What fetches showed messages really are, by (mailbox, server, folder, UIDVALIDITY, uid); bounded.

    In memory only: a message a server lied about fails one poll of each pollmail
    process (the one that saw it), whose next SIZE then has it rejected as oversized.
    """

    MAX_ENTRIES = 10_000

    def __init__(self):
        self._sizes: OrderedDict[tuple, int] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple, default: int) -> int:
        with self._lock:
            return self._sizes.get(key, default)

    def put(self, key: tuple, size: int) -> None:
        with self._lock:
            self._sizes[key] = max(size, self._sizes.get(key, 0))
            self._sizes.move_to_end(key)
            while len(self._sizes) > self.MAX_ENTRIES:
                self._sizes.popitem(last=False)


_real_sizes = _RealSizes()
