"""An RFC 6749 token endpoint on 127.0.0.1 that refreshes, rotates, expires and revokes like Google or Microsoft.

``FakeTokenEndpoint("google")`` answers as oauth2.googleapis.com does (no rotation by default,
``{"error": "invalid_grant", "error_description": "Token has been expired or revoked."}``);
``FakeTokenEndpoint("microsoft")`` as login.microsoftonline.com's v2.0 endpoint (a new refresh token on every
refresh, AADSTS errors with ``error_codes``, trace and correlation ids). Rotation is strict — the replaced
refresh token is refused from then on, stricter than Microsoft — so a refresh that raced a rotation shows up
as ``invalid_grant`` instead of passing by luck. ``delay`` holds every refresh that long before it is
looked at, so that two concurrent refreshes are both in flight.

The authorization-code grant (RFC 6749 §4.1 with PKCE, RFC 7636) is there too, for the admin's Connect:
``GET`` on any path ending in ``/auth`` or ``/authorize`` plays the user at the consent screen (``consent``:
"grant" or an error such as "access_denied") and redirects back to the ``redirect_uri`` with a code, bound
to the request's client, redirect URI and S256 challenge. The token endpoint checks the verifier against
that challenge, refuses a code used twice, and answers with a refresh token ``grant()`` would have issued.
The account that consents is ``account`` if set, else the request's ``login_hint``, else ``user@example.com``:
Microsoft's answer carries it in an ``id_token`` (when ``openid`` was asked for), and ``GET
/gmail/v1/users/me/profile`` with a token the fake issued answers it as Gmail's ``getProfile`` does.
``exchange_delay`` holds every code exchange that long first, so that two callbacks are both in flight.
"""

from __future__ import annotations

import base64
import hashlib
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
        self.consent = "grant"  # what the user answers at the consent screen: "grant", or an error code
        self.authorizations: list[dict] = []  # the query of every authorization request, as received
        self.exchanges: list[dict] = []  # the form of every authorization_code request, as received
        self.exchange_delay = 0.0
        self.account: str | None = None  # who consents; None: the login_hint, else user@example.com
        self.accounts: dict[str, str] = {}  # access token -> the account it was issued for
        self.profiles: list[str] = []  # the account of every getProfile served
        self._codes: dict[str, dict] = {}  # code -> its binding, "used" once exchanged
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                url = urllib.parse.urlsplit(self.path)
                if url.path == "/gmail/v1/users/me/profile":
                    status, body = server._profile(self.headers.get("Authorization", ""))
                    data = json.dumps(body).encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                if not url.path.endswith(("/auth", "/authorize")):
                    self.send_error(404)
                    return
                query = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
                status, location = server._authorize(query)
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()

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
        if form.get("grant_type") == "authorization_code":
            time.sleep(self.exchange_delay)
            return self._exchange(form)
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

    def _authorize(self, query: dict) -> tuple[int, str]:
        """The consent screen: a redirect to ``redirect_uri`` with a code or an error, and the ``state``."""
        with self._lock:
            self.authorizations.append(dict(query))
            redirect = query.get("redirect_uri", "")
            if query.get("client_id") != CLIENT_ID or not redirect:
                return 400, ""
            answer = {"state": query.get("state", "")}
            if self.consent != "grant":
                answer.update(error=self.consent, error_description="The user denied the request.")
            elif query.get("response_type") != "code":
                answer.update(error="unsupported_response_type")
            else:
                code = ("4/0A" if self.flavour == "google" else "M.C5") + secrets.token_urlsafe(24)
                self._codes[code] = {"redirect_uri": redirect, "challenge": query.get("code_challenge", ""),
                                     "method": query.get("code_challenge_method", ""), "used": False,
                                     "account": self.account or query.get("login_hint") or "user@example.com"}
                answer["code"] = code
        return 302, f"{redirect}?{urllib.parse.urlencode(answer)}"

    def _exchange(self, form: dict) -> tuple[int, dict]:
        """RFC 6749 §4.1.3 with RFC 7636 §4.6: the code, its client, redirect URI and PKCE verifier."""
        with self._lock:
            self.exchanges.append(dict(form))
            if form.get("client_id") != CLIENT_ID or form.get("client_secret") != CLIENT_SECRET:
                if self.flavour == "google":
                    return 401, {"error": "invalid_client", "error_description": "Unauthorized"}
                return 401, self._error("invalid_client", None, 7000215)
            bound = self._codes.get(form.get("code", ""))
            if bound is None or bound["used"]:
                # A code is single use; one presented twice is refused (RFC 6749 §4.1.2).
                return 400, self._error("invalid_grant", "Malformed auth code.", 70000)
            bound["used"] = True
            if form.get("redirect_uri") != bound["redirect_uri"]:
                return 400, self._error("redirect_uri_mismatch", "Bad Request", 50011)
            if bound["method"] != "S256" or pkce_challenge(form.get("code_verifier", "")) != bound["challenge"]:
                return 400, self._error("invalid_grant", "Missing code verifier.", 501481)
            access = ("ya29." if self.flavour == "google" else "eyJ0") + secrets.token_urlsafe(40)
            self.issued.append(access)
            self.accounts[access] = bound["account"]
            body = {"access_token": access, "expires_in": self.expires_in, "token_type": "Bearer",
                    "refresh_token": self._new_refresh_token(), "scope": form.get("scope", "")}
            if self.flavour == "microsoft" and "openid" in form.get("scope", "").split():
                body["id_token"] = id_token({"aud": CLIENT_ID, "preferred_username": bound["account"],
                                             "name": "Test User", "tid": "organizations"})
            return 200, body

    def _profile(self, authorization: str) -> tuple[int, dict]:
        """Gmail's users.getProfile for the account the bearer token was issued for."""
        with self._lock:
            account = self.accounts.get(authorization.removeprefix("Bearer "))
            if account is None:
                return 401, {"error": {"code": 401, "message": "Invalid Credentials", "status": "UNAUTHENTICATED"}}
            self.profiles.append(account)
            return 200, {"emailAddress": account, "messagesTotal": 0, "threadsTotal": 0, "historyId": "1"}

    def _new_refresh_token(self) -> str:
        token = ("1//" if self.flavour == "google" else "0.A") + secrets.token_urlsafe(24)
        self.live[token] = "live"
        return token

    def _error(self, error: str, google_text: str | None, code: int) -> dict:
        if self.flavour == "google":
            return {"error": error, "error_description": google_text or error}
        return microsoft_error(error, code)


def id_token(claims: dict) -> str:
    """An OpenID Connect ID token as Microsoft's token endpoint hands it out (a JWT; the signature is a stand-in:
    a client that got it straight from the token endpoint over TLS need not check it, OIDC Core §3.1.3.7)."""
    def part(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode("ascii")

    return f"{part({'typ': 'JWT', 'alg': 'RS256', 'kid': 'test'})}.{part(claims)}.{part({'sig': 'none'})}"


def pkce_challenge(verifier: str) -> str:
    """RFC 7636 §4.2's S256 challenge of ``verifier``: what the fake compares, computed independently."""
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


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
