"""Fakes at the Google boundary: a service-account key, a loopback token endpoint, API responses.

The key is a real RSA key, so google-auth signs a real JWT; ``TokenServer`` checks
that signature and hands out a token, so the credentials' own refresh code runs.
API responses are ``(headers, body)`` pairs for ``googleapiclient.http.HttpMockSequence``.
"""

from __future__ import annotations

import base64
import functools
import json
import ssl
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.support.loopback import tls_files

ACCOUNT_EMAIL = "importer@seoinsight-test.iam.gserviceaccount.com"
ACCESS_TOKEN = "test-access-token"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
# The Search Console property of the tests' keyed targets.
PROPERTY = "https://www.example.com/"


@functools.cache
def _private_key() -> rsa.RSAPrivateKey:
    # Generated once per test run: 2048-bit generation takes a noticeable moment.
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def service_account_key(token_uri: str, email: str = ACCOUNT_EMAIL) -> dict:
    """A service-account key file's content, as Google issues it, pointing at ``token_uri``."""
    pem = _private_key().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return {
        "type": "service_account",
        "project_id": "seoinsight-test",
        "private_key_id": "0123456789abcdef",
        "private_key": pem,
        "client_email": email,
        "client_id": "100000000000000000001",
        "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        "token_uri": token_uri,
    }


def keyed_site_target(property_url: str, token_uri: str):
    """A SiteTarget of the Search Console property ``property_url``, whose key gets its tokens at ``token_uri``."""
    from tests.factories import SiteTargetFactory  # Django models: only once a test runs

    target = SiteTargetFactory(url_prefix=property_url, search_console_property=property_url)
    target.set_service_account(json.dumps(service_account_key(token_uri)))
    target.save()
    return target


def _b64decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def verify_jwt(assertion: str) -> dict:
    """The claims of an RS256 JWT signed with the test key; raises InvalidSignature otherwise."""
    header, payload, signature = assertion.split(".")
    _private_key().public_key().verify(
        _b64decode(signature), f"{header}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256()
    )
    return json.loads(_b64decode(payload))


class _LoopbackServer:
    """An HTTP server on 127.0.0.1, in a thread of its own: ``start()``, then ``stop()``.

    ``_listen(..., tls_dir=)`` serves HTTPS instead, with a certificate of ``loopback.tls_files``
    (``ca_file``: what a client must trust).
    """

    _scheme = "http"
    ca_file = ""

    def _listen(self, handler, *, name: str, port: int = 0, tls_dir: Path | None = None) -> None:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        if tls_dir is not None:
            ca_file, cert_file, key_file = tls_files(tls_dir)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert_file, key_file)
            # The handshake runs in each request's thread, not in the accepting one.
            self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True,
                                                     do_handshake_on_connect=False)
            self._scheme, self.ca_file = "https", str(ca_file)
        # A short poll interval: shutdown() waits up to one interval.
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=name, daemon=True)

    @property
    def _origin(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"{self._scheme}://{host}:{port}"

    def start(self):
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


class TokenServer(_LoopbackServer):
    """An OAuth token endpoint on 127.0.0.1 (ephemeral port), in a thread.

    ``grants`` records the claims of each JWT it accepted. With ``refuse`` set to a
    reason, it answers every request as Google does for a revoked key. ``hostile``
    (``tests.support.hostile_http`` answers) are sent, in order, instead of the next answers.
    """

    def __init__(self):
        self.grants: list[dict] = []
        self.refuse: str | None = None
        self.hostile: list = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                form = urllib.parse.parse_qs(self.rfile.read(length).decode())
                if server.hostile:
                    server.hostile.pop(0).send(self)
                    return
                status, body = server._answer(form)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format, *args):
                pass

        self._listen(Handler, name="token-server")

    @property
    def uri(self) -> str:
        return f"{self._origin}/token"

    def _answer(self, form: dict) -> tuple[int, dict]:
        if self.refuse:
            return 400, {"error": "invalid_grant", "error_description": self.refuse}
        if form.get("grant_type") != [JWT_BEARER]:
            return 400, {"error": "unsupported_grant_type", "error_description": str(form.get("grant_type"))}
        try:
            claims = verify_jwt(form["assertion"][0])
        except (KeyError, ValueError, InvalidSignature):
            return 400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}
        self.grants.append(claims)
        return 200, {"access_token": ACCESS_TOKEN, "expires_in": 3600, "token_type": "Bearer"}


# -- Search Analytics responses, for HttpMockSequence ---------------------------

def row(url: str, day: str | None = None, *, clicks=1, impressions=10, ctr=0.1, position=4.2) -> dict:
    """One response row; ``day`` ("YYYY-MM-DD") when the query has the date dimension."""
    return {"keys": [url, day] if day else [url], "clicks": clicks, "impressions": impressions,
            "ctr": ctr, "position": position}


def page(rows: list[dict]) -> tuple[dict, str]:
    """A successful query response; the API leaves ``rows`` out when there are none."""
    body = {"responseAggregationType": "byPage"}
    if rows:
        body["rows"] = rows
    return {"status": "200", "content-type": "application/json"}, json.dumps(body)


def api_error(status: int, message: str, retry_after: str | None = None) -> tuple[dict, str]:
    """An error response in Google's JSON error shape, optionally with ``Retry-After``."""
    headers = {"status": str(status), "content-type": "application/json"}
    if retry_after is not None:
        headers["retry-after"] = retry_after
    return headers, json.dumps({"error": {"code": status, "message": message, "status": "ERROR"}})


def query_bodies(http) -> list[dict]:
    """The JSON bodies of the queries an HttpMockSequence received, in order."""
    return [json.loads(body) for _, _, body, _ in http.request_sequence]


# -- A Search Analytics API on loopback, for faults of the network itself -------

class ApiServer(_LoopbackServer):
    """The Search Console API on 127.0.0.1, in a thread, for ``searchconsole_client.api_endpoint``.

    Each query gets the next of ``answers`` (``(headers, body)`` pairs, as ``page()``
    makes, or a ``tests.support.hostile_http`` answer). While ``drop`` is above zero, a query is read and its connection
    closed without a word (a proxy or load balancer giving up) and ``drop``
    goes down by one. ``port`` picks the port, e.g. one that refused
    connections until now (``free_port``). ``bodies`` records the queries answered.
    """

    def __init__(self, answers=(), *, drop: int = 0, port: int = 0):
        self.answers = list(answers)
        self.drop = drop
        self.dropped = 0
        self.bodies: list[dict] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                answer = server._next(json.loads(body or b"{}"))
                if answer is None:
                    self.close_connection = True
                    return
                if hasattr(answer, "send"):
                    answer.send(self)
                    return
                headers, content = answer
                data = content.encode()
                self.send_response(int(headers["status"]))
                for name, value in headers.items():
                    if name != "status":
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format, *args):
                pass

        self._listen(Handler, name="api-server", port=port)

    def _next(self, body: dict):
        with self._lock:
            if self.drop > 0:
                self.drop -= 1
                self.dropped += 1
                return None
            self.bodies.append(body)
            return self.answers.pop(0)

    @property
    def uri(self) -> str:
        return f"{self._origin}/"
