"""Hostile answers for the loopback fakes of ``tests/support/google.py``, and the host a redirect points to.

``Redirect``, ``Flood`` and ``Token`` are answers an ``ApiServer`` (among its ``answers``) or a ``TokenServer`` (its
``hostile``) sends instead of its own; ``Elsewhere`` records every request that reaches it.
"""

from __future__ import annotations

import gzip
import json
from http.server import BaseHTTPRequestHandler
from typing import NamedTuple

from tests.support.google import ACCESS_TOKEN, _LoopbackServer

# One row's worth of a Search Analytics answer, repeated: the flood looks like the API until it stops.
_ROW = b'{"keys": ["https://www.example.com/flood", "2026-10-01"], "clicks": 1, "impressions": 10},\n'
_CHUNK = 64 * 1024


class Redirect:
    """A redirect (``status``) to ``location``."""

    def __init__(self, location: str, status: int = 302):
        self.location, self.status = location, status

    def send(self, handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(self.status)
        handler.send_header("Location", self.location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()


class Flood:
    """A 200 of ``size`` JSON-looking bytes, produced while sent; ``sent`` counts what the client took.

    ``length``: the Content-Length announced ("true": the true one, "none": none, the close ends the body,
    "chunked": none, chunked transfer coding, or a number: a lie). ``compressed``: gzip-encoded (``size`` is then the decompressed size).
    """

    def __init__(self, size: int, *, length: str | int = "true", compressed: bool = False):
        self.size, self.length, self.compressed = size, length, compressed
        self.sent = 0

    def _chunks(self):
        block = _ROW * (_CHUNK // len(_ROW))
        left = self.size - len(b'{"rows": [\n')
        yield b'{"rows": [\n'
        while left > 0:
            yield block[:left]
            left -= len(block)

    def send(self, handler: BaseHTTPRequestHandler) -> None:
        chunks = [gzip.compress(b"".join(self._chunks()))] if self.compressed else self._chunks()
        true_length = len(chunks[0]) if self.compressed else self.size
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        if self.compressed:
            handler.send_header("Content-Encoding", "gzip")
        chunked = self.length == "chunked"
        if chunked:
            handler.send_header("Transfer-Encoding", "chunked")
        elif self.length != "none":
            handler.send_header("Content-Length", str(true_length if self.length == "true" else self.length))
        handler.send_header("Connection", "close")
        handler.close_connection = True
        handler.end_headers()
        try:
            for chunk in chunks:
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
                self.sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading: what a bound is for


class Token:
    """A token answer, whatever the request: queued before a hostile answer meant for a later token request."""

    def send(self, handler: BaseHTTPRequestHandler) -> None:
        data = json.dumps({"access_token": ACCESS_TOKEN, "expires_in": 3600, "token_type": "Bearer"}).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)


class Received(NamedTuple):
    method: str
    path: str
    authorization: str | None
    body: bytes


class Elsewhere(_LoopbackServer):
    """Another host on 127.0.0.1, where a redirect points: ``received`` records every request that reached it.

    It answers what passes for a token and for an empty page, so a client that followed the redirect goes on.
    """

    def __init__(self):
        self.received: list[Received] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _record(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                server.received.append(Received(self.command, self.path, self.headers.get("Authorization"), body))
                data = json.dumps({"access_token": "elsewhere-token", "expires_in": 3600,
                                   "token_type": "Bearer"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = _record

            def log_message(self, format, *args):
                pass

        self._listen(Handler, name="elsewhere-server")

    def url(self, path: str = "/") -> str:
        return f"{self._origin}{path}"
