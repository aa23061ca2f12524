"""Microsoft Graph mail: a folder's new messages since a delta cursor, in batches.

``GraphSource.changes(folder, cursor, ...)`` yields
``changes.Batch``es, one per delta page: ``(message id, raw MIME | TooBig)`` items
and, on the round's last page only, the ``@odata.deltaLink`` to commit once the
batch is stored. A ``nextLink`` is never a cursor: Graph retires the sync state of
earlier pages while a round goes on (``SyncStateNotFound`` on a replayed
``nextLink``), so an interrupted round starts again from the committed deltaLink
(or from scratch) and dedup absorbs what was stored twice.

The access token comes from a callable (``graph_auth``: msal, app-only or delegated), and
a token Graph refuses (401) is replaced through ``renew`` once per request. HTTP goes
through one ``requests.Session`` whose TLS verification is the default unless the caller
passes a CA bundle of its own (the tests' fake). ``providers.graph_mailbox`` puts this
behind the poller's ``ChangesProvider`` boundary.

What Graph answers is not trusted (issue 19): no redirect is followed (the bearer token, and
the cursor, stay with the configured API); every answer is read to a cap of bytes of its own
(``page_cap``, the message limit, ``HEADERS_BYTES``, ``ERROR_BYTES``); its shape is checked
before use (``delta_page``, ``header_block``), else ``NotGraph``; no link outside
``graph_url`` is requested or handed out as a cursor (``under_api``), and a stored one outside it
is an expired cursor (a resync). A throttle's wait ends with the poll's time (``time_left``)
and at ``interrupt``. Errors name Graph's host, never a link's path or query.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import json
import logging
import math
import random
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import requests

from seoinsight.outbound import (
    BodyTooLarge,
    EndpointError,
    RedirectRefused,
    endpoint,
    read_capped,
    refuse_redirect,
    scrub,
    where,
)

from .. import conf
from ..cursor import fetch_groups
from .base import FolderError, PollInterrupted, ProviderError
from .changes import Batch, CursorExpired, Throttled, TooBig
from .graph_auth import SessionRefused, new_session

log = logging.getLogger(__name__)

GRAPH_URL = "https://graph.microsoft.com/v1.0"
# Graph's own advice for Outlook resources: at most 4 concurrent requests per mailbox.
MAX_CONCURRENT = 4
# PidTagMessageSize: Exchange's size of the message, the only size Graph offers before downloading it.
PID_TAG_MESSAGE_SIZE = "Integer 0x0E08"
# Delta error codes meaning "this sync state is gone": start over (seen with 410 and, for some, 400).
EXPIRED_CODES = frozenset({"syncstatenotfound", "syncstateinvalid", "resyncrequired"})
# A folder Graph does not have: an id of a deleted folder (404), or a name that is neither a well-known name nor
# an id (400: Graph takes it for a malformed id).
MISSING_FOLDER_CODES = frozenset({"erroritemnotfound", "errorinvalididmalformed"})
THROTTLE_STATUSES = frozenset({429, 503})
MAX_THROTTLE_RETRIES = 5
MAX_THROTTLE_WAIT = 120.0  # seconds; a longer Retry-After is left to a later poll
# The bytes one answer may hold. A delta item ($select=id and one extended property) is under 1 KB: these are
# generous for Graph and small for a process that polls many mailboxes at once.
PAGE_BASE_BYTES = 1024 * 1024
ITEM_BYTES = 16 * 1024
HEADERS_BYTES = 1024 * 1024  # a message's internetMessageHeaders, as JSON
ERROR_BYTES = 64 * 1024  # an error answer: its code and message are all that is read of it


class NotGraph(ProviderError):
    """What answered at Graph's address sent something that is not Graph's API (a proxy's page, another shape).

    The message says briefly what was wrong; ``detail`` says more, for the log only (staff), never the mailbox.
    """

    def __init__(self, message: str, detail: str = ""):
        super().__init__(message)
        self.detail = detail


def _not_graph(what: str, detail: str = "") -> NotGraph:
    return NotGraph(f"Graph answered something that is not its API ({what})", detail)


def page_cap(page_size: int) -> int:
    """The bytes a delta page asked for with ``odata.maxpagesize=page_size`` may take before it is cut.

    >>> page_cap(50)
    1867776
    """
    return PAGE_BASE_BYTES + page_size * ITEM_BYTES


def decode_json(body: bytes, what: str):
    """``body`` decoded as JSON, or NotGraph: not JSON, not text, or nested past the decoder's recursion."""
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise _not_graph(f"{what}: not JSON", f"{type(exc).__name__}: {scrub(str(exc))[:200]}") from None


def delta_page(page) -> tuple[list[dict], str | None, str | None]:
    """A delta page's listed messages (``@removed`` ones left out), deltaLink and nextLink; NotGraph if it
    is not a delta page's shape. Every listed item has a non-empty string id.

    >>> delta_page({"value": [{"id": "AAMk1"}, {"id": "AAMk2", "@removed": {}}], "@odata.deltaLink": "d"})
    ([{'id': 'AAMk1'}], 'd', None)
    """
    if not isinstance(page, dict):
        raise _not_graph("a delta page that is not an object", type(page).__name__)
    value = page.get("value", [])
    if not isinstance(value, list):
        raise _not_graph("a delta page whose value is not a list", type(value).__name__)
    listed = []
    for item in value:
        if not isinstance(item, dict):
            raise _not_graph("a delta item that is not an object", type(item).__name__)
        if "@removed" in item:
            continue
        if not isinstance(item.get("id"), str) or not item["id"]:
            raise _not_graph("a delta item without an id", scrub(repr(item.get("id")))[:100])
        properties = item.get("singleValueExtendedProperties")
        if properties is not None and not (isinstance(properties, list)
                                           and all(isinstance(p, dict) for p in properties)):
            raise _not_graph("a delta item whose extended properties are not a list of objects")
        listed.append(item)
    links = []
    for key in ("@odata.deltaLink", "@odata.nextLink"):
        link = page.get(key)
        if link is not None and not isinstance(link, str):
            raise _not_graph(f"a {key.removeprefix('@odata.')} that is not a string", type(link).__name__)
        links.append(link or None)
    if not any(links):
        raise _not_graph("a delta page with neither nextLink nor deltaLink")
    return listed, links[0], links[1]


def header_block(answer) -> bytes:
    """A message's ``internetMessageHeaders`` as an RFC 5322 header block (b"" if it has none); NotGraph if the
    answer is not that shape. A CR or LF inside a name or value is a space: one header stays one header.

    >>> header_block({"internetMessageHeaders": [{"name": "Subject", "value": "a\\r\\nBcc: x"}]})
    b'Subject: a  Bcc: x\\r\\n\\r\\n'
    """
    if not isinstance(answer, dict):
        raise _not_graph("a message's headers that are not an object", type(answer).__name__)
    headers = answer.get("internetMessageHeaders") or []
    if not isinstance(headers, list):
        raise _not_graph("a message's headers that are not a list", type(headers).__name__)
    lines = []
    for header in headers:
        if not (isinstance(header, dict) and isinstance(header.get("name"), str)
                and isinstance(header.get("value"), str)):
            raise _not_graph("a message header that is not a name and a value")
        name, value = (header[k].replace("\r", " ").replace("\n", " ") for k in ("name", "value"))
        lines.append(f"{name}: {value}\r\n")
    return ("".join(lines) + "\r\n").encode("utf-8", "surrogateescape") if lines else b""


def error_of(body: bytes, reason: str) -> tuple[str, str]:
    """Graph's ``{"error": {"code", "message"}}`` of an error answer, or ("", the status text) for anything else;
    every URL in them cut to its origin.

    >>> error_of(b'{"error": {"code": "ErrorAccessDenied", "message": "see https://h/v1.0/x?$skiptoken=t"}}', "")
    ('ErrorAccessDenied', 'see https://h')
    >>> error_of(b"<html>", "Bad Gateway"), error_of(b'{"error": "gone"}', "Gone")
    (('', 'Bad Gateway'), ('', 'gone'))
    """
    try:
        answer = decode_json(body, "an error")
    except NotGraph:
        return "", scrub(str(reason or ""))[:200]
    error = answer.get("error") if isinstance(answer, dict) else None
    if not isinstance(error, dict):
        return "", scrub(str(error if error else reason or ""))[:200]
    return scrub(str(error.get("code") or ""))[:100], scrub(str(error.get("message") or ""))[:500]


def under_api(url, base: str) -> bool:
    """Whether ``url`` is a resource under the configured API ``base``: the same scheme, host and port (as the
    client will connect) and a path below the base's, with no dot segment (encoded or not).

    >>> under_api("https://graph.microsoft.com/v1.0/users/u/messages/delta?$deltatoken=x", GRAPH_URL)
    True
    >>> under_api("https://graph.microsoft.com/beta/users/u", GRAPH_URL), under_api("https://a.example/v1.0/x", GRAPH_URL)
    (False, False)
    """
    if not isinstance(url, str) or not url:
        return False
    try:
        if endpoint(url) != endpoint(base):
            return False
    except EndpointError:
        return False
    path = urllib.parse.urlsplit(url).path
    base_path = urllib.parse.urlsplit(base).path.rstrip("/")
    if not path.startswith(base_path + "/") or path == base_path + "/":
        return False
    return not any(segment in (".", "..") for segment in urllib.parse.unquote(path).split("/"))


def parse_retry_after(value: str | None, now: dt.datetime) -> float | None:
    """Seconds a ``Retry-After`` header asks for (delta-seconds or an HTTP date); None if absent or garbled.

    >>> now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    >>> parse_retry_after("7", now), parse_retry_after("Thu, 01 Jan 2026 00:00:30 GMT", now)
    (7.0, 30.0)
    """
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - now).total_seconds()) if when.tzinfo else None


def throttle_wait(attempt: int, retry_after: float | None, *, jitter: float = 0.0,
                  max_retries: int = MAX_THROTTLE_RETRIES, max_wait: float = MAX_THROTTLE_WAIT,
                  time_left: float = math.inf) -> float | None:
    """Seconds to wait before retry ``attempt`` (1-based) of a throttled request, or None: give up (``Throttled``).

    The server's ``Retry-After`` is obeyed as given; without one, 1, 2, 4... seconds,
    stretched by ``jitter`` (0 to 1, random per call) so that parallel requests spread out.
    A wait over ``max_wait``, or not over before the poll's ``time_left`` ends, is not slept
    through: the poll gives up and the next one retries, from the cursor.
    """
    if attempt > max_retries:
        return None
    wait = retry_after if retry_after is not None else min(max_wait, 2.0 ** (attempt - 1)) * (1 + jitter)
    return wait if wait <= max_wait and wait < time_left else None


def is_cursor_expired(status: int, code: str) -> bool:
    """A delta answer saying the sync state is gone: 410 Gone, or one of its error codes with any status."""
    return status == 410 or code.lower() in EXPIRED_CODES


def is_missing_folder(status: int, code: str) -> bool:
    """A delta answer saying the folder is not there (the mailbox and its other folders are fine)."""
    return status in (400, 404) and code.lower() in MISSING_FOLDER_CODES


class GraphSource:
    """One mailbox (``user``: id or principal name) read through Graph; every request of it shares
    one limit of ``max_concurrent`` in flight. ``mailbox`` names it in logs (its pk).

    ``token()`` gives the access token for a request; ``renew(rejected)``, if given, a new one in place of a
    token Graph refused with 401 (asked at most once per request, so a token that keeps failing is an error,
    not a loop). Both are called one thread at a time, from the source's download threads too.
    ``time_left()``: seconds the poll has left (a throttle wait past it is not begun); ``sleep``: how a
    throttle wait is waited, by default until ``interrupt``.
    """

    def __init__(self, user: str, token: Callable[[], str], *, renew: Callable[[str], str] | None = None,
                 mailbox=None, session: requests.Session | None = None,
                 graph_url: str = GRAPH_URL, max_message_bytes: int | None = None,
                 fetch_max_bytes: int | None = None, page_size: int = 50,
                 max_concurrent: int = MAX_CONCURRENT, sleep: Callable[[float], None] | None = None,
                 clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
                 jitter: Callable[[], float] = random.random,
                 time_left: Callable[[], float] = lambda: math.inf):
        self.user, self.token, self.renew = user, token, renew
        self.mailbox = mailbox if mailbox is not None else user
        self.session = session or new_session()
        self.graph_url = graph_url.rstrip("/")
        self.max_message_bytes = max_message_bytes or conf.get("MAILPOLL_MAX_MESSAGE_BYTES")
        self.fetch_max_bytes = fetch_max_bytes or conf.get("MAILPOLL_FETCH_MAX_BYTES")
        self.timeout = conf.get("MAILPOLL_SOCKET_TIMEOUT")
        self.page_size, self.max_concurrent = page_size, max_concurrent
        self.sleep, self.clock, self.jitter, self.time_left = sleep, clock, jitter, time_left
        self._slots = threading.BoundedSemaphore(max_concurrent)
        self._token_lock = threading.Lock()  # one token refresh at a time, not one per worker
        self._interrupted: str | None = None
        self._cut = threading.Event()  # set by interrupt: ends a throttle wait
        self._user_url = f"{self.graph_url}/users/{_segment(user)}"

    def interrupt(self, reason: str) -> None:
        """From any thread: every later request fails with ``PollInterrupted``, and so do those in flight (their
        connections are shut down, when the session is ``graph_auth.new_session``'s) and a throttle wait; safe at
        any moment."""
        self._interrupted = reason
        self._cut.set()
        cut = getattr(self.session, "cut", None)
        if cut is not None:
            cut()

    def changes(self, folder: str, cursor: str | None, *, mode: str = "full",
                since: dt.date | None = None) -> Iterator[Batch]:
        """The folder's messages created since ``cursor`` (a deltaLink), or per ``mode`` without one.

        A delta page comes as one or more batches of at most ``fetch_max_bytes`` (by Exchange's sizes).
        ``new-only`` fetches nothing and yields one empty Batch with the current deltaLink;
        ``since`` starts from messages received on or after ``since`` (a date: midnight UTC);
        ``full`` from every message. Raises ``CursorExpired`` (also in the middle of a round, and for a
        ``cursor`` outside ``graph_url``: a cursor of another API, or of a base URL since changed),
        ``Throttled``, ``TokenRefused``, ``NotGraph`` or ``ProviderError``.
        """
        if cursor is not None:
            if not under_api(cursor, self.graph_url):
                log.warning("mailbox=%s folder=%s the stored cursor points outside %s (at %s): resyncing",
                            self.mailbox, folder, where(self.graph_url), where(cursor))
                raise CursorExpired(f"folder {folder}: the stored cursor points outside {where(self.graph_url)} "
                                    f"(at {where(cursor)}): resync needed")
            url, params = cursor, None
        else:
            url = f"{self._user_url}/mailFolders/{_segment(folder)}/messages/delta"
            params = {"$select": "id", "changeType": "created",
                      "$expand": f"singleValueExtendedProperties($filter=id eq '{PID_TAG_MESSAGE_SIZE}')"}
            if mode == "new-only":
                params["$deltatoken"] = "latest"
            elif mode == "since":
                if since is None:
                    raise ValueError("mode 'since' needs a date")
                start = since if isinstance(since, dt.datetime) else dt.datetime.combine(since, dt.time())
                if start.tzinfo is not None:
                    start = start.astimezone(dt.UTC)
                params["$filter"] = f"receivedDateTime ge {start.strftime('%Y-%m-%dT%H:%M:%SZ')}"
            elif mode != "full":
                raise ValueError(f"unknown initial mode {mode!r}")
        while True:
            listed, delta_link, next_link = self._delta_page(folder, url, params)
            if mode == "new-only" and cursor is None:
                listed = []
            # A page is fetched a few messages at a time, as IMAP's batches are: what is fetched is held in
            # memory until stored. Only the round's very last batch carries the cursor.
            sizes = {n: _exchange_size(item) or self.max_message_bytes for n, item in enumerate(listed)}
            groups = fetch_groups(list(sizes), sizes, self.fetch_max_bytes) or [[]]
            for n, group in enumerate(groups):
                items = self._contents(folder, [listed[i] for i in group])
                yield Batch(items, delta_link if n == len(groups) - 1 else None)
            if delta_link:
                return
            url, params = next_link, None

    # -- requests ---------------------------------------------------------------

    def _delta_page(self, folder: str, url: str, params: dict | None) -> tuple[list[dict], str | None, str | None]:
        response = self._get(folder, url, params=params, headers={"Prefer": f"odata.maxpagesize={self.page_size}"})
        if response.ok:
            page = self._answer(folder, response, page_cap(self.page_size), "Graph's delta page")
            try:
                listed, delta_link, next_link = delta_page(page)
            except NotGraph as exc:
                raise self._not_graph(folder, exc) from None
            for kind, link in (("deltaLink", delta_link), ("nextLink", next_link)):
                if link and not under_api(link, self.graph_url):
                    # Never requested (the token would go with it) and never a cursor (it would wedge the folder).
                    raise ProviderError(f"folder {folder}: Graph answered a {kind} outside {where(self.graph_url)} "
                                        f"(at {where(link)}): neither followed nor kept")
            return listed, delta_link, next_link
        code, message = self._error_of(response)
        if is_cursor_expired(response.status_code, code):
            raise CursorExpired(f"folder {folder}: the delta state is gone ({response.status_code} {code}): "
                                f"resync needed")
        if is_missing_folder(response.status_code, code):
            raise FolderError(f"folder {folder}: Graph has no such folder ({response.status_code} {code}): use a "
                              f"well-known name (inbox, ...) or the folder's id")
        raise ProviderError(f"folder {folder}: delta answered {response.status_code} {code}: {message}")

    def _contents(self, folder: str, listed: list[dict]) -> list[tuple[str, bytes | TooBig]]:
        """Each listed message's MIME, or TooBig; one gone since the listing is left out (nothing to store)."""
        with ThreadPoolExecutor(max_workers=self.max_concurrent, thread_name_prefix="graph") as pool:
            fetched = list(pool.map(lambda item: self._content(folder, item), listed))
        return [(item["id"], content) for item, content in zip(listed, fetched, strict=True) if content is not None]

    def _content(self, folder: str, item: dict) -> bytes | TooBig | None:
        mid, limit = item["id"], self.max_message_bytes
        size = _exchange_size(item)
        if size is not None and size > limit:
            return self._too_big(folder, mid, size)
        response = self._get(folder, f"{self._user_url}/messages/{_segment(mid)}/$value")
        with response:
            if response.status_code == 404:
                return None
            if not response.ok:
                code, message = self._error_of(response)
                raise FolderError(f"folder {folder}: message {mid}: {response.status_code} {code}: {message}")
            # Exchange's size is no promise about the MIME (base64 makes attachments a third larger), and
            # Content-Length is none either: the download stops past the limit, and its size is what was read.
            raw, over = bytearray(), None
            try:
                for chunk in response.iter_content(64 * 1024):
                    raw += chunk
                    if len(raw) > limit:
                        over = len(raw)
                        break
            except requests.RequestException as exc:
                raise self._failed(folder, exc) from exc
        # Closed first: the header request below takes a connection of its own.
        return bytes(raw) if over is None else self._too_big(folder, mid, over)

    def _too_big(self, folder: str, mid: str, size: int) -> TooBig | None:
        response = self._get(folder, f"{self._user_url}/messages/{_segment(mid)}",
                             params={"$select": "internetMessageHeaders"})
        if response.status_code == 404:
            response.close()
            return None
        if not response.ok:
            code, message = self._error_of(response)
            raise FolderError(f"folder {folder}: message {mid} headers: {response.status_code} {code}: {message}")
        try:
            answer = self._answer(folder, response, HEADERS_BYTES, "Graph's header list")
        except ProviderError as exc:
            if not isinstance(exc.__cause__, BodyTooLarge):
                raise
            # Headers that large are no reason to hold the folder: the message is rejected all the same, unnamed.
            log.warning("mailbox=%s folder=%s message %s: %s; rejected without its headers", self.mailbox, folder,
                        mid, exc.__cause__)
            return TooBig(size, b"")
        try:
            return TooBig(size, header_block(answer))
        except NotGraph as exc:
            raise self._not_graph(folder, exc) from None

    def _answer(self, folder: str, response: requests.Response, limit: int, what: str):
        """A 2xx answer's JSON, read to at most ``limit`` bytes (ProviderError past it, caused by BodyTooLarge)."""
        try:
            body = read_capped(response, limit, what)
        except BodyTooLarge as exc:
            raise ProviderError(f"folder {folder}: {exc}") from exc
        except requests.RequestException as exc:
            raise self._failed(folder, exc) from exc
        finally:
            response.close()
        try:
            return decode_json(body, what)
        except NotGraph as exc:
            raise self._not_graph(folder, exc) from None

    def _not_graph(self, folder: str, exc: NotGraph) -> NotGraph:
        """The folder's NotGraph for the mailbox's error; what it was exactly goes to the log."""
        log.warning("mailbox=%s folder=%s %s%s", self.mailbox, folder, exc, f" [{exc.detail}]" if exc.detail else "")
        return NotGraph(f"folder {folder}: {exc}", exc.detail)

    def _error_of(self, response: requests.Response) -> tuple[str, str]:
        """Graph's error code and message, from at most ``ERROR_BYTES`` of the answer."""
        try:
            body = read_capped(response, ERROR_BYTES, "an error answer")
        except (BodyTooLarge, requests.RequestException):
            body = b""
        finally:
            response.close()
        return error_of(body, response.reason)

    def _get(self, folder: str, url: str, *, headers: dict | None = None, **kwargs) -> requests.Response:
        """GET under the mailbox's concurrency limit, waiting out 429/503 as ``throttle_wait`` says.

        Streamed (the caller reads it to a cap), never redirected: a 3xx is a ProviderError naming its host.
        """
        if not under_api(url, self.graph_url):
            # A stored or returned link elsewhere would be handed our bearer token.
            raise ProviderError(f"folder {folder}: refusing a Graph link outside {where(self.graph_url)} "
                                f"(to {where(url)})")
        attempt, renewed, token = 0, False, None
        while True:
            if self._interrupted is not None:
                raise PollInterrupted(f"folder {folder}: {self._interrupted}")
            if token is None:
                with self._token_lock:
                    token = self.token()
            with self._slots:
                try:
                    response = self.session.get(url, headers={**(headers or {}), "Authorization": f"Bearer {token}"},
                                                timeout=self.timeout, stream=True, allow_redirects=False, **kwargs)
                except requests.RequestException as exc:
                    raise self._failed(folder, exc) from exc
            if 300 <= response.status_code < 400:
                response.close()
                try:
                    refuse_redirect(response, "Graph")
                except RedirectRefused as exc:
                    raise ProviderError(f"folder {folder}: {exc}") from None
            if response.status_code == 401 and self.renew is not None and not renewed:
                # Refused before its expiry (revoked sessions, clock skew): one new token, then Graph's answer stands.
                response.close()
                renewed = True
                log.info("mailbox=%s folder=%s Graph refused the access token (401): asking for a new one",
                         self.mailbox, folder)
                with self._token_lock:
                    token = self.renew(token)
                continue
            if response.status_code not in THROTTLE_STATUSES:
                return response
            attempt += 1
            token = None  # after the wait, the token of that moment
            hint = parse_retry_after(response.headers.get("Retry-After"), self.clock())
            response.close()
            left = self.time_left()
            wait = throttle_wait(attempt, hint, jitter=self.jitter(), time_left=left)
            if wait is None:
                raise self._throttled(folder, response.status_code, attempt, hint, left)
            log.info("mailbox=%s folder=%s Graph answered %s: retry %s in %.1fs", self.mailbox, folder,
                     response.status_code, attempt, wait)
            if self.sleep is not None:
                self.sleep(wait)
            elif self._cut.wait(wait):
                raise PollInterrupted(f"folder {folder}: {self._interrupted}")

    def _throttled(self, folder: str, status: int, attempt: int, hint: float | None, left: float) -> Throttled:
        """The poll gives up on a throttled request; the mailbox says until when Graph asked it to wait."""
        pause = hint if hint is not None else 2.0 ** min(attempt - 1, 7)
        until = (self.clock() + dt.timedelta(seconds=pause)).strftime("%Y-%m-%d %H:%M:%S UTC")
        if attempt > MAX_THROTTLE_RETRIES:
            why = f"Graph kept answering {status} after {attempt} tries"
        elif pause >= left:
            why = f"Graph answered {status}, asking for {pause:g} s, past the poll's deadline"
        else:
            why = f"Graph answered {status}, asking for {pause:g} s, longer than a poll waits"
        log.info("mailbox=%s folder=%s %s: giving up until the next poll", self.mailbox, folder, why)
        return Throttled(f"folder {folder}: {why}: throttled until {until}; the next poll resumes from the cursor",
                         hint)

    def _failed(self, folder: str, exc: requests.RequestException) -> ProviderError:
        """A request that broke off: cut by ``interrupt``, refused by the session (a redirect), or the network's."""
        if self._interrupted is not None:
            return PollInterrupted(f"folder {folder}: {self._interrupted}")
        if isinstance(exc, SessionRefused):
            return ProviderError(f"folder {folder}: {exc}")
        return ProviderError(f"folder {folder}: Graph request failed: {type(exc).__name__}")


def _segment(value: str) -> str:
    """One path segment: a folder or message id (base64url, may end in ``=``), a user's name with ``@``."""
    return urllib.parse.quote(value, safe="@=")


def _exchange_size(item: dict) -> int | None:
    for prop in item.get("singleValueExtendedProperties") or []:
        if str(prop.get("id") or "").lower() == PID_TAG_MESSAGE_SIZE.lower():
            try:
                size = int(prop.get("value"))
            except (TypeError, ValueError):
                return None
            return size if size >= 0 else None
    return None
