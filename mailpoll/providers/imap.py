"""Generic IMAP through imapclient, over a bounded, interruptible connection (``transport``).

A mailbox with ``auth=password`` logs in with LOGIN; one with ``auth=oauth`` (Gmail or Outlook IMAP)
authenticates with XOAUTH2, presenting the access token of its grant (``oauth.apps.token_for``). A token the
server refuses is replaced once, on a new connection; a second refusal is the mailbox's error. Token
trouble (a dead grant, a refresh that failed) is the token machinery's exception, left for the poller to
record. No token is logged, even at DEBUG: imaplib logs the AUTHENTICATE command (which carries no token,
imaplib sending no initial response) and only the size of the SASL response that does.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
from collections import OrderedDict
from collections.abc import Callable
from contextlib import contextmanager
from datetime import UTC, date, datetime

from imapclient import DELETED, SEEN
from imapclient.exceptions import IMAPClientAbortError, IMAPClientError, LoginError, ProtocolError
from imapclient.imapclient import _parse_untagged_response

from .. import conf
from ..oauth import apps as oauth_apps
from ..cursor import SEARCH_ALL, SEARCH_FROM_UID, SEARCH_NONE, SEARCH_SINCE, FolderStatus
from ..models import Auth
from . import register
from .base import (
    DONE,
    ERROR,
    GONE,
    MARK_READ,
    MOVE,
    FolderError,
    MailProvider,
    MessageArrivedTooLarge,
    MessageTooLarge,
    PollInterrupted,
    PostActionItem,
    PostActionResult,
    ProviderError,
    RawMessage,
    RefusalEndedSession,
)
from .transport import BoundedIMAPClient, Channel, Limits, ResponseTooLarge

logger = logging.getLogger(__name__)

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
        if mb.auth != Auth.OAUTH:
            refusal = self._open(lambda client: client.login(mb.username, mb.get_secret()))
            if refusal is not None:
                raise ProviderError(
                    f"IMAP login to {mb.host}:{mb.port} as {mb.username} failed: {refusal}") from refusal
            return
        # Outside _context: NeedsReauthorization and TokenRefreshError are the poller's to record as they are.
        token = oauth_apps.token_for(mb)
        mechanism = XOAuth2(mb.username, token)
        if self._open(self._xoauth2(mechanism)) is None:
            return
        logger.info("mailbox=%s %s:%s refused its XOAUTH2 token; retrying once with a fresh one", mb.pk,
                    mb.host, mb.port)
        # A new connection: some servers end the session after a failed AUTHENTICATE.
        mechanism = XOAuth2(mb.username, oauth_apps.token_for(mb, rejected=token))
        refusal = self._open(self._xoauth2(mechanism))
        if refusal is not None:
            said = f" (its challenge: {mechanism.server_said})" if mechanism.server_said else ""
            raise ProviderError(f"XOAUTH2 was refused for {mb.username} at {mb.host}:{mb.port}, a fresh token "
                                f"too: {refusal}{said}")

    def _xoauth2(self, mechanism: XOAuth2) -> Callable[[BoundedIMAPClient], object]:
        def login(client: BoundedIMAPClient) -> None:
            # A server that does not offer XOAUTH2 is a misconfigured mailbox: it gets no token at all.
            if not client.has_capability("AUTH=XOAUTH2"):
                offered = sorted(c.decode(errors="replace")[5:] for c in client.capabilities()
                                 if c.upper().startswith(b"AUTH="))
                raise ProviderError(f"{self._where()} does not offer XOAUTH2 (only {', '.join(offered) or 'LOGIN'}): "
                                    f"OAuth needs Google's or Microsoft's IMAP (imap.gmail.com, outlook.office365.com)")
            mechanism.login(client)

        return login

    def _open(self, login: Callable[[BoundedIMAPClient], object]) -> LoginError | None:
        """Connect and ``login(client)``; the server's refusal, if it refused (then the connection is closed)."""
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
                # INTERNALDATE as the server wrote it, with its offset, not as naive local time.
                self.client.normalise_times = False
                if mb.security == "starttls":
                    self.client.starttls(ssl.create_default_context())
                login(self.client)
                return None
            except LoginError as exc:
                self.close()
                if self.channel.reason is not None:
                    raise  # interrupted during the login: not the credentials' fault
                return exc
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

    def check_folder(self, folder: str) -> int | None:
        self.folder, self.uidvalidity = folder, None
        with self._context():
            exists = self.client.select_folder(folder, readonly=True).get(b"EXISTS")
        return int(exists) if exists is not None else None

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
            response = self.client.fetch(uids, ["BODY.PEEK[]", "INTERNALDATE"])
        raws = {}
        for uid, data in response.items():
            if b"BODY[]" in data:
                # Popped, so each message is held once more only while it is wrapped, not the whole batch.
                raws[int(uid)] = RawMessage(data.pop(b"BODY[]"), internal_date(data.get(b"INTERNALDATE")))
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
            response = self.client.fetch([uid], ["BODY.PEEK[HEADER]", "INTERNALDATE"])
        data = response.get(uid)
        if not data or b"BODY[HEADER]" not in data:
            return None
        return RawMessage(data[b"BODY[HEADER]"], internal_date(data.get(b"INTERNALDATE")))

    # -- post-actions (mailpoll.post_actions) ----------------------------------------

    def apply_post_actions(self, folder: str, items: list[PostActionItem]) -> dict[int, PostActionResult]:
        """Mark read or move the items' messages, by UID, in ``folder`` opened read-write.

        A UID names a message only under the UIDVALIDITY it was stored with: any other, and the message is
        ``GONE`` for us (acting on that UID could touch another message). So is a UID the folder no longer has.
        A move is ``UID MOVE`` where the server has MOVE, else ``UID COPY``, ``UID STORE +FLAGS (\\Deleted)``
        and ``UID EXPUNGE`` of those UIDs only (UIDPLUS): a plain EXPUNGE would also remove messages the user
        had marked deleted. Neither renumbers the UIDs left, so the folder's cursor stays true.
        """
        self.folder, self.uidvalidity = folder, None
        with self._context():
            info = self.client.select_folder(folder, readonly=False)
        self.uidvalidity = int(info[b"UIDVALIDITY"])
        results = {item.id: PostActionResult(GONE, f"{folder} has a new UIDVALIDITY ({self.uidvalidity}): uid "
                                                   f"{item.ref} no longer names the message stored")
                   for item in items if item.uidvalidity != self.uidvalidity}
        current = [item for item in items if item.id not in results]
        if not current:
            return results
        with self._context():
            present = {int(uid) for uid in self.client.search(["UID", ",".join(str(i.ref) for i in current)])}
        groups: dict[tuple[str, str], list[PostActionItem]] = {}
        for item in current:
            if item.ref not in present:
                results[item.id] = PostActionResult(GONE, f"uid {item.ref} is no longer in {folder}")
            else:
                groups.setdefault((item.action, item.destination), []).append(item)
        for (action, destination), group in groups.items():
            uids = [item.ref for item in group]
            try:
                self._post_action(action, destination, uids)
            except FolderError as exc:
                outcome = PostActionResult(ERROR, str(exc))
            else:
                outcome = PostActionResult(DONE)
            results.update((item.id, outcome) for item in group)
        return results

    def _post_action(self, action: str, destination: str, uids: list[int]) -> None:
        if action == MARK_READ:
            with self._context():
                self.client.add_flags(uids, [SEEN], silent=True)
        elif action == MOVE:
            self._move(uids, destination)
        else:
            raise FolderError(f"{self._where()}: {action!r} is not an IMAP post-action (labels are Gmail's: move "
                              "or mark read instead)")

    def _move(self, uids: list[int], destination: str) -> None:
        if self.server_moves():
            with self._context():
                self.client.move(uids, destination)
            return
        with self._context():
            if not self.client.has_capability("UIDPLUS"):
                raise FolderError(f"{self._where()}: the server has neither MOVE nor UIDPLUS, so removing the "
                                  "messages would expunge every message marked deleted; mark them read instead")
            self.client.copy(uids, destination)
            self.client.add_flags(uids, [DELETED], silent=True)
            self.client.uid_expunge(uids)

    def server_moves(self) -> bool:
        """Whether the server has MOVE (RFC 6851)."""
        with self._context():
            return self.client.has_capability("MOVE")

    # -- IDLE (mailpoll.live) -----------------------------------------------------
    # The selected folder's IDLE (RFC 2177), each call under _context like every other command: a closed or
    # interrupted connection leaves as a ProviderError. Responses are imapclient's parsed untagged ones.

    def idle_supported(self) -> bool:
        with self._context():
            return self.client.has_capability("IDLE")

    def idle_start(self) -> list:
        """Enter IDLE; returns what the server sent along with its go-ahead.

        A server with news pending (mail that came during the last read) may send
        it in the same packet as ``+ idling``: imaplib has then read it into its
        buffer already, where the socket poll of ``idle_wait`` cannot see it, and
        it would wait for the next change. So what is buffered is read here.
        """
        with self._context():
            self.client.idle()
            return self._buffered_responses()

    def _buffered_responses(self) -> list:
        # imapclient's idle_check without its socket poll: whole lines already read, never a wait.
        sock = self.client.socket()
        sock.setblocking(False)
        responses = []
        try:
            while True:
                try:
                    line = self.client._imap._get_line()
                except OSError:  # nothing buffered, and nothing on the socket (TLS says so with an error)
                    break
                except IMAPClientAbortError as exc:
                    if "EOF" in str(exc):  # imaplib's word for "nothing to read" on a non-blocking socket
                        break
                    raise
                responses.append(_parse_untagged_response(line))
        finally:
            sock.setblocking(True)
            self.client._set_read_timeout()
        return responses

    def new_mail_during_read(self) -> bool:
        """Whether the server counted more messages, since this folder's SELECT, than the SELECT did.

        Such news arrives inside another command's answer (a SEARCH, a FETCH):
        imaplib keeps it aside, and the server does not say it again in IDLE.
        """
        counts = [int(count) for count in self.client._imap.untagged_responses.get("EXISTS", [])]
        return len(counts) > 1 and max(counts[1:]) > counts[0]

    def idle_wait(self, timeout: float) -> list:
        """What the server said within ``timeout`` seconds of IDLE; [] for nothing, and for a closed connection."""
        with self._context():
            return self.client.idle_check(timeout)

    def idle_end(self) -> list:
        """Leave IDLE (``DONE``); the responses that came since the last ``idle_wait``."""
        with self._context():
            return self.client.idle_done()[1]

    def noop(self) -> list:
        """A round trip that proves the connection alive; the untagged responses it brought."""
        with self._context():
            return self.client.noop()[1]

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


class XOAuth2:
    """One XOAUTH2 exchange (Google's and Microsoft's SASL mechanism), as imaplib's ``authenticate`` drives it.

    The token goes once, in answer to the server's first (empty) challenge. A refusal comes as a second
    challenge carrying a JSON error, which XOAUTH2 wants answered with an empty response before the NO;
    anything after that is aborted. (imapclient's ``oauth2_login`` answers every challenge with the token,
    so a refused token would cross the wire twice.)

    >>> mech = XOAuth2("ana@client.example", "ya29.t")
    >>> mech(b"")
    b'user=ana@client.example\\x01auth=Bearer ya29.t\\x01\\x01'
    >>> mech(b'{"status":"401","schemes":"bearer","scope":"mail"}'), mech.server_said
    (b'', 'status 401, scope mail')
    >>> mech(b"more?") is None
    True
    """

    # The JSON of a refusal is the server's: read only if short, and only these fields, this much of each.
    ERROR_FIELDS, FIELD_MAX, CHALLENGE_MAX = ("status", "scope"), 100, 4096

    def __init__(self, user: str, access_token: str):
        self._response = f"user={user}\1auth=Bearer {access_token}\1\1".encode()
        self._step = 0
        self.server_said = ""

    def __repr__(self) -> str:
        return f"<XOAuth2 step {self._step}>"  # never the token

    def __call__(self, challenge: bytes) -> bytes | None:
        self._step += 1
        if self._step == 1:
            return self._response
        if self._step == 2:
            if len(challenge) <= self.CHALLENGE_MAX:
                self.server_said = _refusal_said(challenge, self.ERROR_FIELDS, self.FIELD_MAX)
            return b""
        return None  # imaplib sends "*": the exchange is over, whatever the server goes on asking

    def login(self, client: BoundedIMAPClient) -> None:
        client.sasl_login("XOAUTH2", self)


def _refusal_said(challenge: bytes, fields: tuple[str, ...], limit: int) -> str:
    """What an XOAUTH2 error challenge says, for the mailbox's error: ``status 401, scope mail``, or ""."""
    try:
        said = json.loads(challenge)
    except (ValueError, RecursionError):
        return ""
    if not isinstance(said, dict):
        return ""
    return ", ".join(f"{key} {str(said[key])[:limit]}" for key in fields if key in said)


def internal_date(value) -> datetime | None:
    """An INTERNALDATE as imapclient parsed it (``normalise_times`` off), in UTC; None if it is not a date.

    >>> from datetime import timedelta, timezone
    >>> internal_date(datetime(2026, 6, 1, 9, 30, tzinfo=timezone(timedelta(hours=2))))
    datetime.datetime(2026, 6, 1, 7, 30, tzinfo=datetime.timezone.utc)
    >>> internal_date(datetime(2026, 6, 1, 9, 30)), internal_date(None), internal_date(b"garbage")
    (datetime.datetime(2026, 6, 1, 9, 30, tzinfo=datetime.timezone.utc), None, None)
    """
    if not isinstance(value, datetime):
        return None
    # RFC 3501 gives every INTERNALDATE a zone; one without is read as UTC, as RFC 5322 reads "-0000".
    return value.astimezone(UTC) if value.tzinfo is not None else value.replace(tzinfo=UTC)


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
