"""A private Dovecot IMAP server on 127.0.0.1 for the mail tests.

Debian's ``dovecot-imapd`` is started with a config of our own in a temporary
directory (tests/support/dovecot_setup.py: the binary, the users, the config); no
system service is involved. Users are added while it runs. Helpers open a short
imapclient session per call: tests set up a mailbox through the server exactly as
a mail client would.

``tests.support.tcpproxy.DroppingProxy`` sits between a client and the server to cut connections at a
chosen point (on demand, or after N bytes of a FETCH response): the deterministic
way to test "the server went away mid-fetch".
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import pytest
from imapclient import IMAPClient

from tests.support.dovecot_setup import DovecotUnavailable, config_text, dovecot_binary, oauth2_text, run_as
from tests.support.fake_introspection import FakeIntrospection
from tests.support.loopback import HOST, free_port

START_TIMEOUT = 10.0

_APPENDUID = re.compile(rb"\[APPENDUID (\d+) (\d+)\]")
_user_seq = itertools.count(1)


class DovecotServer:
    """A running private Dovecot: ``host``/``port`` for clients, helpers for test setup.

    Built by :func:`dovecot_server`, which owns start and stop. Passwords log in (PLAIN, LOGIN), and so do
    bearer tokens (XOAUTH2, OAUTHBEARER) that ``introspection`` (a running FakeIntrospection), if given,
    vouches for.
    """

    def __init__(self, root: Path, introspection: FakeIntrospection | None = None):
        self.root = root
        self.host = HOST
        self.port = 0
        self.introspection = introspection
        self.config_path = root / "dovecot.conf"
        self.oauth2_path = root / "dovecot-oauth2.conf.ext"
        self.log_path = root / "dovecot.log"
        self.passwords: dict[str, str] = {}
        self._proc: subprocess.Popen | None = None
        self._users_lock = threading.Lock()

    # -- lifecycle --------------------------------------------------------------

    def start(self, attempts: int = 3) -> None:
        """Start on a fresh free port; retried when another process took the port meanwhile."""
        binary = dovecot_binary()
        login_user, internal_user, mail_uid, mail_gid = run_as()
        for sub in ("mail", "home"):
            (self.root / sub).mkdir(exist_ok=True)
            os.chown(self.root / sub, mail_uid, mail_gid)
        (self.root / "users").mkdir(exist_ok=True)
        # mkdtemp makes it 0700; mail processes run as another uid and must reach mail/.
        self.root.chmod(0o755)

        oauth2 = None
        if self.introspection is not None:
            self.oauth2_path.write_text(oauth2_text(self.introspection.url))
            oauth2 = self.oauth2_path
        for attempt in range(attempts):
            self.port = free_port()
            self.config_path.write_text(config_text(self.root, self.port, login_user, internal_user, mail_uid,
                                                     mail_gid, oauth2))
            self.log_path.write_text("")
            with (self.root / "stderr.log").open("wb") as stderr:
                self._proc = subprocess.Popen(
                    [binary, "-F", "-c", str(self.config_path)],
                    stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True,
                )
            try:
                self._disable_auth_penalty()
                self._wait_ready()
                return
            except DovecotUnavailable:
                self.stop()
                if "Address already in use" not in self.log() or attempt == attempts - 1:
                    raise

    def _disable_auth_penalty(self) -> None:
        """Keep one failed login from slowing every later login from 127.0.0.1.

        Dovecot 2.3 delays logins from an IP after failed ones (anvil's auth penalty,
        2 s and up), and has no setting to turn that off for trusted networks. An auth
        process that finds no ``anvil-auth-penalty`` socket quietly does without, so
        the socket goes before the first connection starts the auth process.
        """
        socket_path = self.root / "run" / "anvil-auth-penalty"
        deadline = time.monotonic() + START_TIMEOUT
        while not socket_path.exists():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                return  # _wait_ready reports it
            time.sleep(0.01)
        socket_path.unlink()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                break
            try:
                with socket.create_connection((self.host, self.port), timeout=1) as sock:
                    greeting = sock.makefile("rb").readline()
                if greeting.startswith(b"* OK"):
                    return
            except OSError:
                pass
            time.sleep(0.02)
        raise DovecotUnavailable(
            f"dovecot did not greet on {self.host}:{self.port} "
            f"(exit code {self._proc.poll()}); its log:\n{self.log()}"
        )

    def stop(self) -> None:
        """SIGTERM the master (it takes its children down) and wait for it."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)

    def log(self) -> str:
        """Dovecot's log file, plus anything it printed before it could open the log."""
        parts = []
        for path in (self.root / "stderr.log", self.log_path):
            if path.exists():
                parts.append(path.read_text(errors="replace"))
        return "\n".join(p for p in parts if p)

    # -- users and sessions -------------------------------------------------------

    def add_user(self, name: str | None = None, password: str | None = None) -> tuple[str, str]:
        """Create a user (a unique name when none is given); returns ``(user, password)``."""
        name = name or f"user{os.getpid()}x{next(_user_seq)}"
        password = password or f"pw-{name}"
        for value in (name, password):
            if not value or any(c in value for c in ":\n\r\t "):
                raise ValueError(f"not usable in a passwd-file: {value!r}")
        with self._users_lock:
            if name in self.passwords:
                raise ValueError(f"user {name!r} exists already")
            (self.root / "users" / name).write_text(f"{name}:{{PLAIN}}{password}::::::\n")
            self.passwords[name] = password
        return name, password

    def connect(self, user: str, *, port: int | None = None, timeout: float = 10) -> IMAPClient:
        """A logged-in imapclient session (the caller logs out); ``port`` to go through a proxy."""
        client = IMAPClient(self.host, port=port or self.port, ssl=False, timeout=timeout)
        client.login(user, self.passwords[user])
        return client

    @contextmanager
    def session(self, user: str, folder: str | None = None, *, readonly: bool = False) -> Iterator[IMAPClient]:
        client = self.connect(user)
        try:
            if folder is not None:
                client.select_folder(folder, readonly=readonly)
            yield client
        finally:
            try:
                client.logout()
            except (IMAPClient.Error, OSError):
                pass  # the test may have broken the session on purpose

    # -- folders and messages -----------------------------------------------------

    def create_folder(self, user: str, folder: str) -> None:
        with self.session(user) as client:
            client.create_folder(folder)

    def delete_folder(self, user: str, folder: str) -> None:
        """Delete a folder and its messages (not INBOX: IMAP forbids it)."""
        with self.session(user) as client:
            client.delete_folder(folder)

    def recreate_folder(self, user: str, folder: str) -> tuple[int, int]:
        """Delete and create again, empty: returns (old, new) UIDVALIDITY, which differ."""
        old = self.uidvalidity(user, folder)
        self.delete_folder(user, folder)
        self.create_folder(user, folder)
        return old, self.uidvalidity(user, folder)

    def change_uidvalidity(self, user: str, folder: str) -> int:
        """Give a folder (INBOX too) a new UIDVALIDITY, messages and UIDs kept; returns it.

        What a server rebuild looks like to a client: the same UIDs now belong to a new
        generation (``doveadm mailbox update``). A session that has the folder selected
        is disconnected by Dovecot ("IMAP session state is inconsistent").
        """
        new = self.uidvalidity(user, folder) + 1
        self.doveadm("mailbox", "update", "-u", user, "--uid-validity", str(new), folder)
        return new

    def append(self, user: str, folder: str, raw: bytes, flags: Iterable = (),
               date: datetime | None = None) -> int:
        """APPEND one message; returns its UID (from Dovecot's APPENDUID response)."""
        return self.append_many(user, folder, [raw], flags=flags, date=date)[0]

    def append_many(self, user: str, folder: str, messages: Iterable[bytes], flags: Iterable = (),
                    date: datetime | None = None) -> list[int]:
        """APPEND several messages over one session; returns their UIDs in order."""
        flags = tuple(flags)
        uids = []
        with self.session(user) as client:
            for raw in messages:
                response = client.append(folder, raw, flags=flags, msg_time=date)
                match = _APPENDUID.search(response)
                assert match, f"no APPENDUID in {response!r}"
                uids.append(int(match.group(2)))
        return uids

    def expunge(self, user: str, folder: str, uids: Iterable[int]) -> None:
        """Remove these messages now (\\Deleted + UID EXPUNGE of exactly them)."""
        uids = list(uids)
        with self.session(user, folder) as client:
            client.add_flags(uids, [b"\\Deleted"])
            client.expunge(uids)

    def message_file(self, user: str, folder: str, uid: int) -> Path:
        """The Maildir file holding one message (through ``dovecot-uidlist``), to damage it on purpose.

        A file the mail processes cannot open (``chmod 000``; they do not run as root) makes
        Dovecot answer its FETCH with ``* BYE FETCH failed: Internal error occurred``.
        """
        maildir = self.root / "mail" / user
        if folder.upper() != "INBOX":
            maildir = maildir / f".{folder}"
        lines = (maildir / "dovecot-uidlist").read_text().splitlines()[1:]
        names = {int(line.split()[0]): line.split(":", 1)[1] for line in lines if ":" in line}
        base = names[uid].split(",")[0]
        [path] = [p for sub in ("new", "cur") for p in (maildir / sub).glob(f"{base}*")]
        return path

    def uids(self, user: str, folder: str) -> list[int]:
        with self.session(user, folder, readonly=True) as client:
            return sorted(client.search("ALL"))

    def flags(self, user: str, folder: str, uid: int) -> tuple[bytes, ...]:
        with self.session(user, folder, readonly=True) as client:
            return tuple(client.get_flags([uid]).get(uid, ()))

    def uidvalidity(self, user: str, folder: str) -> int:
        return self._status(user, folder, b"UIDVALIDITY")

    def message_count(self, user: str, folder: str) -> int:
        return self._status(user, folder, b"MESSAGES")

    def _status(self, user: str, folder: str, item: bytes) -> int:
        with self.session(user) as client:
            return int(client.folder_status(folder, [item])[item])

    # -- dropping clients ---------------------------------------------------------

    def doveadm(self, *args: str) -> subprocess.CompletedProcess:
        """Run ``doveadm`` against this server (same config, so the same sockets)."""
        return subprocess.run(
            ["doveadm", "-c", str(self.config_path), *args],
            capture_output=True, text=True, timeout=30, check=True,
        )

    def kick(self, user: str, timeout: float = 10) -> None:
        """Disconnect every IMAP session of ``user`` (``doveadm kick``); returns once they are gone.

        Each session's process gets SIGTERM, says ``* BYE`` and closes, so the client's
        next command fails (imaplib's ``abort``). ``doveadm kick`` only sends the signals:
        waiting for ``doveadm who`` to drop the user keeps a NOOP sent right after from
        racing the shutdown.
        """
        self.doveadm("kick", user)
        deadline = time.monotonic() + timeout
        while user in self.who():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{user}'s sessions still there {timeout}s after doveadm kick")
            time.sleep(0.02)

    def who(self) -> set[str]:
        """Users with an IMAP session open right now (``doveadm who``)."""
        lines = self.doveadm("who").stdout.splitlines()[1:]  # a header line first
        return {line.split()[0] for line in lines if line.strip()}


@contextmanager
def dovecot_server() -> Iterator[DovecotServer]:
    """Start a private Dovecot in a temporary directory; stop it and delete everything on exit.

    Its token introspection endpoint starts first: Dovecot's config names its URL.
    """
    root = Path(tempfile.mkdtemp(prefix="seoinsight-dovecot-"))
    introspection = FakeIntrospection().start()
    server = DovecotServer(root, introspection)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        introspection.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def dovecot() -> Iterator[DovecotServer]:
    """One Dovecot for the whole run; tests keep apart by using their own users (``add_user()``)."""
    with dovecot_server() as server:
        yield server
