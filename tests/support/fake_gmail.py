"""A Gmail API on 127.0.0.1, with its token endpoint, for googleapiclient's real client.

It implements exactly what ``mailpoll.providers.gmail`` calls: ``POST /token`` (the
service-account JWT grant, checked against the test key, and the refresh-token grant),
``users.getProfile``, ``users.labels.list``, ``users.messages.list`` (``labelIds``, ``q=after:<epoch>``, paging),
``users.messages.get`` (``minimal``, ``metadata``, ``raw``), ``users.history.list``
(``startHistoryId``, ``labelId``, ``historyTypes``, paging), ``users.messages.modify`` (``addLabelIds``,
``removeLabelIds``: the labels change and, as Gmail does, a ``labelAdded`` and/or ``labelRemoved`` history
record is written) and ``POST /batch/gmail/v1`` (multipart/mixed).
With ``tls_dir``, it serves HTTPS with a certificate made for the run (``ca_file``). Every API call needs a
bearer token the endpoint issued; a batch part is authorized by its own
``Authorization`` header, the outer request's only for parts that carry none (Google's batch rule:
a part's header overrides the outer one).

Knobs, set between calls (the source's generators are lazy, so also between pages):
``oldest_history`` (a ``startHistoryId`` below it answers 404), ``throttle`` (answers given
to the next top-level calls instead of serving them: ``(status, reason)`` pairs, e.g.
``(429, "rateLimitExceeded")``; ``throttle_retry_after`` adds that ``Retry-After`` to each throttled
answer), ``part_throttle`` (the same for the next batch parts), ``batch_throttle`` (for the next
batch requests as a whole),
``size_estimates`` (a ``sizeEstimate`` other than the true size, per id), ``vanishing`` (ids
deleted once their ``format=minimal`` get is served: deleted between sizing and fetch), ``refuse``
(the token endpoint answers ``refuse_error``, ``invalid_grant`` unless told, with that description), ``max_page`` (pages are never longer, whatever
``maxResults`` asks: Gmail caps them too), ``after`` (callables given each ``Call`` once served: a
state change between two calls of one poll), ``stall()`` / ``resume()`` (requests are read but not
answered meanwhile: a server that stops answering). ``calls`` records what was served,
``token_requests`` how many requests the token endpoint got, ``assertions`` the JWTs it accepted,
``issued`` every access token it handed out (clear ``access_tokens`` to revoke them).

Scopes: a token has the scopes it was granted, a JWT's ``scope`` claim or ``refresh_scopes`` for the
refresh-token grant (None: any). ``delegated_scopes`` (None: any) is what the domain-wide delegation allows:
a JWT asking for more is refused as Google does (``unauthorized_client``). ``messages.modify`` needs
``gmail.modify`` (or full mail access) and answers a token without it 403 ``insufficientPermissions``;
``modify_errors`` (``(status, reason)`` pairs) are answered to the next modify calls instead of serving them.

Hostile knobs (issue 19): ``huge_raw`` (id -> bytes: that message's ``format=raw`` is that large, produced
while it is sent, never held), ``huge_labels`` (bytes of a ``labels.list`` answer, likewise),
``lying_length`` (the Content-Length announced for every answer with a produced part instead of the true
one; the connection closes after the body), ``redirect`` (answers ``(status, location)`` given to the next API calls, batches
included), ``token_redirect`` (the same for the token endpoint), ``token_status`` (the token endpoint
answers that status with an HTML page), ``answers`` (call name ``labels``, ``profile``, ``history``,
``messages``, ``batch``, ``token`` -> ``(status, content type, body)`` served instead; a body may be a list
of bytes and ``Streamed`` parts), ``history_extra`` (fields
put over every history answer's). ``requests`` counts every HTTP request received.
"""

from __future__ import annotations

import base64
import email.parser
import json
import re
import secrets
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from cryptography.exceptions import InvalidSignature

from tests.support.google import JWT_BEARER, _LoopbackServer, verify_jwt

API_PREFIX = "/gmail/v1/users/"
SYSTEM_LABELS = ("INBOX", "SENT", "SPAM", "TRASH", "DRAFT", "STARRED", "IMPORTANT", "UNREAD")
MODIFY_SCOPES = frozenset({"https://www.googleapis.com/auth/gmail.modify", "https://mail.google.com/"})
HISTORY_KINDS = {"messageAdded": "messagesAdded", "labelAdded": "labelsAdded", "labelRemoved": "labelsRemoved"}
MODIFY_PATH = re.compile(r"messages/([^/]+)/modify")
# How long a stalled request waits for resume() (or stop()) at most.
STALL_MAX = 60.0


@dataclass
class Streamed:
    """Part of an answer produced while it is sent: ``length`` bytes from ``chunks()``, never whole in memory."""

    length: int
    chunks: Callable[[], Iterator[bytes]]


def _length(pieces: list) -> int:
    return sum(p.length if isinstance(p, Streamed) else len(p) for p in pieces)


def huge_base64(head: bytes, size: int) -> Streamed:
    """Unpadded base64url of ``head`` followed by ``size - len(head)`` bytes of ``A``."""
    def chunks():
        block = b"A" * (3 * 65536)
        left, first = size, (head + b"A" * (-len(head) % 3)) or block
        piece = first[:left]
        while piece:
            left -= len(piece)
            yield base64.urlsafe_b64encode(piece).rstrip(b"=")
            piece = block[:left]
    return Streamed((4 * size + 2) // 3, chunks)


def huge_labels(size: int) -> list:
    """A ``labels.list`` answer of about ``size`` bytes."""
    item = b'{"id": "Label_9", "name": "' + b"x" * 200 + b'", "type": "user"}, '
    count = max(size // len(item), 1)
    count -= count % 256
    return [b'{"labels": [', Streamed(count * len(item), lambda: (item * 256 for _ in range(count // 256))),
            b'{"id": "INBOX", "name": "INBOX", "type": "system"}]}']


@dataclass
class FakeMessage:
    id: str
    raw: bytes
    labels: list[str]
    internal_ms: int
    history_id: int


@dataclass
class Call:
    """One API call served: ``batched`` when it came as a part of a batch."""

    method: str
    path: str
    query: dict
    batched: bool = False
    user: str = ""
    body: dict = field(default_factory=dict)  # a POST's JSON


@dataclass
class _State:
    next_history: int = 1000
    next_id: int = 0x18c0000000000000
    messages: dict = field(default_factory=dict)
    history: list = field(default_factory=list)  # (history id, message id, kind, labels changed), ascending


class FakeGmail(_LoopbackServer):
    def __init__(self, *, refresh_token: str | None = None, tls_dir: Path | None = None):
        self.state = _State()
        self.refresh_token = refresh_token
        self.access_tokens: set[str] = set()
        self.grants: list[dict] = []  # JWT claims, or {"refresh_token": ...}
        self.oldest_history = 0
        self.throttle: list[tuple[int, str]] = []
        self.part_throttle: list[tuple[int, str]] = []
        self.batch_throttle: list[tuple[int, str]] = []
        self.size_estimates: dict[str, int] = {}
        self.refuse: str | None = None
        self.refuse_error = "invalid_grant"
        self.vanishing: set[str] = set()
        self.throttle_retry_after: str | None = None
        self.max_page: int | None = None
        self.user_labels: dict[str, str] = {}  # id -> name
        self.after: list = []
        self.huge_raw: dict[str, int] = {}
        self.huge_labels = 0
        self.lying_length: int | None = None
        self.redirect: list[tuple[int, str]] = []
        self.token_redirect: list[tuple[int, str]] = []
        self.token_status: int | None = None
        self.answers: dict[str, tuple[int, str, bytes]] = {}
        self.history_extra: dict = {}
        self.requests = 0
        self.calls: list[Call] = []
        self.batch_sizes: list[int] = []
        self.token_requests = 0
        self.issued: list[str] = []  # every access token handed out, revoked or not
        self.assertions: list[str] = []
        self.delegated_scopes: set[str] | None = None
        self.refresh_scopes: str | None = None
        self.token_scopes: dict[str, set[str] | None] = {}  # access token -> its scopes (None: any)
        self.modify_errors: list[tuple[int, str]] = []
        self._answering = threading.Event()
        self._stopping = False
        self._answering.set()
        self._lock = threading.RLock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else every answer waits for the client's delayed ACK (40 ms)

            def do_GET(self):
                server.requests += 1
                if server._may_answer():
                    self._reply(*server._serve_top("GET", self.path, self.headers, b""))

            def do_POST(self):
                server.requests += 1
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if server._may_answer():
                    self._reply(*server._serve_top("POST", self.path, self.headers, body))

            def _reply(self, status, headers, data):
                pieces = data if isinstance(data, list) else [data]
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                lying = server.lying_length if any(isinstance(p, Streamed) for p in pieces) else None
                self.send_header("Content-Length", str(_length(pieces) if lying is None else lying))
                if lying is not None:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                try:
                    for piece in pieces:
                        for chunk in piece.chunks() if isinstance(piece, Streamed) else (piece,):
                            self.wfile.write(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client stopped reading: what a bound is for

            def log_message(self, format, *args):
                pass

        self._listen(Handler, name="fake-gmail", tls_dir=tls_dir)

    # -- for tests -------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        return f"{self._origin}/"

    @property
    def token_uri(self) -> str:
        return f"{self._origin}/token"

    @property
    def history_id(self) -> int:
        """The mailbox's current history id."""
        return self.state.next_history

    def add(self, raw: bytes, *, labels=("INBOX",), internal_ms: int = 1_700_000_000_000) -> str:
        """Deliver a message (a ``messageAdded`` history record); returns its id."""
        with self._lock:
            self.state.next_history += 7  # history ids grow, with gaps, as Gmail's do
            self.state.next_id += 1
            mid = f"{self.state.next_id:x}"
            self.state.messages[mid] = FakeMessage(mid, raw, list(labels), internal_ms, self.state.next_history)
            self.state.history.append((self.state.next_history, mid, "messageAdded", []))
            return mid

    def add_labels(self, mid: str, *labels: str) -> None:
        """Label a message (a ``labelAdded`` history record), e.g. moved out of Spam into the inbox."""
        with self._lock:
            self.state.next_history += 3
            self.state.messages[mid].labels.extend(labels)
            self.state.history.append((self.state.next_history, mid, "labelAdded", list(labels)))

    def add_label(self, name: str) -> str:
        """A user label; returns its id (``Label_<n>``, as Gmail names them)."""
        with self._lock:
            label_id = f"Label_{len(self.user_labels) + 1}"
            self.user_labels[label_id] = name
            return label_id

    def stall(self) -> None:
        """From now on, requests are read and left unanswered (until ``resume`` or ``stop``)."""
        self._answering.clear()

    def resume(self) -> None:
        self._answering.set()

    def stop(self) -> None:
        self._stopping = True
        self.resume()
        super().stop()

    def _may_answer(self) -> bool:
        """Wait while stalled; False if the server stopped meanwhile (the request is dropped unanswered)."""
        self._answering.wait(STALL_MAX)
        return not self._stopping

    def delete(self, mid: str) -> None:
        with self._lock:
            del self.state.messages[mid]

    def modified(self) -> list[Call]:
        """The ``messages.modify`` calls served (refused ones included)."""
        return [c for c in self.calls if c.method == "POST" and c.path.endswith("/modify")]

    def labels_of(self, mid: str) -> list[str]:
        return list(self.state.messages[mid].labels)

    def listings(self) -> list[Call]:
        """The ``messages.list`` calls served."""
        return [c for c in self.calls if c.path.endswith("/messages")]

    def served(self, path_part: str, *, fmt: str | None = None) -> list[Call]:
        return [c for c in self.calls if path_part in c.path and (fmt is None or c.query.get("format") == [fmt])]

    # -- serving -----------------------------------------------------------------

    def _serve_top(self, method, path, headers, body):
        with self._lock:
            url = urllib.parse.urlsplit(path)
            if url.path == "/token" and method == "POST":
                self.token_requests += 1
                if self.token_redirect:
                    return _redirect(*self.token_redirect.pop(0))
                if self.token_status is not None:
                    return self.token_status, {"Content-Type": "text/html"}, b"<html><b>Error</b> Backend</html>"
                if "token" in self.answers:
                    status, content_type, data = self.answers["token"]
                    return status, {"Content-Type": content_type}, data
                return self._token(urllib.parse.parse_qs(body.decode()))
            batch = url.path == "/batch/gmail/v1" and method == "POST"
            outer = headers.get("Authorization")
            if not batch and not self._authorized(outer):
                return _json(401, _error(401, "Request had invalid authentication credentials.", "authError"))
            if self.redirect:
                return _redirect(*self.redirect.pop(0))
            name = "batch" if batch else url.path[len(API_PREFIX):].partition("/")[2].partition("/")[0]
            if name in self.answers:
                status, content_type, data = self.answers[name]
                return status, {"Content-Type": content_type}, data
            if self.throttle:
                status, reason = self.throttle.pop(0)
                return self._throttled(status, reason)
            if batch:
                if self.batch_throttle:
                    status, reason = self.batch_throttle.pop(0)
                    return self._throttled(status, reason)
                return self._batch(headers.get("Content-Type", ""), body, outer)
            return self._api(method, url, batched=False, body=body, token=outer)

    def _throttled(self, status: int, reason: str):
        status, headers, data = _json(status, _error(status, "Rate limit exceeded", reason))
        if self.throttle_retry_after is not None:
            headers["Retry-After"] = self.throttle_retry_after
        return status, headers, data

    def _authorized(self, header: str | None) -> bool:
        return bool(header) and header.startswith("Bearer ") and header[7:] in self.access_tokens

    def _token(self, form: dict):
        if self.refuse:
            return _json(400, {"error": self.refuse_error, "error_description": self.refuse})
        grant = form.get("grant_type", [""])[0]
        if grant == JWT_BEARER:
            try:
                claims = verify_jwt(form["assertion"][0])
            except (KeyError, ValueError, InvalidSignature):
                return _json(400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."})
            scopes = set(str(claims.get("scope", "")).split())
            if self.delegated_scopes is not None and not scopes <= self.delegated_scopes:
                return _json(400, {"error": "unauthorized_client", "error_description": (
                    "Client is unauthorized to retrieve access tokens using this method, or client not authorized "
                    "for any of the scopes requested.")})
            self.grants.append(claims)
            self.assertions.append(form["assertion"][0])
        elif grant == "refresh_token" and self.refresh_token and form.get("refresh_token") == [self.refresh_token]:
            self.grants.append({"refresh_token": form["refresh_token"][0]})
            scopes = set(self.refresh_scopes.split()) if self.refresh_scopes is not None else None
        else:
            return _json(400, {"error": "invalid_grant", "error_description": "Bad Request"})
        token = "ya29.fake-" + secrets.token_urlsafe(24)
        self.token_scopes[token] = scopes
        self.access_tokens.add(token)
        self.issued.append(token)
        return _json(200, {"access_token": token, "expires_in": 3599, "token_type": "Bearer"})

    def _batch(self, content_type: str, body: bytes, outer: str | None):
        request = email.parser.BytesParser().parsebytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
        parts = request.get_payload()
        self.batch_sizes.append(len(parts))
        boundary = "batch_" + secrets.token_hex(8)
        out: list = []
        for part in parts:
            inner = part.get_payload()
            request_line, rest = inner.split("\n", 1)
            method, target, _ = request_line.strip().split(" ", 2)
            inner_request = email.parser.Parser().parsestr(rest)
            token = inner_request.get("Authorization") or outer
            if not self._authorized(token):
                status, headers, data = _json(401, _error(401, "Invalid Credentials", "authError"))
            elif self.part_throttle:
                code, reason = self.part_throttle.pop(0)
                status, headers, data = self._throttled(code, reason)
            else:
                status, headers, data = self._api(method, urllib.parse.urlsplit(target), batched=True,
                                                  body=inner_request.get_payload().encode(), token=token)
            content_id = part["Content-ID"].strip("<>")
            head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
            out.append(f"--{boundary}\r\nContent-Type: application/http\r\nContent-ID: <response-{content_id}>\r\n\r\n"
                       f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n{head}\r\n".encode())
            out += data if isinstance(data, list) else [data]
            out.append(b"\r\n")
        out.append(f"--{boundary}--\r\n".encode())
        return 200, {"Content-Type": f"multipart/mixed; boundary={boundary}"}, out

    def _api(self, method: str, url, *, batched: bool, body: bytes = b"", token: str | None = None):
        query = urllib.parse.parse_qs(url.query)
        user, _, rest = url.path[len(API_PREFIX):].partition("/")
        modify = MODIFY_PATH.fullmatch(rest) if method == "POST" else None
        if not url.path.startswith(API_PREFIX) or not (method == "GET" or modify):
            return _json(404, _error(404, "Not Found", "notFound"))
        try:
            change = json.loads(body) if modify else {}
        except ValueError:
            change = None
        call = Call(method, url.path, query, batched, urllib.parse.unquote(user),
                    change if isinstance(change, dict) else {})
        self.calls.append(call)
        if modify:
            answer = self._modify(urllib.parse.unquote(modify.group(1)), change, token)
        else:
            answer = self._answer(rest, query)
        for hook in self.after:
            hook(call)
        return answer

    def _answer(self, rest: str, query: dict):
        if rest == "labels":
            return self._labels()
        if rest == "profile":
            return _json(200, {"emailAddress": "user@example.com", "messagesTotal": len(self.state.messages),
                               "threadsTotal": len(self.state.messages), "historyId": str(self.history_id)})
        if rest == "messages":
            return self._list(query)
        if rest == "history":
            return self._history(query)
        if rest.startswith("messages/"):
            return self._get(urllib.parse.unquote(rest[len("messages/"):]), query.get("format", ["full"])[0])
        return _json(404, _error(404, "Not Found", "notFound"))

    def _modify(self, mid: str, change, token: str | None):
        if self.modify_errors:
            status, reason = self.modify_errors.pop(0)
            return _json(status, _error(status, _MESSAGES.get(reason, "Error"), reason))
        scopes = self.token_scopes.get(token[7:] if token else "")
        if scopes is not None and not scopes & MODIFY_SCOPES:
            return _json(403, _insufficient_scope())
        message = self.state.messages.get(mid)
        if message is None:
            return _json(404, _error(404, "Requested entity was not found.", "notFound"))
        add = change.get("addLabelIds") or [] if isinstance(change, dict) else None
        remove = change.get("removeLabelIds") or [] if isinstance(change, dict) else None
        if not isinstance(add, list) or not isinstance(remove, list):
            return _json(400, _error(400, "Invalid JSON payload received.", "invalidArgument"))
        unknown = [label for label in add + remove if label not in self._label_ids()]
        if unknown:
            return _json(400, _error(400, f"Invalid label: {unknown[0]}", "invalidArgument"))
        added = [label for label in dict.fromkeys(add) if label not in message.labels]
        removed = [label for label in dict.fromkeys(remove) if label in message.labels and label not in add]
        for kind, labels in (("labelAdded", added), ("labelRemoved", removed)):
            if labels:
                self.state.next_history += 2
                message.history_id = self.state.next_history
                self.state.history.append((self.state.next_history, mid, kind, labels))
        message.labels = [label for label in message.labels if label not in removed] + added
        return _json(200, {"id": mid, "threadId": mid, "labelIds": message.labels})

    def _label_ids(self) -> set[str]:
        used = {label for m in self.state.messages.values() for label in m.labels}
        return set(SYSTEM_LABELS) | set(self.user_labels) | used

    def _labels(self):
        if self.huge_labels:
            return 200, {"Content-Type": "application/json; charset=UTF-8"}, huge_labels(self.huge_labels)
        used = {label for m in self.state.messages.values() for label in m.labels}
        labels = [{"id": label, "name": label, "type": "system"} for label in SYSTEM_LABELS]
        labels += [{"id": label, "name": label, "type": "system"} for label in sorted(used - set(SYSTEM_LABELS))
                   if label not in self.user_labels]
        labels += [{"id": lid, "name": name, "type": "user"} for lid, name in self.user_labels.items()]
        return _json(200, {"labels": labels})

    def _list(self, query: dict):
        labels = set(query.get("labelIds", []))
        after = re.search(r"after:(\d+)", query.get("q", [""])[0])
        found = [m for m in self.state.messages.values() if labels <= set(m.labels)
                 and (after is None or m.internal_ms // 1000 > int(after.group(1)))]
        found.reverse()  # newest first, as Gmail lists them
        page, token = _page(found, query, lambda m: m.id, self.max_page)
        if page is None:
            return _json(400, _error(400, "Invalid pageToken", "invalidArgument"))
        body = {"resultSizeEstimate": len(page), "messages": [{"id": m.id, "threadId": m.id} for m in page]}
        if not page:
            del body["messages"]
        if token:
            body["nextPageToken"] = token
        return _json(200, body)

    def _history(self, query: dict):
        start = int(query["startHistoryId"][0])
        if start < self.oldest_history:
            return _json(404, _error(404, "Requested entity was not found.", "notFound"))
        label = query.get("labelId", [None])[0]
        kinds = set(query.get("historyTypes", [])) or set(HISTORY_KINDS)
        records = []
        for hid, mid, kind, changed in self.state.history:
            message = self.state.messages.get(mid)
            # A record is the label's when its message has the label, or when it is the label that changed.
            if hid <= start or kind not in kinds or (label and message is not None and label not in message.labels
                                                     and label not in changed):
                continue
            entry = {"message": {"id": mid, "threadId": mid, "labelIds": message.labels if message else []}}
            record = {"id": str(hid), "messages": [{"id": mid, "threadId": mid}]}
            record[HISTORY_KINDS[kind]] = [entry if kind == "messageAdded" else {**entry, "labelIds": changed}]
            records.append(record)
        page, token = _page(records, query, lambda r: r["id"], self.max_page)
        if page is None:
            return _json(400, _error(400, "Invalid pageToken", "invalidArgument"))
        body = {"historyId": str(self.history_id)}
        if page:
            body["history"] = page
        if token:
            body["nextPageToken"] = token
        return _json(200, {**body, **self.history_extra})

    def _get(self, mid: str, fmt: str):
        message = self.state.messages.get(mid)
        if message is None:
            return _json(404, _error(404, "Requested entity was not found.", "notFound"))
        body = {"id": mid, "threadId": mid, "labelIds": message.labels, "historyId": str(message.history_id),
                "internalDate": str(message.internal_ms),
                "sizeEstimate": self.size_estimates.get(mid, len(message.raw))}
        if fmt == "minimal" and mid in self.vanishing:
            del self.state.messages[mid]
        if fmt == "raw" and mid in self.huge_raw:
            status, headers, data = _json(200, body)
            head = message.raw.split(b"\r\n\r\n", 1)[0] + b"\r\n\r\n"
            return status, headers, [data[:-1] + b', "raw": "', huge_base64(head, self.huge_raw[mid]), b'"}']
        if fmt == "raw":
            body["raw"] = base64.urlsafe_b64encode(message.raw).decode().rstrip("=")
        elif fmt == "metadata":
            head = email.parser.BytesParser().parsebytes(message.raw, headersonly=True)
            body["payload"] = {"mimeType": head.get_content_type(),
                               "headers": [{"name": k, "value": str(v)} for k, v in head.items()]}
        return _json(200, body)


def _page(items: list, query: dict, key, max_page: int | None) -> tuple[list, str | None]:
    """A page of ``items``; the token names the last item served, so arrivals do not shift pages.

    ``(None, None)`` for a token naming no item (Gmail's "Invalid pageToken").
    """
    token = query.get("pageToken", [None])[0]
    keys = [key(item) for item in items]
    if token is not None and token not in keys:
        return None, None
    start = keys.index(token) + 1 if token is not None else 0
    end = start + min(int(query.get("maxResults", ["100"])[0]), max_page or 500)
    return items[start:end], (keys[end - 1] if end < len(items) else None)


_REASONS = {200: "OK", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 429: "Too Many Requests"}
_MESSAGES = {"backendError": "Internal error encountered.", "insufficientPermissions": "Insufficient Permission",
             "failedPrecondition": "Precondition check failed."}


def _error(status: int, message: str, reason: str) -> dict:
    return {"error": {"code": status, "message": message,
                      "errors": [{"message": message, "domain": "usageLimits", "reason": reason}]}}


def _insufficient_scope() -> dict:
    """Gmail's answer to a token without the scope a call needs (its ``details`` are what googleapiclient reads)."""
    return {"error": {"code": 403, "message": "Request had insufficient authentication scopes.",
                      "errors": [{"message": "Insufficient Permission", "domain": "global",
                                  "reason": "insufficientPermissions"}],
                      "status": "PERMISSION_DENIED",
                      "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                   "reason": "ACCESS_TOKEN_SCOPE_INSUFFICIENT", "domain": "googleapis.com",
                                   "metadata": {"service": "gmail.googleapis.com"}}]}}


def _redirect(status: int, location: str):
    return status, {"Location": location, "Content-Type": "text/html"}, b"<html>moved</html>"


def _json(status: int, body: dict):
    return status, {"Content-Type": "application/json; charset=UTF-8"}, json.dumps(body).encode()
