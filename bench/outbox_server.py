"""The outbox benchmark's downstream: a loopback HTTP server, in its own process, that acknowledges at once.

    .venv/bin/python -m bench.outbox_server     # prints its port, serves until stdin closes

It mirrors tests/support/fake_downstream.py without its parsing: the body is
read whole (so the sender pays for sending it) and only counted, then 200 goes
back. Unlike the tests' fake it speaks HTTP/1.1 with keep-alive, as a real
downstream would, so a ``requests.Session`` reuses its connection. It runs in
a process of its own so neither the senders' nor the benchmark's Python
competes with it for a GIL.

It counts, per Idempotency-Key, the tries and the body bytes of the last one,
the multipart requests, and the times a key arrived while another request with
the same key was still being answered (``overlaps``): the benchmark's check that
every entry was delivered and none twice. ``GET /stats`` reads them, ``POST
/reset`` clears them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOST = "127.0.0.1"


class Counts:
    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.tries: dict[str, int] = {}
        self.body_bytes: dict[str, int] = {}
        self.multipart = 0
        self.overlaps = 0
        self.in_flight: dict[str, int] = {}

    def as_dict(self) -> dict:
        return {"requests": sum(self.tries.values()), "tries": self.tries, "body_bytes": self.body_bytes,
                "multipart": self.multipart, "overlaps": self.overlaps}


def make_handler(counts: Counts):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: every answer carries a Content-Length
        disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms wait between them

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path == "/reset":
                with counts.lock:
                    counts.reset()
                return self._answer(b"{}")
            key = self.headers.get("Idempotency-Key", "")
            with counts.lock:
                if counts.in_flight.get(key):
                    counts.overlaps += 1
                counts.in_flight[key] = counts.in_flight.get(key, 0) + 1
                counts.tries[key] = counts.tries.get(key, 0) + 1
                counts.body_bytes[key] = len(body)
                counts.multipart += self.headers.get("Content-Type", "").startswith("multipart/")
            try:
                self._answer(b'{"duplicate": false}')
            finally:
                with counts.lock:
                    counts.in_flight[key] -= 1

        def do_GET(self):
            with counts.lock:
                payload = json.dumps(counts.as_dict()).encode()
            self._answer(payload)

        def _answer(self, payload: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    return Handler


def serve() -> None:
    server = ThreadingHTTPServer((HOST, 0), make_handler(Counts()))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()  # the benchmark closes our stdin (or dies): stop
    server.shutdown()


class Downstream:
    """The server's process, seen from the benchmark: its URL, its counts, a reset; ``close`` ends it."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.outbox_server"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        port = int(self.proc.stdout.readline())
        self.base = f"http://{HOST}:{port}"
        self.url = f"{self.base}/documents"

    def stats(self) -> dict:
        with urllib.request.urlopen(f"{self.base}/stats", timeout=30) as answer:
            return json.load(answer)

    def reset(self) -> None:
        request = urllib.request.Request(f"{self.base}/reset", data=b"", method="POST")
        with urllib.request.urlopen(request, timeout=30):
            pass

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


if __name__ == "__main__":
    serve()
