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
"""

from __future__ import annotations

import datetime as dt
import email.utils
import logging
import random
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import requests

from .. import conf
from ..cursor import fetch_groups
from .base import FolderError, PollInterrupted, ProviderError
from .changes import Batch, CursorExpired, Throttled, TooBig
from .graph_auth import new_session

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
                  max_retries: int = MAX_THROTTLE_RETRIES, max_wait: float = MAX_THROTTLE_WAIT) -> float | None:
    """Seconds to wait before retry ``attempt`` (1-based) of a throttled request, or None: give up (``Throttled``).

    The server's ``Retry-After`` is obeyed as given; without one, 1, 2, 4... seconds,
    stretched by ``jitter`` (0 to 1, random per call) so that parallel requests spread out.
    A wait over ``max_wait`` is not slept through: the poll gives up and the next one retries.
    """
    if attempt > max_retries:
        return None
    wait = retry_after if retry_after is not None else min(max_wait, 2.0 ** (attempt - 1)) * (1 + jitter)
    return wait if wait <= max_wait else None


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
    """

    def __init__(self, user: str, token: Callable[[], str], *, renew: Callable[[str], str] | None = None,
                 mailbox=None, session: requests.Session | None = None,
                 graph_url: str = GRAPH_URL, max_message_bytes: int | None = None,
                 fetch_max_bytes: int | None = None, page_size: int = 50,
                 max_concurrent: int = MAX_CONCURRENT, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
                 jitter: Callable[[], float] = random.random):
        self.user, self.token, self.renew = user, token, renew
        self.mailbox = mailbox if mailbox is not None else user
        self.session = session or new_session()
        self.graph_url = graph_url.rstrip("/")
        self.max_message_bytes = max_message_bytes or conf.get("MAILPOLL_MAX_MESSAGE_BYTES")
        self.fetch_max_bytes = fetch_max_bytes or conf.get("MAILPOLL_FETCH_MAX_BYTES")
        self.timeout = conf.get("MAILPOLL_SOCKET_TIMEOUT")
        self.page_size, self.max_concurrent = page_size, max_concurrent
        self.sleep, self.clock, self.jitter = sleep, clock, jitter
        self._slots = threading.BoundedSemaphore(max_concurrent)
        self._token_lock = threading.Lock()  # one token refresh at a time, not one per worker
        self._interrupted: str | None = None
        self._user_url = f"{self.graph_url}/users/{_segment(user)}"

    def interrupt(self, reason: str) -> None:
        """From any thread: every later request fails with ``PollInterrupted``, and so do those in flight (their
        connections are shut down, when the session is ``graph_auth.new_session``'s); safe at any moment."""
        self._interrupted = reason
        cut = getattr(self.session, "cut", None)
        if cut is not None:
            cut()

    def changes(self, folder: str, cursor: str | None, *, mode: str = "full",
                since: dt.date | None = None) -> Iterator[Batch]:
        """The folder's messages created since ``cursor`` (a deltaLink), or per ``mode`` without one.

        A delta page comes as one or more batches of at most ``fetch_max_bytes`` (by Exchange's sizes).
        ``new-only`` fetches nothing and yields one empty Batch with the current deltaLink;
        ``since`` starts from messages received on or after ``since`` (a date: midnight UTC);
        ``full`` from every message. Raises ``CursorExpired`` (also in the middle of a round),
        ``Throttled``, ``TokenRefused`` or ``ProviderError``.
        """
        if cursor is not None:
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
            page = self._delta_page(folder, url, params)
            listed = [item for item in page.get("value", []) if "@removed" not in item]
            delta_link, next_link = page.get("@odata.deltaLink"), page.get("@odata.nextLink")
            if not delta_link and not next_link:
                raise ProviderError(f"folder {folder}: a delta page without nextLink or deltaLink")
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

    def _delta_page(self, folder: str, url: str, params: dict | None) -> dict:
        response = self._get(folder, url, params=params, headers={"Prefer": f"odata.maxpagesize={self.page_size}"})
        if response.ok:
            return response.json()
        code, message = _error_of(response)
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
        response = self._get(folder, f"{self._user_url}/messages/{_segment(mid)}/$value", stream=True)
        with response:
            if response.status_code == 404:
                return None
            if not response.ok:
                code, message = _error_of(response)
                raise FolderError(f"folder {folder}: message {mid}: {response.status_code} {code}: {message}")
            # Exchange's size is no promise about the MIME (base64 makes attachments a third larger): the
            # download itself stops one byte past the limit.
            raw, over = bytearray(), None
            try:
                for chunk in response.iter_content(64 * 1024):
                    raw += chunk
                    if len(raw) > limit:
                        over = max(int(response.headers.get("Content-Length") or 0), len(raw))
                        break
            except requests.RequestException as exc:
                raise self._failed(folder, exc) from exc
        # Closed first: the header request below takes a connection of its own.
        return bytes(raw) if over is None else self._too_big(folder, mid, over)

    def _too_big(self, folder: str, mid: str, size: int) -> TooBig | None:
        response = self._get(folder, f"{self._user_url}/messages/{_segment(mid)}",
                             params={"$select": "internetMessageHeaders"})
        if response.status_code == 404:
            return None
        if not response.ok:
            code, message = _error_of(response)
            raise FolderError(f"folder {folder}: message {mid} headers: {response.status_code} {code}: {message}")
        headers = response.json().get("internetMessageHeaders") or []
        block = "".join(f"{h['name']}: {h['value']}\r\n" for h in headers) + "\r\n"
        return TooBig(size, block.encode("utf-8", "surrogateescape") if headers else b"")

    def _get(self, folder: str, url: str, *, headers: dict | None = None, **kwargs) -> requests.Response:
        """GET under the mailbox's concurrency limit, waiting out 429/503 as ``throttle_wait`` says."""
        if not url.startswith(self.graph_url + "/"):
            # A stored or returned link elsewhere would be handed our bearer token.
            raise ProviderError(f"refusing a Graph link outside {self.graph_url}")
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
                                                timeout=self.timeout, **kwargs)
                except requests.RequestException as exc:
                    raise self._failed(folder, exc) from exc
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
            wait = throttle_wait(attempt, hint, jitter=self.jitter())
            if wait is None:
                raise Throttled(f"folder {folder}: Graph kept answering {response.status_code} after {attempt} "
                                f"tries", hint)
            log.info("mailbox=%s folder=%s Graph answered %s: retry %s in %.1fs", self.mailbox, folder,
                     response.status_code, attempt, wait)
            self.sleep(wait)

    def _failed(self, folder: str, exc: requests.RequestException) -> ProviderError:
        """A request that broke off: cut by ``interrupt``, or the network's doing."""
        if self._interrupted is not None:
            return PollInterrupted(f"folder {folder}: {self._interrupted}")
        return ProviderError(f"folder {folder}: Graph request failed: {type(exc).__name__}")


def _segment(value: str) -> str:
    """One path segment: a folder or message id (base64url, may end in ``=``), a user's name with ``@``."""
    return urllib.parse.quote(value, safe="@=")


def _exchange_size(item: dict) -> int | None:
    for prop in item.get("singleValueExtendedProperties") or []:
        if prop.get("id", "").lower() == PID_TAG_MESSAGE_SIZE.lower():
            try:
                return int(prop.get("value"))
            except (TypeError, ValueError):
                return None
    return None


def _error_of(response: requests.Response) -> tuple[str, str]:
    """Graph's ``{"error": {"code", "message"}}``, or the status text for anything else."""
    try:
        error = response.json().get("error") or {}
    except ValueError:
        return "", response.reason or ""
    if not isinstance(error, dict):
        return "", str(error)[:200]
    return str(error.get("code") or ""), str(error.get("message") or "")[:500]
