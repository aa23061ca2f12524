"""Misbehaving downstreams for the outbox's tests, built on tests/support/fake_downstream.py.

``HugeAnswer``: every POST is answered ``status`` with a body of ``size`` bytes,
generated chunk by chunk (never held), and counts the bytes it managed to send
before the client closed. ``Echo``: answers ``status`` with a body that repeats
the request target, query included (as many error pages do). ``Failing``: 500
while ``failing`` is set, then 200 (an outage that ends). ``KeepAlive``: HTTP/1.1
with keep-alive, as a real downstream speaks, acknowledging with a short or a long
body and counting the connections its POSTs came on.
"""

from __future__ import annotations

import threading

from tests.support.fake_downstream import FakeDownstream, _parse

CHUNK = b"x" * 65536


class HugeAnswer(FakeDownstream):
    def __init__(self, status: int = 200, size: int = 200 * 1024 * 1024):
        self.status, self.size = status, size
        self.sent = 0
        self.answered = threading.Event()  # set once an answer ended (sent whole, or the client left)
        super().__init__()

    def _handle(self, handler) -> None:
        handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        sent = 0
        try:
            handler.send_response(self.status)
            handler.send_header("Content-Type", "text/plain")
            handler.send_header("Content-Length", str(self.size))
            handler.end_headers()
            while sent < self.size:
                handler.wfile.write(CHUNK[: self.size - sent])
                sent += min(len(CHUNK), self.size - sent)
        except OSError:
            pass  # the client closed: what it did not read was never sent
        finally:
            with self._lock:
                self.sent += sent
            self.answered.set()


class Echo(FakeDownstream):
    def __init__(self, status: int = 404):
        self.status = status
        super().__init__()

    def _handle(self, handler) -> None:
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        with self._lock:
            self.requests.append(_parse(handler.headers, body))
        payload = f"no route for POST {handler.path}".encode()
        handler.send_response(self.status)
        handler.send_header("Content-Type", "text/plain")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)


class Failing(FakeDownstream):
    """500 to every request while ``failing`` is set; then the plain fake's behaviour (200, dedup by key)."""

    def __init__(self, **kwargs):
        self.failing = threading.Event()
        self.failing.set()
        self.failed = 0
        super().__init__(**kwargs)

    def _handle(self, handler) -> None:
        if self.failing.is_set():
            with self._lock:
                self.failed += 1
                self.answers.insert(0, 500)
        super()._handle(handler)


class KeepAlive:
    """An HTTP/1.1 downstream that acknowledges every POST with ``answer`` bytes and counts its connections."""

    def __init__(self, answer: bytes = b'{"ok": true}'):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        fake = self
        self.answer, self.connections, self.posts = answer, set(), 0

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802 - http.server's name
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                fake.connections.add(self.client_address)
                fake.posts += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(fake.answer)))
                self.end_headers()
                try:
                    self.wfile.write(fake.answer)
                except OSError:
                    self.close_connection = True  # the client closed without reading it all

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/documents"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
