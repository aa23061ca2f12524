"""What the scripted servers and the proxies on 127.0.0.1 share: a listener that hands each connection on, and closing."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

HOST = "127.0.0.1"


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago: nothing listens there (yet), so connecting is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


class Listener:
    """A socket on 127.0.0.1 (a free port) whose accept thread hands each connection to ``on_accept(conn)``."""

    def __init__(self, name: str, on_accept: Callable[[socket.socket], None]):
        self._sock = socket.create_server((HOST, 0))
        self.host, self.port = HOST, self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._accept_loop, args=(on_accept,), name=name, daemon=True)
        self._thread.start()

    def close(self, timeout: float = 5) -> None:
        """Accept no more; returns once the accept thread is done with a connection it was handing on."""
        # close() alone does not wake a thread blocked in accept(); shutdown() does.
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._thread.join(timeout)

    def _accept_loop(self, on_accept: Callable[[socket.socket], None]) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            on_accept(conn)


def connect_upstream(client: socket.socket, address: tuple[str, int]) -> socket.socket | None:
    """A proxy's blocking connection to ``address`` for the accepted ``client``; None, ``client`` closed, if none."""
    try:
        upstream = socket.create_connection(address, timeout=5)
    except OSError:
        client.close()
        return None
    upstream.settimeout(None)
    return upstream


def close_socket(sock: socket.socket) -> None:
    """Shut down (which wakes a thread blocked on it) and close, whatever state the socket is in."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
