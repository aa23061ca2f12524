"""Microsoft Graph mail: a folder's new messages since a delta cursor, in batches.

``GraphSource.changes(folder, cursor, ...)`` yields
``changes.Batch``es, one per delta page: ``(message id, raw MIME | TooBig)`` items (the MIME, or the
TooBig's headers, a ``RawMessage`` with the message's ``receivedDateTime``)
and, on the round's last page only, the ``@odata.deltaLink`` to commit once the
batch is stored. A ``nextLink`` is never a cursor: Graph retires the sync state of
earlier pages while a round goes on (``SyncStateNotFound`` on a replayed
``nextLink``), so an interrupted round starts again from the committed deltaLink
(or from scratch) and dedup absorbs what was stored twice. The delta asks for created messages
only (``changeType=created``): a message the poller marks read or moves away (``mark_read``,
``move``) is no new mail to it, and one listed again anyway is absorbed by dedup.

The access token comes from a callable (``graph_auth``: msal, app-only or delegated), and
a token Graph refuses (401) is replaced through ``renew`` once per request. HTTP goes
through one ``requests.Session`` whose TLS verification is the default unless the caller
passes a CA bundle of its own (the tests' fake). ``providers.graph_mailbox`` puts this
behind the poller's ``ChangesProvider`` boundary.

What Graph answers is not trusted (issue 19; the rules are ``graph_rules``): no redirect is
followed (the bearer token, and the cursor, stay with the configured API); every answer is
read to a cap of bytes of its own (``page_cap``, the message limit, ``HEADERS_BYTES``,
``ERROR_BYTES``); its shape is checked before use (``delta_page``, ``header_block``), else
``NotGraph``; no link outside ``graph_url`` is requested or handed out as a cursor
(``under_api``), and a stored one outside it is an expired cursor (a resync). A throttle's wait
ends with the poll's time (``time_left``) and at ``interrupt``. Errors name Graph's host, never
a link's path or query.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import random
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import requests

from seoinsight.outbound import BodyTooLarge, RedirectRefused, read_capped, refuse_redirect, where

from .. import conf
from ..cursor import fetch_groups
from .base import FolderError, PollInterrupted, ProviderError, RawMessage
from .changes import Batch, CursorExpired, Throttled, TooBig
from .graph_auth import SessionRefused, new_session
from .graph_rules import (
    ERROR_BYTES,
    HEADERS_BYTES,
    MAX_THROTTLE_RETRIES,
    THROTTLE_STATUSES,
    NotGraph,
    decode_json,
    delta_page,
    error_of,
    header_block,
    is_cursor_expired,
    is_missing_folder,
    page_cap,
    parse_retry_after,
    received_time,
    throttle_wait,
    under_api,
)

log = logging.getLogger(__name__)

GRAPH_URL = "https://graph.microsoft.com/v1.0"
# Graph's own advice for Outlook resources: at most 4 concurrent requests per mailbox.
MAX_CONCURRENT = 4
# PidTagMessageSize: Exchange's size of the message, the only size Graph offers before downloading it.
PID_TAG_MESSAGE_SIZE = "Integer 0x0E08"
# A display name is looked up among the mail folders listed FOLDER_PAGE at a time, at most MAX_FOLDER_PAGES pages.
FOLDER_PAGE = 100
MAX_FOLDER_PAGES = 10


class GraphRefused(FolderError):
    """Graph answered a change to one message, or a folder listing, with an error; the session goes on.

    ``status`` and Graph's error ``code`` (may be empty) say what; ``retry_after`` is a throttled answer's
    Retry-After, in seconds. The message names the message, never a link's path or query.
    """

    def __init__(self, message: str, status: int, code: str = "", retry_after: float | None = None):
        super().__init__(message)
        self.status, self.code, self.retry_after = status, code, retry_after

    @property
    def throttled(self) -> bool:
        return self.status in THROTTLE_STATUSES

    @property
    def not_found(self) -> bool:
        return self.status == 404 and self.code.lower() in ("", "erroritemnotfound")


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
            params = {"$select": "id,receivedDateTime", "changeType": "created",
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

    # -- changes to messages (post-actions) ---------------------------------------
    # Never waited out when throttled: the answer is a GraphRefused whose ``throttled`` is true, and the caller
    # tries again on a later poll. A lost connection or an interrupt is a ProviderError, as for reading.

    def mark_read(self, folder: str, mid: str) -> None:
        """Mark message ``mid`` read; GraphRefused if Graph does not (``not_found``: no such message any more)."""
        self._change(folder, "PATCH", f"{self._user_url}/messages/{_segment(mid)}", {"isRead": True},
                     f"message {mid}: marking it read")

    def move(self, folder: str, mid: str, destination: str) -> None:
        """Move message ``mid`` to ``destination`` (a well-known name or a folder id); GraphRefused if Graph does
        not. A 404 is the message's or the destination's: ``has_message`` tells which. The moved message has a
        new id in its new folder (Graph's ids are not immutable unless asked for)."""
        self._change(folder, "POST", f"{self._user_url}/messages/{_segment(mid)}/move", {"destinationId": destination},
                     f"message {mid}: moving it")

    def has_message(self, folder: str, mid: str) -> bool:
        """Whether the mailbox still has message ``mid`` (by this id); GraphRefused for any other answer."""
        response = self._request("GET", folder, f"{self._user_url}/messages/{_segment(mid)}",
                                 params={"$select": "id"}, wait_throttled=False)
        if response.ok:
            response.close()
            return True
        refused = self._refused(folder, response, f"message {mid}")
        if refused.not_found:
            return False
        raise refused

    def mail_folders(self, folder: str, parent: str | None = None) -> tuple[list[tuple[str, str]], bool]:
        """``(id, display name)`` of the mailbox's top-level mail folders (or of ``parent``'s child folders), and
        whether that is all of them: at most ``MAX_FOLDER_PAGES`` pages are read.

        ``folder`` names the request in errors. FolderError (GraphRefused for Graph's refusal) when the list
        cannot be had; ProviderError when the connection fails.
        """
        url = f"{self._user_url}/mailFolders" + (f"/{_segment(parent)}/childFolders" if parent else "")
        params: dict | None = {"$select": "id,displayName", "$top": str(FOLDER_PAGE)}
        listed: list[tuple[str, str]] = []
        for _ in range(MAX_FOLDER_PAGES):
            response = self._request("GET", folder, url, params=params, wait_throttled=False)
            if not response.ok:
                raise self._refused(folder, response, "the mail folder list")
            try:
                page = self._answer(folder, response, page_cap(FOLDER_PAGE), "Graph's mail folder list")
            except ProviderError as exc:
                if isinstance(exc, NotGraph) or isinstance(exc.__cause__, BodyTooLarge):
                    raise FolderError(str(exc)) from exc
                raise
            try:
                found, next_link = _folder_page(page)
            except NotGraph as exc:
                raise FolderError(str(self._not_graph(folder, exc))) from None
            listed += found
            if not next_link:
                return listed, True
            url, params = next_link, None  # _request refuses a link outside the API
        log.info("mailbox=%s folder=%s more than %s mail folders: the rest are not looked at", self.mailbox, folder,
                 len(listed))
        return listed, False

    def _change(self, folder: str, method: str, url: str, body: dict, what: str) -> None:
        response = self._request(method, folder, url, json=body, wait_throttled=False)
        if not response.ok:
            raise self._refused(folder, response, what)
        response.close()  # Graph answers with the whole message: nothing of it is needed

    def _refused(self, folder: str, response: requests.Response, what: str) -> GraphRefused:
        hint = (parse_retry_after(response.headers.get("Retry-After"), self.clock())
                if response.status_code in THROTTLE_STATUSES else None)
        code, message = self._error_of(response)
        return GraphRefused(f"folder {folder}: {what}: Graph answered {response.status_code} {code}: {message}",
                            response.status_code, code, hint)

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

    def _content(self, folder: str, item: dict) -> RawMessage | TooBig | None:
        mid, limit = item["id"], self.max_message_bytes
        size, received = _exchange_size(item), received_time(item)
        if size is not None and size > limit:
            return self._too_big(folder, mid, size, received)
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
        return RawMessage(raw, received) if over is None else self._too_big(folder, mid, over, received)

    def _too_big(self, folder: str, mid: str, size: int, received: dt.datetime | None) -> TooBig | None:
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
            return TooBig(size, RawMessage(header_block(answer), received))
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

    def _get(self, folder: str, url: str, **kwargs) -> requests.Response:
        return self._request("GET", folder, url, **kwargs)

    def _request(self, method: str, folder: str, url: str, *, headers: dict | None = None,
                 wait_throttled: bool = True, **kwargs) -> requests.Response:
        """A request under the mailbox's concurrency limit; a 429/503 is waited out as ``throttle_wait`` says,
        or, without ``wait_throttled``, handed back as it is.

        Streamed (the caller reads it to a cap), never redirected: a 3xx is a ProviderError naming its host.
        A 401 has the token renewed once, and the request (body included) sent again.
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
                    response = self.session.request(
                        method, url, headers={**(headers or {}), "Authorization": f"Bearer {token}"},
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
            if response.status_code not in THROTTLE_STATUSES or not wait_throttled:
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


def _folder_page(page) -> tuple[list[tuple[str, str]], str | None]:
    """A mail folder list page's ``(id, display name)`` pairs and nextLink; NotGraph if it is not that shape."""
    if not isinstance(page, dict) or not isinstance(page.get("value", []), list):
        raise NotGraph("Graph answered something that is not its API (a mail folder list that is not a list)")
    listed = []
    for item in page.get("value", []):
        if not (isinstance(item, dict) and isinstance(item.get("id"), str) and item["id"]
                and isinstance(item.get("displayName", ""), str)):
            raise NotGraph("Graph answered something that is not its API (a mail folder without an id or a name)")
        listed.append((item["id"], item.get("displayName", "")))
    next_link = page.get("@odata.nextLink")
    if next_link is not None and not isinstance(next_link, str):
        raise NotGraph("Graph answered something that is not its API (a nextLink that is not a string)")
    return listed, next_link or None


def _exchange_size(item: dict) -> int | None:
    for prop in item.get("singleValueExtendedProperties") or []:
        if str(prop.get("id") or "").lower() == PID_TAG_MESSAGE_SIZE.lower():
            try:
                size = int(prop.get("value"))
            except (TypeError, ValueError):
                return None
            return size if size >= 0 else None
    return None
