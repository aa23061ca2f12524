"""A Gmail label read as changes since a ``historyId`` (the poller's side is ``gmail_mailbox``).

``GmailSource`` yields ``changes.Batch``es: ``initial(mode)`` for a label's first poll,
``changes(cursor)`` after that, whatever the stored cursor is. Each batch's ``cursor`` (a
``historyId``, a sweep cursor, or ``None``: nothing to commit yet) is safe to commit once
every item of that batch and of the batches before it is stored:

* ``users.history.list`` (``messageAdded`` and ``labelAdded``: see ``added_to``) pages are
  read in history order: after a page, the id of its
  last record (the next page starts after it); after the last page, the mailbox's
  ``historyId`` the answer names.
* The listing modes (``since``, ``full``) take the profile's ``historyId`` *before*
  listing and hand it over only with the last page: mail arriving while the listing runs
  is then read by the next ``changes`` call, never stepped over; dedup absorbs what both
  see. Earlier pages carry a *sweep cursor* (``sweep_cursor``: that history id and the
  next page token): ``changes`` resumes the listing from it, so a resync cut short by a
  deadline goes on where it stopped instead of starting over.

A ``404`` from ``history.list`` (history too old, on any page), or a stored page token
Gmail no longer takes, raises ``CursorExpired``; the caller resyncs the label
(``initial("full")``), with dedup, and records it.

Content: ids are sized with ``messages.get(format="minimal")`` (``sizeEstimate``), those
within ``MAILPOLL_MAX_MESSAGE_BYTES`` fetched with ``format="raw"``, the others become
``TooBig`` with their header block from ``format="metadata"``; each of the three in
``BatchHttpRequest``s of at most ``BATCH_SIZE`` calls. Raw messages go in groups of at most
``BATCH_BYTES`` (estimated), a group per yielded ``Batch``: a page of large messages is never
in memory at once, and only the page's last ``Batch`` carries its cursor (the others ``None``).
A raw message larger than the limit whatever its estimate also becomes ``TooBig``. A message
deleted meanwhile (404) is left out.

A connection that fails (refused, reset, timed out) is a ``ProviderError`` naming the endpoint.
Throttling (429, 403 ``rateLimitExceeded``/``userRateLimitExceeded``), for a whole call or
for a part of a batch: bounded exponential backoff with jitter (``backoff_delay``,
``decide`` in ``gmail_rules``), then ``Throttled``. ``sleep`` and ``jitter`` are injectable. Errors and logs
never carry tokens; a token endpoint's refusal (``google.auth.exceptions.RefreshError``)
is left to the caller, whose token machinery decides what a refused grant means.
"""

from __future__ import annotations

import base64
import logging
import random
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, date, datetime

import google_auth_httplib2
import httplib2
from google.oauth2 import credentials as user_oauth
from google.oauth2 import service_account
from googleapiclient.discovery import build
from googleapiclient.errors import HttpError
from googleapiclient.http import BatchHttpRequest

from imports.searchconsole_client import NETWORK_ERRORS, endpoint_of, network_failure

from .. import conf
from .base import ProviderError
from .changes import Batch, CursorExpired, Throttled, TooBig
from .gmail_rules import (CALL_HISTORY, CALL_MESSAGE, CALL_OTHER, CALL_SWEEP, EXPIRED, GONE, MAX_ATTEMPTS, RETRY,
                          THROTTLED, added_to, backoff_delay, decide, header_block, is_sweep, metadata_headers,
                          parse_sweep, size_groups, sweep_cursor)

log = logging.getLogger(__name__)

SCOPES = ["https://www.googleapis.com/auth/gmail.readonly"]
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"
GMAIL_ENDPOINT = "https://gmail.googleapis.com/"
# The discovery document's batch path is the generic one, and the library joins it to the
# document's rootUrl even when api_endpoint points elsewhere: the batch URI is built here.
BATCH_PATH = "batch/gmail/v1"
BATCH_SIZE = 50  # Google advises at most 50 calls a batch for Gmail
# Raw messages of one batch request, and so of one yielded Batch, add up to at most this many
# (estimated) bytes: a page of large messages is not held in memory at once.
BATCH_BYTES = 16 * 1024 * 1024
PAGE_SIZE = 100
HTTP_TIMEOUT = 60


def error_reasons(exc: HttpError) -> list[str]:
    """The ``reason`` codes of a Google JSON error (``error.errors[].reason``)."""
    details = exc.error_details if isinstance(exc.error_details, list) else []
    return [d["reason"] for d in details if isinstance(d, dict) and isinstance(d.get("reason"), str)]


def delegated_credentials(account_info: dict, subject: str):
    """A Workspace service account's key impersonating ``subject`` (domain-wide delegation)."""
    return service_account.Credentials.from_service_account_info(account_info, scopes=SCOPES, subject=subject)


def user_credentials(*, refresh_token: str, client_id: str, client_secret: str | None,
                     token_uri: str = GOOGLE_TOKEN_URI, access_token: str | None = None, expiry=None):
    """A user's OAuth consent: refreshed by google-auth with the stored refresh token."""
    return user_oauth.Credentials(access_token, refresh_token=refresh_token, token_uri=token_uri,
                                  client_id=client_id, client_secret=client_secret, scopes=SCOPES, expiry=expiry)


def build_service(credentials, *, api_endpoint: str = GMAIL_ENDPOINT, http: httplib2.Http | None = None,
                  refresh_attempts: int = 2):
    """The Gmail v1 client from the discovery document shipped with the library (no network).

    ``refresh_attempts``: how many times a call answered 401 gets the credentials refreshed and is sent again.
    """
    authorized = google_auth_httplib2.AuthorizedHttp(credentials, http=http or httplib2.Http(timeout=HTTP_TIMEOUT),
                                                     max_refresh_attempts=refresh_attempts)
    return build("gmail", "v1", http=authorized, static_discovery=True, cache_discovery=False,
                 client_options={"api_endpoint": api_endpoint})


def _decode_raw(data: str) -> bytes:
    return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))


def _unique(ids: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(ids))


class GmailSource:
    """One label of one Gmail mailbox, through a ``build_service`` client."""

    def __init__(self, service, *, label: str = "INBOX", user_id: str = "me", api_endpoint: str = GMAIL_ENDPOINT,
                 max_bytes: int | None = None, page_size: int = PAGE_SIZE, batch_size: int = BATCH_SIZE,
                 batch_bytes: int = BATCH_BYTES,
                 max_attempts: int = MAX_ATTEMPTS, sleep: Callable[[float], None] = time.sleep,
                 jitter: Callable[[], float] = random.random, mailbox: str = ""):
        self.service = service
        self.label = label
        self.user_id = user_id
        self.batch_uri = api_endpoint.rstrip("/") + "/" + BATCH_PATH
        self.max_bytes = conf.get("MAILPOLL_MAX_MESSAGE_BYTES") if max_bytes is None else max_bytes
        self.page_size = page_size
        self.batch_size = batch_size
        self.batch_bytes = batch_bytes
        self.max_attempts = max_attempts
        self.sleep = sleep
        self.jitter = jitter
        self.mailbox = mailbox  # for the logs

    # -- the reading -------------------------------------------------------------

    def labels(self) -> dict[str, str]:
        """The mailbox's labels, id -> name (one ``labels.list``)."""
        answer = self._call(lambda: self._users().labels().list(userId=self.user_id), call=CALL_OTHER)
        return {str(label["id"]): str(label.get("name") or label["id"]) for label in answer.get("labels", [])}

    def initial(self, mode: str, since: date | None = None) -> Iterator[Batch]:
        """A label's first poll (or a resync): ``mode`` is a ``Mailbox.initial_mode`` value.

        ``new-only`` yields one empty batch with the current ``historyId``; ``since`` lists mail
        received from midnight UTC of ``since`` on; ``full`` lists the whole label.
        """
        if mode not in ("new-only", "since", "full"):
            raise ValueError(f"unknown initial mode {mode!r}")
        if mode == "since" and since is None:
            raise ValueError("mode 'since' needs a date")
        start = str(self._call(lambda: self._users().getProfile(userId=self.user_id), call=CALL_OTHER)["historyId"])
        if mode == "new-only":
            yield Batch([], start)
            return
        query = ""
        if mode == "since":
            query = f"after:{int(datetime(since.year, since.month, since.day, tzinfo=UTC).timestamp())}"
        yield from self._listing(start, query, None)

    def changes(self, cursor: str) -> Iterator[Batch]:
        """What came after ``cursor``: messages added to the label after that history id, a batch per
        history page; or, for a sweep cursor, the rest of that listing.

        Raises ``CursorExpired`` when Gmail no longer has that history (or that listing page), on any page.
        """
        if is_sweep(cursor):
            yield from self._listing(*parse_sweep(cursor))
            return
        page_token = None
        while True:
            def page(token=page_token):
                return self._users().history().list(userId=self.user_id, startHistoryId=cursor,
                                                    historyTypes=["messageAdded", "labelAdded"],
                                                    labelId=self.label,
                                                    pageToken=token, maxResults=self.page_size)
            answer = self._call(page, call=CALL_HISTORY, cursor=cursor)
            records = answer.get("history", [])
            page_token = answer.get("nextPageToken")
            ids = [mid for record in records for mid in added_to(record, self.label)]
            last = str(records[-1]["id"]) if records else None
            safe = last if page_token else str(answer.get("historyId") or last or cursor)
            yield from self._batches(ids, safe)
            if not page_token:
                return

    def _listing(self, start: str, query: str, page_token: str | None) -> Iterator[Batch]:
        """``messages.list`` of the label from ``page_token`` on; ``start`` is the history id taken before."""
        while True:
            def listing(token=page_token):
                return self._users().messages().list(userId=self.user_id, labelIds=[self.label], q=query or None,
                                                     pageToken=token, maxResults=self.page_size)
            answer = self._call(listing, call=CALL_SWEEP if page_token else CALL_OTHER, cursor=start)
            page_token = answer.get("nextPageToken")
            yield from self._batches((m["id"] for m in answer.get("messages", [])),
                                     sweep_cursor(start, query, page_token) if page_token else start)
            if not page_token:
                return

    # -- content -----------------------------------------------------------------

    def _batches(self, ids: Iterable[str], cursor: str | None) -> Iterator[Batch]:
        """The messages ``ids`` as batches bounded in count and bytes; only the last carries ``cursor``."""
        ids = _unique(ids)
        sizes = self._get_many(ids, "minimal")
        estimate = {mid: int(sizes[mid].get("sizeEstimate", 0)) for mid in ids if mid in sizes}
        big = [mid for mid in estimate if estimate[mid] > self.max_bytes]
        metadata = self._get_many(big, "metadata")
        items: list[tuple[str, bytes | TooBig]] = [(mid, TooBig(estimate[mid], metadata_headers(metadata[mid])))
                                                   for mid in big if mid in metadata]
        groups = size_groups([mid for mid in estimate if estimate[mid] <= self.max_bytes], estimate,
                             max_count=self.batch_size, max_bytes=self.batch_bytes)
        for at, group in enumerate(groups):
            for mid, resource in self._get_many(group, "raw").items():
                data = _decode_raw(resource.get("raw", ""))
                items.append((mid, data if len(data) <= self.max_bytes else TooBig(len(data), header_block(data))))
            if at < len(groups) - 1:
                yield Batch(items, None)
                items = []
        yield Batch(items, cursor)

    def _get_many(self, ids: list[str], fmt: str) -> dict[str, dict]:
        """``messages.get`` of each id in ``format=fmt``, batched; a deleted message is absent."""
        found: dict[str, dict] = {}
        pending, attempt = list(ids), 0
        while pending:
            attempt += 1
            failed: dict[str, HttpError] = {}

            def collect(request_id, response, exception, failed=failed):
                if exception is None:
                    found[request_id] = response
                elif isinstance(exception, HttpError):
                    failed[request_id] = exception
                else:
                    raise exception

            for at in range(0, len(pending), self.batch_size):
                chunk = pending[at: at + self.batch_size]
                self._call(lambda chunk=chunk: self._batch(chunk, fmt, collect), call=CALL_OTHER)
            pending, retry_after = [], None
            for mid, exc in failed.items():
                verdict = decide(exc.resp.status, error_reasons(exc), call=CALL_MESSAGE, attempt=attempt,
                                 max_attempts=self.max_attempts)
                if verdict == RETRY:
                    pending.append(mid)
                    retry_after = exc.resp.get("retry-after", retry_after)
                elif verdict != GONE:
                    raise self._failure(verdict, exc)
            if pending:
                self._pause(attempt, retry_after, f"{len(pending)} messages.get of a batch")
        return found

    def _batch(self, chunk: list[str], fmt: str, callback) -> BatchHttpRequest:
        batch = BatchHttpRequest(callback=callback, batch_uri=self.batch_uri)
        for mid in chunk:
            batch.add(self._users().messages().get(userId=self.user_id, id=mid, format=fmt), request_id=mid)
        return batch

    # -- calls -------------------------------------------------------------------

    def _users(self):
        return self.service.users()

    def _call(self, make_request, *, call: str, cursor: str | None = None):
        """``make_request().execute()``, again after throttling (a fresh request each attempt)."""
        attempt = 0
        while True:
            attempt += 1
            request = make_request()
            try:
                return request.execute()
            except NETWORK_ERRORS as exc:
                failure = network_failure(exc)
                if failure is None:
                    raise
                # Not retried here: the poller's own backoff per mailbox paces a server that is down.
                uri = getattr(request, "uri", None) or getattr(request, "_batch_uri", "")
                raise ProviderError(f"Gmail API at {endpoint_of(uri)} could not be reached: {failure}") from None
            except HttpError as exc:
                verdict = decide(exc.resp.status, error_reasons(exc), call=call, attempt=attempt,
                                 max_attempts=self.max_attempts)
                if verdict != RETRY:
                    raise self._failure(verdict, exc, cursor) from None
                self._pause(attempt, exc.resp.get("retry-after"), f"HTTP {exc.resp.status}")

    def _pause(self, attempt: int, retry_after: str | None, what: str) -> None:
        delay = backoff_delay(attempt, self.jitter(), retry_after)
        log.warning("mailbox=%s folder=%s Gmail throttled (%s), attempt %s/%s, retrying in %.1fs",
                    self.mailbox, self.label, what, attempt, self.max_attempts, delay)
        self.sleep(delay)

    def _failure(self, verdict: str, exc: HttpError, cursor: str | None = None) -> ProviderError:
        status = exc.resp.status
        reason = str(exc.reason)[:300]
        if verdict == EXPIRED:
            return CursorExpired(f"Gmail no longer takes the cursor of label {self.label} (from history "
                                 f"{cursor}; HTTP {status}: {reason})")
        if verdict == THROTTLED:
            return Throttled(f"Gmail kept throttling label {self.label} after {self.max_attempts} attempts "
                             f"(HTTP {status}: {reason})", retry_after=_seconds(exc.resp.get("retry-after")))
        return ProviderError(f"Gmail refused a call on label {self.label} (HTTP {status}: {reason})")


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
