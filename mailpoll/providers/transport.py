"""imaplib's connection, bounded against a hostile server, and interruptible.

Left alone, imaplib allocates a literal whole before reading it (``{4000000000}``
is a MemoryError), keeps every untagged line of a response in memory, and its
timeout is per socket read, so a server that trickles a line every few seconds
holds a poller for ever. Through a :class:`Channel`:

* a literal larger than ``max_literal`` is refused before any of it is read, and
  one command's response may bring at most ``max_response`` bytes; either refusal
  closes the connection (the stream cannot be resynchronised after it);
* every literal read is noted with the UID it belongs to, so the provider can
  check a message's real size against the size the server announced;
* ``interrupt()`` shuts the socket down from another thread, which wakes a
  connect, a read or a write blocked on it at once: the poller's deadline and
  SIGTERM go through it;
* the host is resolved once and only addresses ``destination`` allows are
  connected to, and a peer whose greeting is not IMAP's is :class:`NotImapServer`,
  whose message holds none of what the peer sent (a banner is not echoed).

The hooks are imaplib's overridable methods (``_create_socket``, ``read``,
``readline``, ``send``) and imapclient's ``_create_IMAP4``.
"""

from __future__ import annotations

import imaplib
import re
import socket
import threading
from dataclasses import dataclass

from imapclient import IMAPClient, imap4, tls

from . import destination

_UID = re.compile(rb"\bUID (\d+)", re.IGNORECASE)
LINE_COST = 64  # bytes


class ResponseTooLarge(imaplib.IMAP4.abort):
    """The server announced more than the limits allow; nothing of it was read, the connection is closed."""

    def __init__(self, message: str, *, size: int, uid: int | None):
        super().__init__(message)
        self.size = size
        self.uid = uid


class Interrupted(imaplib.IMAP4.abort):
    """The connection was shut down on purpose (``Channel.interrupt``)."""


class NotImapServer(imaplib.IMAP4.abort):
    """The peer's first words were not an IMAP greeting; what it said is dropped, not carried."""


@dataclass(frozen=True)
class Limits:
    max_literal: int
    max_response: int


class Channel:
    """One IMAP connection's socket and byte accounting, shared by the transport and the provider."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.reason: str | None = None  # why interrupt() was called; None while not interrupted
        self.refused: ResponseTooLarge | None = None  # the refusal that closed the connection, if one did
        self.literals: list[tuple[int | None, int]] = []  # (uid or None, size) of the current command
        self._received = 0
        self._uid: int | None = None
        self._lock = threading.Lock()
        self._handle: socket.socket | None = None  # a duplicate of the socket's descriptor

    # -- interruption ---------------------------------------------------------

    def interrupt(self, reason: str) -> None:
        """Wake whatever the connection's thread is blocked in; every later use of it fails."""
        with self._lock:
            if self.reason is None:
                self.reason = reason
            handle = self._handle
        if handle is not None:
            _shutdown(handle)

    def connect(self, host: str, port: int, timeout: float | None) -> socket.socket:
        """``socket.create_connection`` to the addresses ``destination`` allows, interruptible from before."""
        error: OSError | None = None
        # Resolved and checked once: the socket connects to the very address that was checked.
        for family, kind, proto, _, address in destination.addresses(host, port):
            sock = socket.socket(family, kind, proto)
            try:
                self._arm(sock)
                sock.settimeout(timeout)
                sock.connect(address)
                return sock
            except OSError as exc:
                sock.close()
                self._disarm()
                if self.reason is not None:
                    raise Interrupted(self.reason) from exc
                error = exc
        raise error or OSError(f"getaddrinfo returned nothing for {host}")

    def close(self) -> None:
        self._disarm()

    def _arm(self, sock: socket.socket) -> None:
        # A duplicate descriptor names the same socket, and outlives the object a TLS
        # wrap (at connect or STARTTLS) detaches: shutting it down reaches the
        # connection whatever wraps it now.
        handle = sock.dup()
        with self._lock:
            self._handle = handle
            reason = self.reason
        if reason is not None:
            raise Interrupted(reason)

    def _disarm(self) -> None:
        with self._lock:
            handle, self._handle = self._handle, None
        if handle is not None:
            handle.close()

    # -- accounting -------------------------------------------------------------

    def new_command(self) -> None:
        self._received = 0
        self.literals = []

    def line(self, line: bytes) -> None:
        if line.startswith(b"* "):
            match = _UID.search(line)
            self._uid = int(match.group(1)) if match else None
        elif match := _UID.search(line):
            self._uid = int(match.group(1))
        # Charged at least what Python holds for a short line kept in imaplib's lists.
        self._take(max(len(line), LINE_COST), "response")

    def literal(self, size: int) -> None:
        """Before a literal is read: refuse it if it is over a limit, else note it."""
        if size > self.limits.max_literal:
            self._refuse(f"the server sent a {size:,}-byte literal{_of(self._uid)}, over the "
                         f"{self.limits.max_literal:,}-byte message limit; refused unread", size, self._uid)
        self._take(size, "literal", uid=self._uid)
        self.literals.append((self._uid, size))

    def _take(self, size: int, what: str, uid: int | None = None) -> None:
        self._received += size
        if self._received > self.limits.max_response:
            self._refuse(f"one response brought over {self.limits.max_response:,} bytes (at a {size:,}-byte "
                         f"{what}{_of(uid)}); refused", size, uid)

    def _refuse(self, message: str, size: int, uid: int | None) -> None:
        # Kept here because imaplib re-raises an abort as a new one ("command: FETCH => ...").
        self.refused = ResponseTooLarge(message, size=size, uid=uid)
        self.interrupt("closed after a refused response")
        raise self.refused


def _of(uid: int | None) -> str:
    return f" for uid {uid}" if uid is not None else ""


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # not connected yet or already closed: the blocked call fails either way


class _Bounded:
    """imaplib's overridable I/O methods, through a Channel."""

    channel: Channel
    _timeout: float | None

    def _create_socket(self, timeout=None):
        return self.channel.connect(self.host, self.port, timeout if timeout is not None else self._timeout)

    def _connect(self):
        # imaplib's errors about the greeting quote the peer's line ("unexpected response: b'SSH-2.0-…'").
        try:
            super()._connect()
        except imaplib.IMAP4.error as exc:
            if self.channel.reason is not None or isinstance(exc, ResponseTooLarge):
                raise
            raise NotImapServer("not an IMAP server: its greeting is not IMAP's") from None

    def readline(self):
        line = super().readline()
        self.channel.line(line)
        return line

    def read(self, size):
        self.channel.literal(size)
        return super().read(size)

    def send(self, data):
        self.channel.new_command()
        super().send(data)


class _PlainIMAP4(_Bounded, imap4.IMAP4WithTimeout):
    def __init__(self, channel: Channel, host: str, port: int, timeout: float | None):
        self.channel = channel
        super().__init__(host, port, timeout)


class _TlsIMAP4(_Bounded, tls.IMAP4_TLS):
    def __init__(self, channel: Channel, host: str, port: int, ssl_context, timeout: float | None):
        self.channel = channel
        super().__init__(host, port, ssl_context, timeout)

    def _create_socket(self, timeout=None):
        return tls.wrap_socket(super()._create_socket(timeout), self.ssl_context, self.host)


class BoundedIMAPClient(IMAPClient):
    """An IMAPClient whose connection goes through ``channel``."""

    def __init__(self, host: str, *, channel: Channel, **kwargs):
        self._channel = channel
        super().__init__(host, **kwargs)

    def _create_IMAP4(self):
        timeout = getattr(self._timeout, "connect", None)
        if self.ssl:
            return _TlsIMAP4(self._channel, self.host, self.port, self.ssl_context, timeout)
        return _PlainIMAP4(self._channel, self.host, self.port, timeout)
