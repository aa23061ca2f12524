"""A TCP proxy on 127.0.0.1 that holds the server's answer at a chosen point: "the poller is right here".

``hold_at(marker)`` arms a one-shot gate: the first server-to-client chunk in which
``marker`` shows up (``b"* SEARCH"``, ``b" FETCH ("``) is kept back, so the client
waits inside that command, until ``release()``. The test acts meanwhile (a signal,
a kill) knowing exactly where the client is, without sleeping.
"""

from __future__ import annotations

import socket
import threading

from tests.support.loopback import HOST, Listener, close_socket, connect_upstream


class HoldingProxy:
    def __init__(self, upstream_port: int, upstream_host: str = HOST):
        self.upstream = (upstream_host, upstream_port)
        self._lock = threading.Lock()
        self._marker: bytes | None = None
        self._held = threading.Event()
        self._released = threading.Event()
        self._socks: list[socket.socket] = []
        self._listener = Listener("holding-proxy", self._accepted)
        self.host, self.port = self._listener.host, self._listener.port

    def __enter__(self) -> HoldingProxy:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def hold_at(self, marker: bytes) -> None:
        with self._lock:
            self._marker = marker
            self._held.clear()
            self._released.clear()

    def wait_held(self, timeout: float = 30) -> bool:
        """True once a chunk with the marker is being held."""
        return self._held.wait(timeout)

    def release(self) -> None:
        self._released.set()

    def close(self) -> None:
        self._released.set()
        self._listener.close()
        with self._lock:
            socks, self._socks = self._socks, []
        for sock in socks:
            close_socket(sock)

    def _accepted(self, client: socket.socket) -> None:
        upstream = connect_upstream(client, self.upstream)
        if upstream is None:
            return
        with self._lock:
            self._socks += [client, upstream]
        threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
        threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, from_server: bool) -> None:
        tail = b""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if from_server and self._claim(tail + data, len(tail)):
                    self._held.set()
                    self._released.wait()
                tail = (tail + data)[-64:]
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _claim(self, window: bytes, old: int) -> bool:
        """Whether this chunk holds the armed marker; ``window`` is the last bytes sent (``old`` of them) + it."""
        with self._lock:
            # Only a marker that ends in the new data: one that passed before arming does not count.
            if self._marker is None or window.find(self._marker, max(old - len(self._marker) + 1, 0)) < 0:
                return False
            self._marker = None
            return True
