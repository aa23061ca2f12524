"""A TCP proxy on 127.0.0.1 that can cut its connections: "the server dropped us mid-FETCH"."""

from __future__ import annotations

import socket
import threading

from tests.support.loopback import HOST, Listener, close_socket, connect_upstream


class DroppingProxy:
    """A TCP proxy on 127.0.0.1 to an upstream server that can cut its connections.

    ``drop_all()`` closes every live connection now. ``cut_after(n, marker=b" FETCH (")``
    arms a one-shot trigger: the first connection whose server-to-client stream shows
    ``marker`` is closed after ``n`` more bytes, so the client sees EOF mid-response.
    Connections made after that pass through untouched (the "next cycle" succeeds).
    """

    def __init__(self, upstream_port: int, upstream_host: str = HOST):
        self.upstream = (upstream_host, upstream_port)
        self.accepted = 0
        self.cuts = 0
        self._lock = threading.Lock()
        self._live: set[tuple[socket.socket, socket.socket]] = set()
        self._trigger: tuple[bytes, int] | None = None
        self._cut_done = threading.Event()
        self._listener = Listener("dropping-proxy", self._accepted)
        self.host, self.port = self._listener.host, self._listener.port

    def __enter__(self) -> DroppingProxy:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def cut_after(self, nbytes: int, marker: bytes = b"") -> None:
        """Arm the one-shot cut: ``nbytes`` server bytes after ``marker`` (``b""``: from now)."""
        with self._lock:
            self._trigger = (marker, nbytes)
            self._cut_done.clear()

    def wait_cut(self, timeout: float = 10) -> bool:
        """True once the armed cut has happened."""
        return self._cut_done.wait(timeout)

    def drop_all(self) -> int:
        """Close every live connection (both sides); returns how many there were."""
        with self._lock:
            live, self._live = list(self._live), set()
        for pair in live:
            _close_pair(pair)
        return len(live)

    def close(self) -> None:
        self._listener.close()
        self.drop_all()

    def _accepted(self, client: socket.socket) -> None:
        upstream = connect_upstream(client, self.upstream)
        if upstream is None:
            return
        pair = (client, upstream)
        with self._lock:
            self.accepted += 1
            self._live.add(pair)
        threading.Thread(target=self._pump, args=(client, upstream, pair, False), daemon=True).start()
        threading.Thread(target=self._pump, args=(upstream, client, pair, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, pair, from_server: bool) -> None:
        # Per connection: None until it owns the armed trigger, then the bytes left to pass.
        remaining: int | None = None
        tail = b""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if from_server:
                    if remaining is None:
                        remaining, data_before, data = self._claim_trigger(tail + data, len(tail))
                        tail = (tail + data_before + data)[-64:]
                        dst.sendall(data_before)
                    if remaining is not None:
                        if len(data) >= remaining:
                            dst.sendall(data[:remaining])
                            with self._lock:
                                self.cuts += 1
                            self._cut_done.set()
                            break
                        remaining -= len(data)
                dst.sendall(data)
        except OSError:
            pass
        with self._lock:
            self._live.discard(pair)
        _close_pair(pair)

    def _claim_trigger(self, window: bytes, old: int) -> tuple[int | None, bytes, bytes]:
        """Split new server data at the armed marker if it shows up in ``window``.

        ``window`` is the last bytes already sent (``old`` of them) plus the new data,
        so a marker split across reads is found. Returns (bytes left before the cut or
        None, new data up to and including the marker, the rest of the new data).
        """
        new = window[old:]
        with self._lock:
            if self._trigger is None:
                return None, b"", new
            marker, nbytes = self._trigger
            # Only a marker that ends in the new data: one that passed before arming does not count.
            at = window.find(marker, max(old - len(marker) + 1, 0)) if marker else old
            if at < 0:
                return None, b"", new
            self._trigger = None
        split = max(at + len(marker) - old, 0)
        return nbytes, new[:split], new[split:]


def _close_pair(pair: tuple[socket.socket, socket.socket]) -> None:
    for sock in pair:
        close_socket(sock)
