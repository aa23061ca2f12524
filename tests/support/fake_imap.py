"""A small scripted IMAP server on 127.0.0.1 that misbehaves on purpose.

Dovecot is honest; these tests need a server that lies. ``FakeImapServer`` speaks
just enough IMAP4rev1 for the poller (greeting, CAPABILITY, LOGIN, EXAMINE, UID
SEARCH, UID FETCH of RFC822.SIZE / BODY.PEEK[] / BODY.PEEK[HEADER], NOOP, LOGOUT)
over a folder of messages, and can:

* announce an ``RFC822.SIZE`` other than the message's (``announce={uid: size}``);
* send a message's body as a quoted string instead of a literal (``quoted=True``);
* announce a literal of any size and then send nothing (``huge_literal={uid: size}``);
* answer a command with ``* OK`` lines every ``trickle_every`` seconds for ever
  (``trickle_on="EXAMINE"``; ``trickle_every=0``: as fast as it can), or never
  answer it (``hang_on="LOGIN"``), or accept connections and never even greet
  (``silent=True``).

It counts connections (``accepted``, ``open_now``, ``max_open``) so tests can see
how a client behaved, and closes every connection when it is closed.
"""

from __future__ import annotations

import re
import socket
import threading
import time

from tests.support.loopback import Listener, close_socket

UIDVALIDITY = 7
_COMMAND = re.compile(rb"^(\S+) (?:UID )?(\S+) ?(.*)$", re.IGNORECASE)


class FakeImapServer:
    def __init__(self, messages=(), *, announce=None, quoted=False, huge_literal=None, trickle_on=None,
                 trickle_every=0.2, hang_on=None, silent=False, password="secret"):
        self.messages = {uid: raw for uid, raw in enumerate(messages, start=1)}
        self.announce = dict(announce or {})
        self.quoted = quoted
        self.huge_literal = dict(huge_literal or {})
        self.trickle_on = trickle_on.upper() if trickle_on else None
        self.trickle_every = trickle_every
        self.hang_on = hang_on.upper() if hang_on else None
        self.silent = silent
        self.password = password
        self.accepted = 0
        self.open_now = 0
        self.max_open = 0
        self.commands: list[str] = []
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._closed = threading.Event()
        self._listener = Listener("fake-imap", self._accepted)
        self.host, self.port = self._listener.host, self._listener.port

    def __enter__(self) -> FakeImapServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            close_socket(conn)

    def wait_for_connections(self, n: int, timeout: float = 10) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.accepted >= n:
                return True
            time.sleep(0.02)
        return False

    # -- serving ------------------------------------------------------------------

    def _accepted(self, conn: socket.socket) -> None:
        with self._lock:
            self.accepted += 1
            self.open_now += 1
            self.max_open = max(self.max_open, self.open_now)
            self._conns.add(conn)
        threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            if self.silent:
                self._idle(conn)
                return
            conn.sendall(b"* OK [CAPABILITY IMAP4rev1 AUTH=PLAIN] fake IMAP ready\r\n")
            reader = conn.makefile("rb")
            while not self._closed.is_set():
                line = reader.readline()
                if not line:
                    return
                if not self._answer(conn, line.rstrip(b"\r\n")):
                    return
        except OSError:
            pass
        finally:
            with self._lock:
                self.open_now -= 1
                self._conns.discard(conn)
            close_socket(conn)

    def _idle(self, conn: socket.socket) -> None:
        """Hold the connection open, answering nothing, until the client or the test closes it."""
        while not self._closed.is_set():
            try:
                if not conn.recv(4096):
                    return
            except OSError:
                return

    def _trickle(self, conn: socket.socket) -> None:
        lines = b"* OK still working\r\n" * (1 if self.trickle_every else 1000)
        while not self._closed.is_set():
            conn.sendall(lines)
            if self.trickle_every:
                time.sleep(self.trickle_every)

    def _answer(self, conn: socket.socket, line: bytes) -> bool:
        match = _COMMAND.match(line)
        if not match:
            conn.sendall(b"* BAD unparsed\r\n")
            return True
        tag, command, args = match.group(1), match.group(2).upper().decode(), match.group(3)
        self.commands.append(command)
        if command == self.hang_on:
            self._idle(conn)
            return False
        if command == self.trickle_on:
            self._trickle(conn)
            return False
        ok = tag + b" OK done\r\n"
        if command == "CAPABILITY":
            conn.sendall(b"* CAPABILITY IMAP4rev1 AUTH=PLAIN\r\n" + ok)
        elif command == "LOGIN":
            good = args.split(b" ", 1)[-1].strip(b'"') == self.password.encode()
            conn.sendall(ok if good else tag + b" NO [AUTHENTICATIONFAILED] wrong\r\n")
        elif command in ("EXAMINE", "SELECT"):
            uidnext = max(self.messages, default=0) + 1
            conn.sendall(b"* %d EXISTS\r\n* 0 RECENT\r\n* FLAGS (\\Seen)\r\n* OK [UIDVALIDITY %d] ok\r\n"
                         b"* OK [UIDNEXT %d] ok\r\n" % (len(self.messages), UIDVALIDITY, uidnext)
                         + tag + b" OK [READ-ONLY] done\r\n")
        elif command == "SEARCH":
            uids = self._search(args)
            conn.sendall(b"* SEARCH" + b"".join(b" %d" % uid for uid in uids) + b"\r\n" + ok)
        elif command == "FETCH":
            self._fetch(conn, args)
            conn.sendall(ok)
        elif command == "LOGOUT":
            conn.sendall(b"* BYE bye\r\n" + ok)
            return False
        else:
            conn.sendall(ok)
        return True

    def _search(self, args: bytes) -> list[int]:
        match = re.search(rb"UID (\d+):\*", args)
        start = int(match.group(1)) if match else 1
        return [uid for uid in sorted(self.messages) if uid >= start]

    def _fetch(self, conn: socket.socket, args: bytes) -> None:
        uid_set, _, items = args.partition(b" ")
        for uid in _uids(uid_set, self.messages):
            seq = sorted(self.messages).index(uid) + 1
            raw = self.messages[uid]
            head = b"* %d FETCH (UID %d " % (seq, uid)
            if b"RFC822.SIZE" in items.upper():
                conn.sendall(head + b"RFC822.SIZE %d)\r\n" % self.announce.get(uid, len(raw)))
            elif b"HEADER" in items.upper():
                header = raw.split(b"\r\n\r\n", 1)[0].split(b"\n\n", 1)[0] + b"\r\n\r\n"
                conn.sendall(head + b"BODY[HEADER] {%d}\r\n" % len(header) + header + b")\r\n")
            elif uid in self.huge_literal:
                conn.sendall(head + b"BODY[] {%d}\r\n" % self.huge_literal[uid])
                self._idle(conn)  # a few bytes would change nothing: the client must refuse at the announcement
                return
            elif self.quoted:
                quoted = raw.replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\r", b"").replace(b"\n", b" ")
                conn.sendall(head + b'BODY[] "' + quoted + b'")\r\n')
            else:
                conn.sendall(head + b"BODY[] {%d}\r\n" % len(raw) + raw + b")\r\n")


def _uids(uid_set: bytes, messages: dict[int, bytes]) -> list[int]:
    wanted: list[int] = []
    top = max(messages, default=0)
    for part in uid_set.decode().split(","):
        if ":" in part:
            low, high = part.split(":")
            low_n, high_n = int(low), top if high == "*" else int(high)
            wanted.extend(uid for uid in sorted(messages) if min(low_n, high_n) <= uid <= max(low_n, high_n))
        elif int(part) in messages:
            wanted.append(int(part))
    return wanted
