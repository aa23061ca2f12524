"""A Gmail API on 127.0.0.1, with its token endpoint, for googleapiclient's real client.

It implements exactly what ``mailpoll.providers.gmail`` calls: ``POST /token`` (the
service-account JWT grant, checked against the test key, and the refresh-token grant),
``users.getProfile``, ``users.messages.list`` (``labelIds``, ``q=after:<epoch>``, paging),
``users.messages.get`` (``minimal``, ``metadata``, ``raw``), ``users.history.list``
(``startHistoryId``, ``labelId``, paging) and ``POST /batch/gmail/v1`` (multipart/mixed).
Every API call needs a bearer token the endpoint issued.

Knobs, set between calls (the source's generators are lazy, so also between pages):
``oldest_history`` (a ``startHistoryId`` below it answers 404), ``throttle`` (answers given
to the next top-level calls instead of serving them: ``(status, reason)`` pairs, e.g.
``(429, "rateLimitExceeded")``), ``part_throttle`` (the same for the next batch parts), ``batch_throttle`` (for the next
batch requests as a whole),
``size_estimates`` (a ``sizeEstimate`` other than the true size, per id), ``vanishing`` (ids
deleted once their ``format=minimal`` get is served: deleted between sizing and fetch), ``refuse``
(the token endpoint answers ``invalid_grant``). ``calls`` records what was served.
"""

from __future__ import annotations

import base64
import email.parser
import json
import re
import secrets
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from cryptography.exceptions import InvalidSignature

from tests.support.google import JWT_BEARER, _LoopbackServer, verify_jwt

API_PREFIX = "/gmail/v1/users/"


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


@dataclass
class _State:
    next_history: int = 1000
    next_id: int = 0x18c0000000000000
    messages: dict = field(default_factory=dict)
    history: list = field(default_factory=list)  # (history id, message id, kind, labels added), ascending


class FakeGmail(_LoopbackServer):
    def __init__(self, *, refresh_token: str | None = None):
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
        self.vanishing: set[str] = set()
        self.calls: list[Call] = []
        self.batch_sizes: list[int] = []
        self._lock = threading.RLock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                self._reply(*server._serve_top("GET", self.path, self.headers, b""))

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self._reply(*server._serve_top("POST", self.path, self.headers, body))

            def _reply(self, status, headers, data: bytes):
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format, *args):
                pass

        self._listen(Handler, name="fake-gmail")

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

    def delete(self, mid: str) -> None:
        with self._lock:
            del self.state.messages[mid]

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
                return self._token(urllib.parse.parse_qs(body.decode()))
            if not self._authorized(headers.get("Authorization")):
                return _json(401, _error(401, "Request had invalid authentication credentials.", "authError"))
            if self.throttle:
                status, reason = self.throttle.pop(0)
                return _json(status, _error(status, "Rate limit exceeded", reason))
            if url.path == "/batch/gmail/v1" and method == "POST":
                if self.batch_throttle:
                    status, reason = self.batch_throttle.pop(0)
                    return _json(status, _error(status, "Rate limit exceeded", reason))
                return self._batch(headers.get("Content-Type", ""), body)
            return self._api(method, url, batched=False)

    def _authorized(self, header: str | None) -> bool:
        return bool(header) and header.startswith("Bearer ") and header[7:] in self.access_tokens

    def _token(self, form: dict):
        if self.refuse:
            return _json(400, {"error": "invalid_grant", "error_description": self.refuse})
        grant = form.get("grant_type", [""])[0]
        if grant == JWT_BEARER:
            try:
                self.grants.append(verify_jwt(form["assertion"][0]))
            except (KeyError, ValueError, InvalidSignature):
                return _json(400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."})
        elif grant == "refresh_token" and self.refresh_token and form.get("refresh_token") == [self.refresh_token]:
            self.grants.append({"refresh_token": form["refresh_token"][0]})
        else:
            return _json(400, {"error": "invalid_grant", "error_description": "Bad Request"})
        token = "ya29.fake-" + secrets.token_urlsafe(24)
        self.access_tokens.add(token)
        return _json(200, {"access_token": token, "expires_in": 3599, "token_type": "Bearer"})

    def _batch(self, content_type: str, body: bytes):
        request = email.parser.BytesParser().parsebytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
        parts = request.get_payload()
        self.batch_sizes.append(len(parts))
        boundary = "batch_" + secrets.token_hex(8)
        out = []
        for part in parts:
            inner = part.get_payload()
            request_line, rest = inner.split("\n", 1)
            method, target, _ = request_line.strip().split(" ", 2)
            inner_headers = email.parser.Parser().parsestr(rest, headersonly=True)
            if inner_headers.get("Authorization") and not self._authorized(inner_headers["Authorization"]):
                status, _, data = _json(401, _error(401, "Invalid Credentials", "authError"))
            elif self.part_throttle:
                code, reason = self.part_throttle.pop(0)
                status, _, data = _json(code, _error(code, "Rate limit exceeded", reason))
            else:
                status, _, data = self._api(method, urllib.parse.urlsplit(target), batched=True)
            content_id = part["Content-ID"].strip("<>")
            out.append(f"--{boundary}\r\nContent-Type: application/http\r\nContent-ID: <response-{content_id}>\r\n\r\n"
                       f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: application/json; "
                       f"charset=UTF-8\r\n\r\n{data.decode()}\r\n")
        out.append(f"--{boundary}--\r\n")
        return 200, {"Content-Type": f"multipart/mixed; boundary={boundary}"}, "".join(out).encode()

    def _api(self, method: str, url, *, batched: bool):
        query = urllib.parse.parse_qs(url.query)
        if not url.path.startswith(API_PREFIX) or method != "GET":
            return _json(404, _error(404, "Not Found", "notFound"))
        user, _, rest = url.path[len(API_PREFIX):].partition("/")
        self.calls.append(Call(method, url.path, query, batched, urllib.parse.unquote(user)))
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

    def _list(self, query: dict):
        labels = set(query.get("labelIds", []))
        after = re.search(r"after:(\d+)", query.get("q", [""])[0])
        found = [m for m in self.state.messages.values() if labels <= set(m.labels)
                 and (after is None or m.internal_ms // 1000 > int(after.group(1)))]
        found.reverse()  # newest first, as Gmail lists them
        page, token = _page(found, query, lambda m: m.id)
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
        kinds = set(query.get("historyTypes", [])) or {"messageAdded", "labelAdded"}
        records = []
        for hid, mid, kind, added_labels in self.state.history:
            message = self.state.messages.get(mid)
            if hid <= start or kind not in kinds or (label and message is not None and label not in message.labels):
                continue
            entry = {"message": {"id": mid, "threadId": mid, "labelIds": message.labels if message else []}}
            record = {"id": str(hid), "messages": [{"id": mid, "threadId": mid}]}
            if kind == "messageAdded":
                record["messagesAdded"] = [entry]
            else:
                record["labelsAdded"] = [{**entry, "labelIds": added_labels}]
            records.append(record)
        page, token = _page(records, query, lambda r: r["id"])
        if page is None:
            return _json(400, _error(400, "Invalid pageToken", "invalidArgument"))
        body = {"historyId": str(self.history_id)}
        if page:
            body["history"] = page
        if token:
            body["nextPageToken"] = token
        return _json(200, body)

    def _get(self, mid: str, fmt: str):
        message = self.state.messages.get(mid)
        if message is None:
            return _json(404, _error(404, "Requested entity was not found.", "notFound"))
        body = {"id": mid, "threadId": mid, "labelIds": message.labels, "historyId": str(message.history_id),
                "internalDate": str(message.internal_ms),
                "sizeEstimate": self.size_estimates.get(mid, len(message.raw))}
        if fmt == "minimal" and mid in self.vanishing:
            del self.state.messages[mid]
        if fmt == "raw":
            body["raw"] = base64.urlsafe_b64encode(message.raw).decode().rstrip("=")
        elif fmt == "metadata":
            head = email.parser.BytesParser().parsebytes(message.raw, headersonly=True)
            body["payload"] = {"mimeType": head.get_content_type(),
                               "headers": [{"name": k, "value": str(v)} for k, v in head.items()]}
        return _json(200, body)


def _page(items: list, query: dict, key) -> tuple[list, str | None]:
    """A page of ``items``; the token names the last item served, so arrivals do not shift pages.

    ``(None, None)`` for a token naming no item (Gmail's "Invalid pageToken").
    """
    token = query.get("pageToken", [None])[0]
    keys = [key(item) for item in items]
    if token is not None and token not in keys:
        return None, None
    start = keys.index(token) + 1 if token is not None else 0
    end = start + int(query.get("maxResults", ["100"])[0])
    return items[start:end], (keys[end - 1] if end < len(items) else None)


_REASONS = {200: "OK", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 429: "Too Many Requests"}


def _error(status: int, message: str, reason: str) -> dict:
    return {"error": {"code": status, "message": message,
                      "errors": [{"message": message, "domain": "usageLimits", "reason": reason}]}}


def _json(status: int, body: dict):
    return status, {"Content-Type": "application/json; charset=UTF-8"}, json.dumps(body).encode()
