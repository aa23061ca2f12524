"""Generic IMAP through imapclient."""

from __future__ import annotations

import ssl
from contextlib import contextmanager
from datetime import date

from imapclient import IMAPClient
from imapclient.exceptions import IMAPClientAbortError, IMAPClientError, ProtocolError

from ..cursor import SEARCH_ALL, SEARCH_FROM_UID, SEARCH_NONE, SEARCH_SINCE, FolderStatus
from . import register
from .base import FolderError, MailProvider, ProviderError

TIMEOUT = 60  # seconds per socket operation


@register("imap")
class ImapProvider(MailProvider):
    client: IMAPClient | None = None

    def connect(self) -> None:
        mb = self.mailbox
        try:
            if mb.security == "tls":
                self.client = IMAPClient(mb.host, port=mb.port, ssl=True, ssl_context=ssl.create_default_context(),
                                         timeout=TIMEOUT)
            else:
                self.client = IMAPClient(mb.host, port=mb.port, ssl=False, timeout=TIMEOUT)
                if mb.security == "starttls":
                    self.client.starttls(ssl.create_default_context())
            self.client.login(mb.username, mb.get_secret())
        except IMAPClientError as exc:
            self.close()
            raise ProviderError(f"IMAP login to {mb.host}:{mb.port} as {mb.username} failed: {exc}") from None

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

    def folder_status(self, folder: str) -> FolderStatus:
        with _refusal_is_a_folder_error():
            info = self.client.select_folder(folder, readonly=True)
        return FolderStatus(folder, int(info[b"UIDVALIDITY"]), int(info.get(b"UIDNEXT") or 1))

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
        with _refusal_is_a_folder_error():
            return [int(uid) for uid in self.client.search(criteria)]

    def sizes(self, uids: list[int]) -> dict[int, int]:
        if not uids:
            return {}
        with _refusal_is_a_folder_error():
            response = self.client.fetch(uids, ["RFC822.SIZE"])
        return {int(uid): int(data[b"RFC822.SIZE"]) for uid, data in response.items() if b"RFC822.SIZE" in data}

    def fetch(self, uids: list[int]) -> dict[int, bytes]:
        if not uids:
            return {}
        # BODY.PEEK leaves \\Seen alone: the mailbox's read state is the user's, not ours.
        with _refusal_is_a_folder_error():
            response = self.client.fetch(uids, ["BODY.PEEK[]"])
        return {int(uid): data[b"BODY[]"] for uid, data in response.items() if b"BODY[]" in data}

    def fetch_headers(self, uid: int) -> bytes | None:
        with _refusal_is_a_folder_error():
            response = self.client.fetch([uid], ["BODY.PEEK[HEADER]"])
        data = response.get(uid)
        return data.get(b"BODY[HEADER]") if data else None


@contextmanager
def _refusal_is_a_folder_error():
    """A NO or BAD answer to a folder's command becomes a FolderError; the session stays usable.

    A dropped connection (``abort``) or a garbled response (``ProtocolError``) is not
    a refusal: it ends the mailbox's poll as before.
    """
    try:
        yield
    except (IMAPClientAbortError, ProtocolError):
        raise
    except IMAPClientError as exc:
        raise FolderError(str(exc)) from exc
