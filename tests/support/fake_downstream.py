"""A downstream system on 127.0.0.1 that the outbox sends to: scripted answers, dedup by Idempotency-Key.

``answers`` is consumed one per request: ``"ok"`` (200), an int (that status),
``"hang"`` (never answers until ``release()`` or close: a downstream that hangs),
``"redirect:<url>"`` (a 307 pointing there).
When the script is empty every request is answered 200. Each request is recorded
(``requests``); a key is recorded once in ``documents`` however often it comes
(the dedup a real downstream does), and ``overlaps`` counts the times a key
arrived while another request with the same key was still being answered.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .loopback import HOST


@dataclass
class Received:
    key: str
    document: dict
    file: bytes | None = None
    file_name: str | None = None
    headers: dict = field(default_factory=dict)


class FakeDownstream:
    def __init__(self, answers=(), delay: float = 0.0):
        self.answers = list(answers)
        self.delay = delay
        self.requests: list[Received] = []
        self.documents: dict[str, Received] = {}
        self.overlaps = 0
        self._in_flight: dict[str, int] = {}
        self._lock = threading.Lock()
        self._released = threading.Event()
        self.hanging = threading.Event()  # set once a request is being held
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                fake._handle(self)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer((HOST, 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://{HOST}:{self._server.server_address[1]}/documents"
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-downstream", daemon=True)
        self._thread.start()

    def release(self) -> None:
        """Let every held ("hang") request end (its answer is a 200 nobody may be waiting for)."""
        self._released.set()

    def close(self) -> None:
        self._released.set()
        self._server.shutdown()
        self._server.server_close()

    def keys(self) -> set[str]:
        return set(self.documents)

    def tries(self, key: str) -> int:
        return sum(1 for r in self.requests if r.key == key)

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        received = _parse(handler.headers, body)
        with self._lock:
            answer = self.answers.pop(0) if self.answers else "ok"
            self.requests.append(received)
            if self._in_flight.get(received.key):
                self.overlaps += 1
            self._in_flight[received.key] = self._in_flight.get(received.key, 0) + 1
        try:
            if answer == "hang":
                self.hanging.set()
                self._released.wait(60)
                return
            if self.delay:
                self._released.wait(self.delay)
            location = answer[len("redirect:"):] if str(answer).startswith("redirect:") else None
            status = 200 if answer == "ok" else 307 if location else int(answer)
            if status < 300:
                with self._lock:
                    first = received.key not in self.documents
                    self.documents.setdefault(received.key, received)
                payload = json.dumps({"duplicate": not first}).encode()
            else:
                payload = b'{"error": "scripted failure"}'
            try:
                handler.send_response(status)
                handler.send_header("Content-Type", "application/json")
                if location:
                    handler.send_header("Location", location)
                handler.send_header("Content-Length", str(len(payload)))
                handler.end_headers()
                handler.wfile.write(payload)
            except OSError:
                pass  # the sender gave up (timeout) or died
        finally:
            with self._lock:
                self._in_flight[received.key] -= 1


def _parse(headers, body: bytes) -> Received:
    key = headers.get("Idempotency-Key", "")
    kind = headers.get("Content-Type", "")
    if kind.startswith("multipart/"):
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {kind}\r\n\r\n".encode() + body)
        document, file, name = {}, None, None
        for part in message.iter_parts():
            field_name = part.get_param("name", header="content-disposition")
            if field_name == "document":
                document = json.loads(part.get_content() if part.get_content_maintype() == "text"
                                      else part.get_payload(decode=True))
            elif field_name == "file":
                file, name = part.get_payload(decode=True), part.get_filename()
        return Received(key, document, file, name, dict(headers))
    return Received(key, json.loads(body or b"{}"), headers=dict(headers))
