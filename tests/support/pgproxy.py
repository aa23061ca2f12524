"""A TCP proxy on 127.0.0.1 in front of a PostgreSQL Unix socket, for faults on the path to the database.

- ``blackhole()``: every connection stays open but nothing passes either way
  (what the client sees of a server that stopped answering, or of a network
  that drops packets); ``restore()`` lets the held bytes through again.
- ``refuse()``: close every connection and every new one at once (the database
  is unreachable); ``restore()`` accepts again.
- ``drop()``: close every open connection now.
- ``hold_new()``: new connections are accepted but not connected upstream until
  ``restore()`` — a client stays inside its connect.

The embedded and private servers listen on a Unix socket only; through this
proxy a process reaches them at ``url(dbname)`` over TCP, so its fault is
independent of every other process's.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path

from tests.support.loopback import HOST, Listener, close_socket


class PgProxy:
    def __init__(self, socket_dir: str | Path, port: int = 5432):
        self.upstream = str(Path(socket_dir) / f".s.PGSQL.{port}")
        self._lock = threading.Lock()
        self._open = threading.Event()  # set: bytes flow
        self._open.set()
        self._connect = threading.Event()  # set: new connections go upstream
        self._connect.set()
        self._refusing = False
        self._live: set[socket.socket] = set()
        self.held = 0  # connections waiting in hold_new()
        self.accepted = 0
        self._listener = Listener("pg-proxy", self._accepted)
        self.port = self._listener.port

    def __enter__(self) -> PgProxy:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def url(self, dbname: str, user: str = "postgres", **query) -> str:
        tail = "&".join(f"{k}={v}" for k, v in query.items())
        return f"postgres://{user}@{HOST}:{self.port}/{dbname}" + (f"?{tail}" if tail else "")

    # -- faults ----------------------------------------------------------------------
    def blackhole(self) -> None:
        self._open.clear()

    def refuse(self) -> None:
        with self._lock:
            self._refusing = True
        self.drop()

    def drop(self) -> None:
        """Close every open connection (new ones are still accepted)."""
        with self._lock:
            live, self._live = list(self._live), set()
        for sock in live:
            close_socket(sock)

    def hold_new(self) -> None:
        self._connect.clear()

    def restore(self) -> None:
        with self._lock:
            self._refusing = False
        self._connect.set()
        self._open.set()

    def close(self) -> None:
        self.restore()
        self._listener.close()
        self.drop()

    # -- plumbing ----------------------------------------------------------------------
    def _accepted(self, client: socket.socket) -> None:
        threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with self._lock:
            self.accepted += 1
            refusing = self._refusing
        if refusing:
            close_socket(client)
            return
        if not self._connect.is_set():
            with self._lock:
                self.held += 1
            self._connect.wait()
            with self._lock:
                self.held -= 1
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(self.upstream)
        except OSError:
            close_socket(client)
            close_socket(upstream)
            return
        with self._lock:
            if self._refusing:
                close_socket(client)
                close_socket(upstream)
                return
            self._live.update((client, upstream))
        threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
        threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                self._open.wait()  # a blackhole holds what it read until restore()
                dst.sendall(data)
        except OSError:
            pass
        with self._lock:
            self._live.discard(src)
            self._live.discard(dst)
        close_socket(src)
        close_socket(dst)

