"""An RFC 7662 token introspection endpoint on 127.0.0.1: how the test Dovecot validates XOAUTH2 bearer tokens.

Dovecot's ``oauth2`` passdb (``introspection_mode = post``) POSTs ``token=<access token>`` here and logs the
user in when the answer says ``{"active": true, "username": <the login's user>}``. A token is active when a
``tests.support.fake_oauth.FakeTokenEndpoint`` that ``trust()`` ties to a user issued it (its ``issued``
list) and the test has not ``refuse()``d it: the same tokens the production code refreshed, so a token the
poller never obtained can never log in. Everything else is ``{"active": false}``.

Started once per test session, before Dovecot, whose config holds its URL (``tests.support.dovecot``).
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler

from tests.support.google import _LoopbackServer

PATH = "/introspect"


class FakeIntrospection(_LoopbackServer):
    """The endpoint, in a thread. ``asked`` counts introspections (never the tokens themselves)."""

    def __init__(self):
        self._issuers: list[tuple[object, str]] = []  # (FakeTokenEndpoint, username)
        self._refused: set[str] = set()
        self.asked = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                form = urllib.parse.parse_qs(self.rfile.read(length).decode())
                body = json.dumps(server._answer(form.get("token", [""])[0])).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format, *args):
                pass

        self._listen(Handler, name="fake-introspection")

    @property
    def url(self) -> str:
        return self._origin + PATH

    def trust(self, endpoint, username: str) -> None:
        """Access tokens ``endpoint`` (a FakeTokenEndpoint) issues from now on log in as ``username``."""
        with self._lock:
            self._issuers.append((endpoint, username))

    def forget(self, endpoint) -> None:
        """Stop trusting ``endpoint``'s tokens (a test's teardown)."""
        with self._lock:
            self._issuers = [(e, u) for e, u in self._issuers if e is not endpoint]

    def refuse(self, token: str) -> None:
        """This token is dead at the mail server (a revoked session), whatever its expiry says."""
        with self._lock:
            self._refused.add(token)

    def _answer(self, token: str) -> dict:
        with self._lock:
            self.asked += 1
            if not token or token in self._refused:
                return {"active": False}
            for endpoint, username in self._issuers:
                if token in endpoint.issued:
                    return {"active": True, "username": username, "token_type": "Bearer"}
        return {"active": False}
