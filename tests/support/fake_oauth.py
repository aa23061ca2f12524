"""An RFC 6749 token endpoint on 127.0.0.1 that refreshes, rotates, expires and revokes like Google or Microsoft.

``FakeTokenEndpoint("google")`` answers as oauth2.googleapis.com does (no rotation by default,
``{"error": "invalid_grant", "error_description": "Token has been expired or revoked."}``);
``FakeTokenEndpoint("microsoft")`` as login.microsoftonline.com's v2.0 endpoint (a new refresh token on every
refresh, AADSTS errors with ``error_codes``, trace and correlation ids). Rotation is strict — the replaced
refresh token is refused from then on, stricter than Microsoft — so a refresh that raced a rotation shows up
as ``invalid_grant`` instead of passing by luck. ``delay`` holds every refresh that long before it is
looked at, so that two concurrent refreshes are both in flight.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
import urllib.parse
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler

from tests.support.google import _LoopbackServer

CLIENT_ID = "seoinsight-test-client"
CLIENT_SECRET = "client-secret-" + "s3cr3t"

GOOGLE_REVOKED = "Token has been expired or revoked."
# Microsoft's texts, as its token endpoint writes them (dates filled in per answer).
MICROSOFT_MESSAGES = {
    700082: "The refresh token has expired due to inactivity. The token was issued on {issued} and was inactive "
            "for 90.00:00:00.",
    50173: "The provided grant has expired due to it being revoked, a fresh auth token is needed. The user might "
           "have changed or reset their password. The grant was issued on '{issued}' and the TokensValidFrom "
           "date (before which tokens are not valid) for this user is '{now}'.",
    50076: "Due to a configuration change made by your administrator, or because you moved to a new location, "
           "you must use multi-factor authentication to access '{client}'.",
    7000222: "The provided client secret keys for app '{client}' are expired.",
    70003: "The app requested an unsupported grant type.",
    70000: "The provided value for the 'refresh_token' is not valid.",
    7000215: "Invalid client secret provided. Ensure the secret being sent in the request is the client secret "
             "value, not the client secret ID, for a secret added to app '{client}'.",
}


class FakeTokenEndpoint(_LoopbackServer):
    """The token endpoint, in a thread. ``refreshes`` counts the refresh requests that reached it.

    ``grant()`` issues a refresh token; ``revoke(token)`` and ``expire_inactive(token)`` kill one the way the
    provider would; ``fail_next(status, body)`` queues raw answers sent before any check (5xx, 429, …).
    ``issued`` lists every access token handed out; ``live`` maps each refresh token to its fate.
    """

    def __init__(self, flavour: str = "google", *, rotate: bool | None = None, expires_in: int = 3599,
                 delay: float = 0.0):
        assert flavour in ("google", "microsoft")
        self.flavour, self.expires_in, self.delay = flavour, expires_in, delay
        self.rotate = flavour == "microsoft" if rotate is None else rotate
        self.live: dict[str, str] = {}  # refresh token -> "live" | "rotated" | "revoked" | "inactive"
        self.issued: list[str] = []
        self.refreshes = 0
        self.faults: list[tuple[int, dict | str]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                form = {k: v[0] for k, v in urllib.parse.parse_qs(self.rfile.read(length).decode()).items()}
                status, body = server._answer(form)
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/html" if isinstance(body, str) else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format, *args):
                pass

        self._listen(Handler, name=f"fake-oauth-{flavour}")

    @property
    def uri(self) -> str:
        path = "/token" if self.flavour == "google" else "/organizations/oauth2/v2.0/token"
        return self._origin + path

    # -- the test's controls ------------------------------------------------------------------------------

    def grant(self) -> str:
        with self._lock:
            return self._new_refresh_token()

    def revoke(self, token: str) -> None:
        with self._lock:
            self.live[token] = "revoked"

    def expire_inactive(self, token: str) -> None:
        with self._lock:
            self.live[token] = "inactive"

    def fail_next(self, status: int, body: dict | str | None = None) -> None:
        with self._lock:
            self.faults.append((status, body if body is not None else {"error": "server_error"}))

    def current_refresh_tokens(self) -> list[str]:
        with self._lock:
            return [t for t, fate in self.live.items() if fate == "live"]

    # -- answers ------------------------------------------------------------------------------------------

    def _answer(self, form: dict) -> tuple[int, dict | str]:
        with self._lock:
            if self.faults:
                return self.faults.pop(0)
        if form.get("grant_type") != "refresh_token":
            return 400, self._error("unsupported_grant_type", "Unsupported grant type.", 70003)
        if form.get("client_id") != CLIENT_ID or form.get("client_secret") != CLIENT_SECRET:
            if self.flavour == "google":
                return 401, {"error": "invalid_client", "error_description": "Unauthorized"}
            return 401, self._error("invalid_client", None, 7000215)
        # Outside the lock: two refreshes sent together are both in flight during the delay.
        time.sleep(self.delay)
        with self._lock:
            self.refreshes += 1
            token = form.get("refresh_token", "")
            fate = self.live.get(token)
            if fate != "live":
                code = {"inactive": 700082, "revoked": 50173}.get(fate, 70000)
                return 400, self._error("invalid_grant", GOOGLE_REVOKED if fate else "Bad Request", code)
            access = ("ya29." if self.flavour == "google" else "eyJ0") + secrets.token_urlsafe(40)
            self.issued.append(access)
            body = {"access_token": access, "expires_in": self.expires_in, "token_type": "Bearer",
                    "scope": form.get("scope", "https://mail.google.com/")}
            if self.flavour == "microsoft":
                body["ext_expires_in"] = self.expires_in
            if self.rotate:
                self.live[token] = "rotated"
                body["refresh_token"] = self._new_refresh_token()
            return 200, body

    def _new_refresh_token(self) -> str:
        token = ("1//" if self.flavour == "google" else "0.A") + secrets.token_urlsafe(24)
        self.live[token] = "live"
        return token

    def _error(self, error: str, google_text: str | None, code: int) -> dict:
        if self.flavour == "google":
            return {"error": error, "error_description": google_text or error}
        return microsoft_error(error, code)


def microsoft_error(error: str, code: int) -> dict:
    """An error body of Microsoft's token endpoint for AADSTS ``code``, as it writes them."""
    now = datetime.now(UTC)
    stamp = now.strftime("%Y-%m-%d %H:%M:%SZ")
    text = MICROSOFT_MESSAGES.get(code, error).format(issued="2026-01-01T00:00:00.0000000Z", now=now.isoformat(),
                                                      client=CLIENT_ID)
    trace, correlation = str(uuid.uuid4()), str(uuid.uuid4())
    return {
        "error": error,
        "error_description": f"AADSTS{code}: {text}\r\nTrace ID: {trace}\r\nCorrelation ID: {correlation}"
                             f"\r\nTimestamp: {stamp}",
        "error_codes": [code],
        "timestamp": stamp,
        "trace_id": trace,
        "correlation_id": correlation,
        "error_uri": f"https://login.microsoftonline.com/error?code={code}",
    }
