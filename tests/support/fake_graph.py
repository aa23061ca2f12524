"""A loopback fake of Microsoft's identity platform and of the Graph mail endpoints the Graph source uses.

One HTTPS server on 127.0.0.1 (msal accepts only https authorities) with a
certificate made per run for that address: clients trust it through
``ca_file`` alone, so TLS stays verified. It serves the authority's OpenID
configuration and token endpoint (client credentials; refresh token with
strict rotation, revocation, short-lived access tokens) and, under ``/v1.0``, message delta per
folder, a message's internet headers, and its MIME ``$value``; the post-actions' changes (PATCH
``isRead``, POST ``move``) and the mail folder lists (top level, child folders). Knobs: page size, a
410 on a given delta page, expired tokens (also from a given request on), throttling
answers, a slow ``$value`` (to see concurrency) or one that never comes, a slow refresh
(to see two in flight), a revoked grant.

Rotation is strict: a refresh token that was rotated out is refused from then on
(``invalid_grant``, AADSTS70000), stricter than Microsoft, so a refresh that raced a
rotation, or a rotated token that was not saved, shows up instead of passing by luck.
A folder exists once a message was added to it, or by its well-known name, or once made by
``add_folder`` (listed by display name, and known by its id); any other answers as Graph does: 404
ErrorItemNotFound for an id, 400 ErrorInvalidIdMalformed for a name.

Delta reads a per-folder log of changes: a message added (created), its ``isRead`` changed
(updated), moved out (deleted: ``@removed``). A round reports what the request's ``changeType``
asks for, as Graph documents (all three without one); ``ignore_change_type`` reports them all
anyway, a Graph that does not honour it. A move gives the message a new id in its new folder, as
Graph's (mutable) ids do.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import secrets
import socket
import ssl
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass
from email.parser import BytesHeaderParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.support.loopback import Listener, tls_files

TENANT = "contoso-test"
CLIENT_ID = "11111111-2222-3333-4444-555555555555"
CLIENT_SECRET = "graph-client-secret-do-not-log"
USER = "inbox@contoso.test"
PID_TAG_MESSAGE_SIZE = "Integer 0x0E08"
# The well-known folders every mailbox has, by their display names (listed at the top level).
WELL_KNOWN_NAMES = {"inbox": "Inbox", "archive": "Archive", "deleteditems": "Deleted Items", "drafts": "Drafts",
                    "junkemail": "Junk Email", "sentitems": "Sent Items"}
WELL_KNOWN = frozenset(WELL_KNOWN_NAMES)
# The same API served under another path of the same host: a base URL the source was not configured with.
ELSEWHERE = "/elsewhere"


def _b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


@dataclass
class FakeMessage:
    id: str
    raw: bytes
    received: dt.datetime
    exchange_size: int | None = None  # PidTagMessageSize; None: the raw size
    is_read: bool = False


@dataclass(frozen=True)
class FakeFolder:
    id: str
    name: str  # displayName
    parent: str | None = None  # the parent folder's id; None: top level
    well_known: str | None = None

    @property
    def key(self) -> str:
        """Where its messages are kept in ``FakeGraph.folders``: its well-known name, else its id."""
        return self.well_known or self.id


class FakeGraph:
    """Start with ``FakeGraph()`` (it listens at once), ``stop()`` at the end.

    ``add(folder, raw, received=...)`` appends a message to a folder. Delta state
    tokens are positions in a folder's append-only log of changes, kept server-side by id.
    """

    def __init__(self, *, page_size: int = 10):
        self.folders: dict[str, list[FakeMessage]] = {}  # what each folder holds now
        self._log: dict[str, list[tuple[str, FakeMessage]]] = {}  # per folder: (created|updated|deleted, message)
        self.mail_folders: dict[str, FakeFolder] = {
            f"AAMkWK-{name}": FakeFolder(f"AAMkWK-{name}", display, None, name)
            for name, display in WELL_KNOWN_NAMES.items()}
        self.ignore_change_type = False  # delta reports every kind of change, whatever changeType asks for
        # (status, error code) a change (PATCH, move) answers instead of being made: of every message, or by id.
        self.refuse_change: tuple[int, str] | None = None
        self.refuse_change_of: dict[str, tuple[int, str]] = {}
        self.refuse_folders: tuple[int, str] | None = None  # (status, error code) every mail folder list answers
        self.page_size = page_size
        self.requests: list[tuple[str, str, dict]] = []  # (method, path, query), in order
        self.token_grants: list[dict] = []  # the token endpoint's accepted forms
        self.gone_on_page: int | None = None  # the delta request with this 1-based number answers 410
        self.throttle: list[tuple[int, str | None]] = []  # (status, Retry-After) answered before anything else
        self.value_delay = 0.0  # seconds each $value answer takes
        self.value_gate: threading.Event | None = None  # if set: $value answers wait for it (a Graph that hangs)
        self.refresh_delay = 0.0  # seconds each refresh-token grant takes (outside the lock: two in flight)
        # The Graph request with this 1-based number (throttled answers not counted) finds every access token
        # issued so far expired: a 401 in the middle of a poll.
        self.expire_access_on_request: int | None = None
        self.access_ttl = 3600
        self.revoked: str | None = None  # an AADSTS reason: every refresh-token grant is refused with it
        self.deleted: set[str] = set()  # ids still listed by delta but whose content is gone (404)
        self.refuse_value: dict[str, int] = {}  # message id -> the status its $value answers
        self.refuse_delta: tuple[int, str] | None = None  # (status, error code) every delta request answers
        self.refuse_delta_message = "Access is denied."
        # Hostile or broken answers (issue 19): a redirect on every delta request under /v1.0 (status, Location);
        # a raw 200 body for every delta request (not Graph's shape); links handed out under this base instead;
        # a raw 200 body for the header request; a delta page this many bytes long, streamed, never held.
        self.redirect_delta: tuple[int, str] | None = None
        self.delta_body: bytes | None = None
        self.links_base: str | None = None
        self.headers_body: bytes | None = None
        self.huge_delta_bytes = 0
        self.huge_sent = 0  # bytes of it written before the client hung up
        self.value_claimed_length: int | None = None  # the Content-Length every $value claims (a lie), then EOF
        self.token_redirect: tuple[int, str] | None = None  # (status, Location) the token endpoint answers
        self.token_answer_bytes = 0  # the token endpoint answers a JSON object this long, streamed
        self.inflight = 0
        self.peak_inflight = 0
        self._states: dict[str, tuple] = {}
        self._access: dict[str, float] = {}  # access token -> expiry (epoch)
        self._refresh: dict[str, str] = {}  # refresh token -> "live" | "rotated"
        self._delta_requests = 0
        self._graph_requests = 0
        self._serial = 0
        self._lock = threading.Lock()
        self._dir = tempfile.TemporaryDirectory(prefix="fake-graph-")
        ca_file, cert_file, key_file = tls_files(Path(self._dir.name))
        self.ca_file = str(ca_file)  # what a client trusts: this CA only
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        # The handshake runs in each request's thread, not in the accepting one.
        self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True,
                                                 do_handshake_on_connect=False)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-graph", daemon=True)
        self._thread.start()

    @property
    def origin(self) -> str:
        return f"https://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def authority(self) -> str:
        return f"{self.origin}/{TENANT}"

    @property
    def graph_url(self) -> str:
        return f"{self.origin}/v1.0"

    def stop(self) -> None:
        if self.value_gate is not None:
            self.value_gate.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
        self._dir.cleanup()

    def add(self, folder: str, raw: bytes, *, received: dt.datetime | None = None,
            exchange_size: int | None = None) -> FakeMessage:
        with self._lock:
            self._serial += 1
            message = FakeMessage(f"AAMk-{self._serial:04d}", raw,
                                  received or dt.datetime.now(dt.UTC), exchange_size)
            self._put(self._key(folder), message)
        return message

    def add_folder(self, name: str, parent: str | None = None) -> str:
        """A mail folder called ``name`` (under the folder of id ``parent``, or a well-known name); its id."""
        with self._lock:
            self._serial += 1
            fid = f"AAMkF-{self._serial:04d}"
            if parent is not None and parent.lower() in WELL_KNOWN:
                parent = f"AAMkWK-{parent.lower()}"
            self.mail_folders[fid] = FakeFolder(fid, name, parent)
            self.folders.setdefault(fid, [])
        return fid

    def folder_of(self, mid: str) -> str | None:
        """The key (well-known name, or id) of the folder that holds message ``mid`` now."""
        with self._lock:
            return next((key for key, messages in self.folders.items() if any(m.id == mid for m in messages)), None)

    def _key(self, segment: str) -> str:
        """The ``folders`` key of a folder named in a URL or a request: a well-known name, a known id, or as is."""
        if segment.lower() in WELL_KNOWN:
            return segment.lower()
        known = self.mail_folders.get(segment)
        return known.key if known else segment

    def _put(self, key: str, message: FakeMessage) -> None:
        self.folders.setdefault(key, []).append(message)
        self._log.setdefault(key, []).append(("created", message))

    def expire_state_tokens(self) -> None:
        """Forget every delta state: each link handed out so far answers 410 SyncStateNotFound."""
        with self._lock:
            self._states.clear()

    def grant_refresh_token(self) -> str:
        """A refresh token the endpoint accepts, as a user's consent at Connect time would give one."""
        token = f"rt-{secrets.token_urlsafe(24)}"
        with self._lock:
            self._refresh[token] = "live"
        return token

    def live_refresh_tokens(self) -> list[str]:
        """The refresh tokens the endpoint still accepts (the newest of each rotation chain)."""
        with self._lock:
            return [token for token, fate in self._refresh.items() if fate == "live"]

    def grants_of(self, grant_type: str) -> list[dict]:
        """The accepted token requests of one grant type (``client_credentials``, ``refresh_token``)."""
        with self._lock:
            return [form for form in self.token_grants if form.get("grant_type") == grant_type]

    @property
    def issued(self) -> list[str]:
        """Every access and refresh token handed out so far (for "never in logs")."""
        with self._lock:
            return [*self._access, *self._refresh]

    def requests_to(self, fragment: str) -> list[tuple[str, str, dict]]:
        return [r for r in self.requests if fragment in r[1]]

    # -- answers ----------------------------------------------------------------

    def _token_answer(self, refresh_token: str | None) -> dict:
        access = f"at-{secrets.token_urlsafe(24)}"
        self._access[access] = time.time() + self.access_ttl
        answer = {"token_type": "Bearer", "access_token": access, "expires_in": self.access_ttl,
                  "scope": "https://graph.microsoft.com/.default"}
        if refresh_token is not None:
            answer.update(refresh_token=refresh_token,
                          client_info=_b64({"uid": "user-oid", "utid": TENANT}),
                          id_token=f"{_b64({'alg': 'none'})}.{_b64(self._id_claims())}.")
        return answer

    def _id_claims(self) -> dict:
        now = int(time.time())
        return {"iss": f"{self.authority}/v2.0", "sub": "user-sub", "aud": CLIENT_ID, "exp": now + 3600,
                "iat": now, "oid": "user-oid", "tid": TENANT, "preferred_username": USER}

    def token(self, form: dict) -> tuple[int, dict]:
        grant = form.get("grant_type")
        if form.get("client_id") != CLIENT_ID or form.get("client_secret") != CLIENT_SECRET:
            return 401, {"error": "invalid_client", "error_description": "AADSTS7000215: Invalid client secret."}
        if grant == "refresh_token":
            time.sleep(self.refresh_delay)
        with self._lock:
            self.token_grants.append(form)
            if grant == "client_credentials":
                return 200, self._token_answer(None)
            if grant == "refresh_token":
                if self.revoked:
                    return 400, {"error": "invalid_grant", "error_description": self.revoked,
                                 "error_codes": [int(self.revoked.split(":")[0].removeprefix("AADSTS"))]}
                if self._refresh.get(form.get("refresh_token")) != "live":
                    return 400, {"error": "invalid_grant", "error_description": "AADSTS70000: unknown grant.",
                                 "error_codes": [70000]}
                rotated = f"rt-{secrets.token_urlsafe(24)}"  # Microsoft rotates on every refresh
                self._refresh[form["refresh_token"]] = "rotated"
                self._refresh[rotated] = "live"
                return 200, self._token_answer(rotated)
        return 400, {"error": "unsupported_grant_type", "error_description": str(grant)}

    def authorized(self, header: str | None) -> bool:
        token = (header or "").removeprefix("Bearer ")
        with self._lock:
            self._graph_requests += 1
            if self._graph_requests == self.expire_access_on_request:
                self._access = dict.fromkeys(self._access, 0.0)
            return self._access.get(token, 0) > time.time()

    def folder_error(self, folder: str) -> tuple[int, dict] | None:
        """Graph's answer for a folder the mailbox does not have; None if it has it."""
        with self._lock:
            if folder in self.folders or folder in WELL_KNOWN or folder in self.mail_folders:
                return None
        if folder.startswith("AAMk"):
            return 404, {"error": {"code": "ErrorItemNotFound", "message": "The specified object was not found in "
                                                                            "the store."}}
        return 400, {"error": {"code": "ErrorInvalidIdMalformed", "message": "Id is malformed."}}

    def delta(self, folder: str, query: dict, prefer: str, graph_url: str | None = None) -> tuple[int, dict]:
        with self._lock:
            self._delta_requests += 1
            if self.gone_on_page == self._delta_requests:
                self._states.clear()
            key = self._key(folder)
            log = self._log.get(key, [])
            # A state: (what is left to report of the round, the log position the round ends at, its options).
            if "$deltatoken" in query or "$skiptoken" in query:
                token = query.get("$deltatoken") or query.get("$skiptoken")
                if token == "latest":
                    state = ([], len(log), query)
                elif token in self._states:
                    state = self._states[token]
                else:
                    return 410, {"error": {"code": "SyncStateNotFound", "message":
                                           "The sync state generation is not found; generation=3;[highest=7]."}}
                if "$deltatoken" in query:  # a new round: the changes since
                    state = (self._changes(log, state[1], state[2]), len(log), state[2])
            else:  # a first round: what the folder holds now
                state = ([("created", m) for m in self.folders.get(key, [])], len(log), query)
            pending, end, options = state
            size = self.page_size
            if prefer.startswith("odata.maxpagesize="):
                size = min(size, int(prefer.split("=", 1)[1]))
            since = options.get("$filter", "").removeprefix("receivedDateTime ge ")
            since_at = dt.datetime.fromisoformat(since.replace("Z", "+00:00")) if since else None
            page, position = [], 0
            while position < len(pending) and len(page) < size:
                kind, message = pending[position]
                position += 1
                if kind != "created" or since_at is None or message.received >= since_at:
                    page.append(self._delta_item(kind, message, options))
            token = f"t{len(self._states) + 1}-{self._delta_requests}"
            base = f"{self.links_base or graph_url or self.graph_url}/users/{USER}/mailFolders/{folder}/messages/delta"
            body = {"@odata.context": "https://graph.microsoft.com/v1.0/$metadata#Collection(message)", "value": page}
            if position < len(pending):
                self._states[token] = (pending[position:], end, options)
                body["@odata.nextLink"] = f"{base}?$skiptoken={token}"
            else:
                self._states[token] = ([], end, options)
                body["@odata.deltaLink"] = f"{base}?$deltatoken={token}"
            return 200, body

    def _changes(self, log: list[tuple[str, FakeMessage]], start: int, options: dict) -> list[tuple[str, FakeMessage]]:
        """The log's changes from ``start``, one per message (created then updated is created), as asked for."""
        merged: dict[str, tuple[str, FakeMessage]] = {}
        for kind, message in log[start:]:
            if kind == "updated" and merged.get(message.id, ("",))[0] == "created":
                continue
            merged[message.id] = (kind, message)
        wanted = None if self.ignore_change_type else options.get("changeType")
        return [(kind, message) for kind, message in merged.values() if wanted in (None, kind)]

    def _delta_item(self, kind: str, message: FakeMessage, options: dict) -> dict:
        if kind == "deleted":
            return {"id": message.id, "@removed": {"reason": "deleted"}}
        if kind == "updated":  # what Graph sends of an updated message: its id and what changed
            return {"id": message.id, "isRead": message.is_read}
        item = {"id": message.id}
        if PID_TAG_MESSAGE_SIZE in options.get("$expand", ""):
            size = message.exchange_size if message.exchange_size is not None else len(message.raw)
            item["singleValueExtendedProperties"] = [{"id": PID_TAG_MESSAGE_SIZE, "value": str(size)}]
        return item

    # -- changes and folder lists ------------------------------------------------------

    def change_refusal(self, mid: str) -> tuple[int, dict] | None:
        refusal = self.refuse_change_of.get(mid) or self.refuse_change
        if refusal is None:
            return None
        status, code = refusal
        return status, {"error": {"code": code, "message": "Access is denied. Check credentials and try again."
                                  if status == 403 else "Something failed."}}

    def mark_read(self, mid: str, body) -> tuple[int, dict]:
        if not (isinstance(body, dict) and set(body) == {"isRead"} and isinstance(body["isRead"], bool)):
            return 400, {"error": {"code": "BadRequest", "message": "only isRead is expected here"}}
        with self._lock:
            key, message = self._find(mid)
            if message is None:
                return 404, _item_not_found()
            if message.is_read != body["isRead"]:
                message.is_read = body["isRead"]
                self._log[key].append(("updated", message))
            return 200, {"id": message.id, "isRead": message.is_read}

    def move(self, mid: str, body) -> tuple[int, dict]:
        destination = body.get("destinationId") if isinstance(body, dict) else None
        if not isinstance(destination, str) or not destination:
            return 400, {"error": {"code": "BadRequest", "message": "destinationId is required"}}
        with self._lock:
            key, message = self._find(mid)
            if message is None:
                return 404, _item_not_found()
            if not (destination.lower() in WELL_KNOWN or destination in self.mail_folders):
                if destination.startswith("AAMk"):
                    return 404, _item_not_found()
                return 400, {"error": {"code": "ErrorInvalidIdMalformed", "message": "Id is malformed."}}
            self.folders[key].remove(message)
            self._log[key].append(("deleted", message))
            self._serial += 1
            moved = FakeMessage(f"AAMk-{self._serial:04d}", message.raw, message.received, message.exchange_size,
                                message.is_read)
            self._put(self._key(destination), moved)
            return 201, {"id": moved.id, "isRead": moved.is_read}

    def list_folders(self, parent: str | None, query: dict, graph_url: str) -> tuple[int, dict]:
        """A page of the top-level folders (or ``parent``'s children), ``$top`` (default 10) from ``$skip``."""
        if self.refuse_folders:
            status, code = self.refuse_folders
            return status, {"error": {"code": code, "message": "Access is denied."}}
        with self._lock:
            if parent is not None:
                if parent.lower() in WELL_KNOWN:
                    parent = f"AAMkWK-{parent.lower()}"
                if parent not in self.mail_folders:
                    return 404, _item_not_found()
            children = [f for f in self.mail_folders.values() if f.parent == parent]
        top, skip = int(query.get("$top", 10)), int(query.get("$skip", 0))
        body = {"value": [{"id": f.id, "displayName": f.name} for f in children[skip:skip + top]]}
        if skip + top < len(children):
            listing = f"{self.links_base or graph_url}/users/{USER}/mailFolders" + (
                f"/{parent}/childFolders" if parent else "")
            body["@odata.nextLink"] = f"{listing}?$top={top}&$skip={skip + top}"
        return 200, body

    def _find(self, mid: str) -> tuple[str | None, FakeMessage | None]:
        if mid in self.deleted:
            return None, None
        for key, messages in self.folders.items():
            for message in messages:
                if message.id == mid:
                    return key, message
        return None, None

    def message(self, mid: str) -> FakeMessage | None:
        with self._lock:
            if mid in self.deleted:
                return None
            return next((m for folder in self.folders.values() for m in folder if m.id == mid), None)

    def headers_of(self, message: FakeMessage) -> dict:
        parsed = BytesHeaderParser().parsebytes(message.raw)
        return {"id": message.id,
                "internetMessageHeaders": [{"name": k, "value": str(v)} for k, v in parsed.items()]}


def _item_not_found() -> dict:
    return {"error": {"code": "ErrorItemNotFound", "message": "The specified object was not found in the store."}}


def _handler(fake: FakeGraph):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes: with Nagle's algorithm on, the body waits for the client's
        # delayed ACK, 40 ms a request, which Graph does not cost.
        disable_nagle_algorithm = True

        def do_GET(self):
            self._serve("GET")

        def do_POST(self):
            self._serve("POST")

        def do_PATCH(self):
            self._serve("PATCH")

        def _serve(self, method: str):
            # Read whatever the answer: a body left unread would be taken for the next request on the connection.
            self.body = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
            url = urllib.parse.urlsplit(self.path)
            query = dict(urllib.parse.parse_qsl(url.query))
            fake.requests.append((method, url.path, query))
            with fake._lock:
                fake.inflight += 1
                fake.peak_inflight = max(fake.peak_inflight, fake.inflight)
            try:
                self._route(method, url.path, query)
            finally:
                with fake._lock:
                    fake.inflight -= 1

        def _route(self, method: str, path: str, query: dict):
            if path == f"/{TENANT}/v2.0/.well-known/openid-configuration":
                base = f"{fake.authority}/oauth2/v2.0"
                return self._json(200, {"issuer": f"{fake.authority}/v2.0", "token_endpoint": f"{base}/token",
                                        "authorization_endpoint": f"{base}/authorize"})
            if method == "POST" and path == f"/{TENANT}/oauth2/v2.0/token":
                form = dict(urllib.parse.parse_qsl(self.body.decode()))
                if fake.token_redirect:
                    status, location = fake.token_redirect
                    return self._json(status, {}, {"Location": location})
                if fake.token_answer_bytes:
                    return self._huge(fake.token_answer_bytes, b'{"token_type": "Bearer", "pad": "',
                                      b'", "access_token": "at-huge", "expires_in": 3600}')
                return self._json(*fake.token(form))
            graph_url = fake.graph_url
            if path.startswith(ELSEWHERE + "/v1.0/"):
                path, graph_url = path.removeprefix(ELSEWHERE), fake.origin + ELSEWHERE + "/v1.0"
            elif fake.redirect_delta and path.endswith("/messages/delta"):
                status, location = fake.redirect_delta
                return self._json(status, {}, {"Location": location})
            if not path.startswith("/v1.0/"):
                return self._json(404, {"error": {"code": "NotFound", "message": path}})
            with fake._lock:
                throttled = fake.throttle.pop(0) if fake.throttle else None
            if throttled:
                status, retry_after = throttled
                return self._json(status, {"error": {"code": "TooManyRequests", "message": "Slow down."}},
                                  {"Retry-After": retry_after} if retry_after is not None else {})
            if not fake.authorized(self.headers.get("Authorization")):
                return self._json(401, {"error": {"code": "InvalidAuthenticationToken", "message": "expired"}})
            parts = path.split("/")  # '', 'v1.0', 'users', user, ...
            if len(parts) == 8 and parts[4] == "mailFolders" and parts[6:] == ["messages", "delta"]:
                if fake.refuse_delta:
                    status, code = fake.refuse_delta
                    return self._json(status, {"error": {"code": code, "message": fake.refuse_delta_message}})
                missing = fake.folder_error(parts[5])
                if missing:
                    return self._json(*missing)
                if fake.delta_body is not None:
                    return self._raw(200, fake.delta_body)
                if fake.huge_delta_bytes:
                    return self._huge_delta()
                return self._json(*fake.delta(parts[5], query, self.headers.get("Prefer", ""), graph_url))
            if method == "GET" and parts[4:5] == ["mailFolders"] and (
                    len(parts) == 5 or (len(parts) == 7 and parts[6] == "childFolders")):
                return self._json(*fake.list_folders(parts[5] if len(parts) == 7 else None, query, graph_url))
            if method in ("PATCH", "POST") and len(parts) >= 6 and parts[4] == "messages":
                return self._change(method, parts)
            message = fake.message(parts[5]) if len(parts) >= 6 and parts[4] == "messages" else None
            if message is None:
                return self._json(404, {"error": {"code": "ErrorItemNotFound", "message": "not found"}})
            if len(parts) == 6:
                if fake.headers_body is not None:
                    return self._raw(200, fake.headers_body)
                return self._json(200, fake.headers_of(message))
            if parts[6:] == ["$value"] and message.id in fake.refuse_value:
                return self._json(fake.refuse_value[message.id], {"error": {"code": "ErrorInternalServerError",
                                                                           "message": "Something failed."}})
            if parts[6:] == ["$value"]:
                time.sleep(fake.value_delay)
                if fake.value_gate is not None:
                    fake.value_gate.wait(30)
                self.send_response(200)
                self.send_header("Content-Type", "message/rfc822")
                self.send_header("Content-Length", str(fake.value_claimed_length or len(message.raw)))
                if fake.value_claimed_length:
                    self.close_connection = True  # the lie ends with the connection: the client sees EOF
                self.end_headers()
                self.wfile.write(message.raw)
                return None
            return self._json(400, {"error": {"code": "BadRequest", "message": path}})

        def _change(self, method: str, parts: list[str]):
            """PATCH a message (isRead), or POST its move."""
            mid = parts[5]
            try:
                body = json.loads(self.body or b"null")
            except ValueError:
                return self._json(400, {"error": {"code": "BadRequest", "message": "not JSON"}})
            if method == "PATCH" and len(parts) == 6:
                change = fake.mark_read
            elif method == "POST" and parts[6:] == ["move"]:
                change = fake.move
            else:
                return self._json(405, {"error": {"code": "MethodNotAllowed", "message": method}})
            refusal = fake.change_refusal(mid)
            if refusal:
                return self._json(*refusal)
            return self._json(*change(mid, body))

        def _huge_delta(self):
            """A 200 delta page of ``huge_delta_bytes``, written a megabyte at a time as the client reads it."""
            head = b'{"value": [{"id": "AAMk-huge", "pad": "'
            tail = b'"}], "@odata.deltaLink": "' + fake.graph_url.encode() + b'/x?$deltatoken=huge"}'
            return self._huge(fake.huge_delta_bytes, head, tail)

        def _huge(self, total: int, head: bytes, tail: bytes):
            """A 200 JSON answer of ``total`` bytes, padded between ``head`` and ``tail``, never held whole."""
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(total))
            self.close_connection = True
            self.end_headers()
            chunk = b"x" * (1 << 20)
            pad = total - len(head) - len(tail)
            try:
                self.wfile.write(head)
                while pad > 0:
                    self.wfile.write(chunk[:pad])
                    fake.huge_sent += min(pad, len(chunk))
                    pad -= len(chunk)
                self.wfile.write(tail)
            except OSError:
                pass  # the client stopped reading: what it should do

        def _raw(self, status: int, data: bytes):
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _json(self, status: int, body: dict, headers: dict | None = None):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format, *args):
            pass

    return Handler


class Sink:
    """Another host on the loopback (plain TCP, any port): it records every connection and the bytes sent on it.

    Where a redirect points: a client that follows it shows up in ``received`` (a request line, a body with
    a secret in it); one that refuses it leaves ``received`` empty.
    """

    def __init__(self):
        self.received: list[bytes] = []
        self._listener = Listener("graph-sink", self._take)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self._listener.port}"

    def _take(self, conn: socket.socket) -> None:
        conn.settimeout(2)
        data = b""
        try:
            while len(data) < 65536:
                more = conn.recv(65536)
                if not more:
                    break
                data += more
                if b"\r\n\r\n" in data and not data.startswith(b"POST"):
                    break
        except OSError:
            pass
        finally:
            conn.close()
            self.received.append(data)

    def stop(self) -> None:
        self._listener.close()
