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
deleted meanwhile (404) is left out. Raw bytes and header blocks come as ``RawMessage``s carrying the
message's ``internalDate``, the store's fallback for a message without a ``Date:``.

Every answer is read to a bound in bytes (``seoinsight.bounded_http``): ``answer_bytes`` of the batch's estimates for
messages, a few MB for the rest. A batch of raw messages that overflows its bound (estimates that lie)
is fetched again one message at a time; a message alone over its bound becomes ``TooBig`` with the
bytes actually read; any other answer over its bound is a ``ProviderError`` saying so. Every value that
may become a cursor is checked first (``gmail_rules.history_id``, ``page_token``): an answer not in the
Gmail API's shape is ``NotGmail``, the cursor unmoved, details in the log. A stored cursor that is no
Gmail cursor is ``CursorExpired`` (resynced, recorded). A redirect is never followed (``RedirectRefused``).

Changes (``modify``, the poller's post-actions) are one ``messages.modify`` per message, never
``batchModify``, which would hide a message deleted meanwhile; the history records they cause
(``labelAdded``/``labelRemoved``) bring a message into a label only when that label is the one
added (``added_to``), so a message changed after it was read is not read again, and the cursor
still moves over mail that arrived meanwhile.

A connection that fails (refused, reset, timed out) is a ``ProviderError`` naming the endpoint's host.
Throttling (429, 403 ``rateLimitExceeded``/``userRateLimitExceeded``), for a whole call or
for a part of a batch: bounded exponential backoff with jitter (``backoff_delay``,
``decide`` in ``gmail_rules``), then ``Throttled``. ``sleep`` and ``jitter`` are injectable. Errors and logs
never carry tokens; a token endpoint's refusal (``google.auth.exceptions.RefreshError``)
is left to the caller, whose token machinery decides what a refused grant means.
"""

from __future__ import annotations

import base64
import contextlib
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
from googleapiclient.errors import BatchError, HttpError
from googleapiclient.http import BatchHttpRequest

from imports.searchconsole_client import NETWORK_ERRORS, network_failure
from seoinsight.bounded_http import DEFAULT_BYTES, BoundedHttp, limited
from seoinsight.outbound import BodyTooLarge, RedirectRefused, scrub, where

from .. import conf
from .base import ProviderError, RawMessage
from .changes import Batch, CursorExpired, Throttled, TooBig
from .gmail_rules import (CALL_HISTORY, CALL_MESSAGE, CALL_OTHER, CALL_SWEEP, EXPIRED, GONE, MAX_ATTEMPTS,
                          MINIMAL_BYTES, RETRY, THROTTLED, NotGmail, added_to, answer_bytes, backoff_delay, decide,
                          header_block, history_id, internal_date, is_sweep, message_id, metadata_headers, page_token,
                          parse_sweep, size_estimate, size_groups, stored_cursor_problem, sweep_cursor)

log = logging.getLogger(__name__)

SCOPES = ["https://www.googleapis.com/auth/gmail.readonly"]
# What changing messages (post-actions) needs; asked for only by the code that changes them.
MODIFY_SCOPE = "https://www.googleapis.com/auth/gmail.modify"
MODIFY_SCOPES = [MODIFY_SCOPE]
# How Gmail says a token lacks the scope a call needs: ``errors[].reason``, or the ErrorInfo of ``details``.
SCOPE_REASONS = frozenset({"insufficientPermissions", "ACCESS_TOKEN_SCOPE_INSUFFICIENT"})
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


# What a shape error looks like once the JSON is decoded: a list where a dict was due, a missing key...
SHAPE_ERRORS = (KeyError, TypeError, AttributeError, ValueError, IndexError, RecursionError)


class AnswerTooLarge(ProviderError):
    """An answer passed the bytes allowed for its call; ``read`` is how many were read before stopping."""

    def __init__(self, message: str, read: int):
        super().__init__(message)
        self.read = read


class Refused(ProviderError):
    """Gmail answered a call with an HTTP error that is neither throttling nor a deleted message."""

    def __init__(self, message: str, *, status: int, reasons: list[str], reason: str):
        super().__init__(message)
        self.status = status
        self.reasons = reasons
        self.reason = reason  # Gmail's message, scrubbed and cut short

    @property
    def insufficient_scope(self) -> bool:
        """The token lacks the scope the call needs (a read-only grant asked to change a message)."""
        return self.status == 403 and (bool(SCOPE_REASONS & set(self.reasons))
                                       or "insufficient authentication scopes" in self.reason.lower())


def error_reasons(exc: HttpError) -> list[str]:
    """The ``reason`` codes of a Google JSON error (``error.errors[].reason``)."""
    details = getattr(exc, "error_details", None)
    details = details if isinstance(details, list) else []
    return [d["reason"] for d in details if isinstance(d, dict) and isinstance(d.get("reason"), str)]


def delegated_credentials(account_info: dict, subject: str, scopes: list[str] = SCOPES):
    """A Workspace service account's key impersonating ``subject`` (domain-wide delegation) for ``scopes``."""
    return service_account.Credentials.from_service_account_info(account_info, scopes=scopes, subject=subject)


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
    authorized = google_auth_httplib2.AuthorizedHttp(credentials, http=http or BoundedHttp(timeout=HTTP_TIMEOUT),
                                                     max_refresh_attempts=refresh_attempts)
    return build("gmail", "v1", http=authorized, static_discovery=True, cache_discovery=False,
                 client_options={"api_endpoint": api_endpoint})


def _decode_raw(data: str) -> bytes:
    if not isinstance(data, str):
        raise TypeError(f"raw is a {type(data).__name__}")
    return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))


@contextlib.contextmanager
def _shape(what: str, mailbox: str = ""):
    """Inside: an answer read as Gmail's API; what is not in its shape becomes NotGmail, details in the log."""
    try:
        yield
    except NotGmail as exc:
        if exc.what.startswith(what):
            raise
        raise NotGmail(f"{what}: {exc.what}") from None
    except SHAPE_ERRORS as exc:
        if isinstance(exc, OSError):  # ssl's certificate errors are ValueErrors too: the connection's, not the answer's
            raise
        log.warning("mailbox=%s Gmail's answer to %s is not in the API's shape: %s", mailbox, what,
                    scrub(repr(exc))[:500])
        raise NotGmail(f"{what}: {type(exc).__name__}") from None


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
        answer = self._call(lambda: self._users().labels().list(userId=self.user_id), call=CALL_OTHER,
                            what="labels.list")
        with self._shape("labels.list"):
            labels = {}
            for label in answer.get("labels", []):
                if not isinstance(label["id"], str) or not isinstance(label.get("name") or "", str):
                    raise TypeError("a label id or name that is not a string")
                labels[label["id"]] = label.get("name") or label["id"]
            return labels

    def initial(self, mode: str, since: date | None = None) -> Iterator[Batch]:
        """A label's first poll (or a resync): ``mode`` is a ``Mailbox.initial_mode`` value.

        ``new-only`` yields one empty batch with the current ``historyId``; ``since`` lists mail
        received from midnight UTC of ``since`` on; ``full`` lists the whole label.
        """
        if mode not in ("new-only", "since", "full"):
            raise ValueError(f"unknown initial mode {mode!r}")
        if mode == "since" and since is None:
            raise ValueError("mode 'since' needs a date")
        profile = self._call(lambda: self._users().getProfile(userId=self.user_id), call=CALL_OTHER,
                             what="getProfile")
        with self._shape("getProfile"):
            start = history_id(profile["historyId"])
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

        Raises ``CursorExpired`` when Gmail no longer has that history (or that listing page), on any page,
        and for a stored cursor that is no Gmail cursor at all (it would be refused forever).
        """
        problem = stored_cursor_problem(cursor)
        if problem:
            raise CursorExpired(f"the stored cursor of label {self.label} is {problem} ({len(cursor)} "
                                "characters): resyncing the label")
        if is_sweep(cursor):
            yield from self._listing(*parse_sweep(cursor))
            return
        token = None
        while True:
            def page(token=token):
                return self._users().history().list(userId=self.user_id, startHistoryId=cursor,
                                                    historyTypes=["messageAdded", "labelAdded"],
                                                    labelId=self.label,
                                                    pageToken=token, maxResults=self.page_size)
            answer = self._call(page, call=CALL_HISTORY, cursor=cursor, what="history.list")
            with self._shape("history.list"):
                records = answer.get("history", [])
                token = page_token(answer.get("nextPageToken"))
                ids = [message_id(mid) for record in records for mid in added_to(record, self.label)]
                last = history_id(records[-1]["id"]) if records else None
                current = answer.get("historyId")
                safe = last if token else (history_id(current) if current is not None else last or cursor)
            yield from self._batches(ids, safe)
            if not token:
                return

    def _listing(self, start: str, query: str, token: str | None) -> Iterator[Batch]:
        """``messages.list`` of the label from ``token`` on; ``start`` is the history id taken before."""
        while True:
            def listing(token=token):
                return self._users().messages().list(userId=self.user_id, labelIds=[self.label], q=query or None,
                                                     pageToken=token, maxResults=self.page_size)
            answer = self._call(listing, call=CALL_SWEEP if token else CALL_OTHER, cursor=start,
                                what="messages.list")
            with self._shape("messages.list"):
                token = page_token(answer.get("nextPageToken"))
                ids = [message_id(m["id"]) for m in answer.get("messages", [])]
            yield from self._batches(ids, sweep_cursor(start, query, token) if token else start)
            if not token:
                return

    # -- changes -----------------------------------------------------------------

    def modify(self, mid: str, *, add: list[str], remove: list[str]) -> bool:
        """One ``messages.modify`` of message ``mid`` (label ids); False if the message no longer exists.

        Throttling is paced like a read; any other refusal is ``Refused``, the connection's failures the
        usual ``ProviderError``s.
        """
        def change():
            return self._users().messages().modify(userId=self.user_id, id=mid,
                                                   body={"addLabelIds": add, "removeLabelIds": remove})
        return self._call(change, call=CALL_MESSAGE, limit=MINIMAL_BYTES, what="messages.modify") is not None

    # -- content -----------------------------------------------------------------

    def _batches(self, ids: Iterable[str], cursor: str | None) -> Iterator[Batch]:
        """The messages ``ids`` as batches bounded in count and bytes; only the last carries ``cursor``."""
        ids = _unique(ids)
        sizes, _ = self._get_many(ids, "minimal")
        with self._shape("messages.get (minimal)"):
            estimate = {mid: size_estimate(sizes[mid].get("sizeEstimate", 0)) for mid in ids if mid in sizes}
        big = [mid for mid in estimate if estimate[mid] > self.max_bytes]
        items: list[tuple[str, bytes | TooBig]] = self._too_big({mid: estimate[mid] for mid in big})
        groups = size_groups([mid for mid in estimate if estimate[mid] <= self.max_bytes], estimate,
                             max_count=self.batch_size, max_bytes=self.batch_bytes)
        for at, group in enumerate(groups):
            found, overflowed = self._get_many(group, "raw", estimate)
            with self._shape("messages.get (raw)"):
                for mid, resource in found.items():
                    data = _decode_raw(resource.get("raw", ""))
                    received = internal_date(resource.get("internalDate"))
                    items.append((mid, RawMessage(data, received) if len(data) <= self.max_bytes
                                   else TooBig(len(data), RawMessage(header_block(data), received))))
            # Larger than its bound whatever its estimate said: the size is what was read before stopping.
            items += self._too_big(overflowed)
            if at < len(groups) - 1:
                yield Batch(items, None)
                items = []
        yield Batch(items, cursor)

    def _too_big(self, sizes: dict[str, int]) -> list[tuple[str, TooBig]]:
        """``TooBig`` items of the messages ``sizes`` names, with their headers (``format=metadata``)."""
        found, overflowed = self._get_many(list(sizes), "metadata")
        with self._shape("messages.get (metadata)"):
            return [(mid, TooBig(sizes[mid], RawMessage(metadata_headers(found[mid]),
                                                        internal_date(found[mid].get("internalDate")))
                                 if mid in found else b""))
                    for mid in sizes if mid in found or mid in overflowed]

    def _get_many(self, ids: list[str], fmt: str, estimates: dict[str, int] | None = None,
                  ) -> tuple[dict[str, dict], dict[str, int]]:
        """``messages.get`` of each id in ``format=fmt``, batched; a deleted message is absent.

        Also returns the ids whose answer alone passed its bound, with the bytes read of it.
        """
        found: dict[str, dict] = {}
        overflowed: dict[str, int] = {}
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
                self._fetch(pending[at: at + self.batch_size], fmt, collect, estimates or {}, overflowed)
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
        return found, overflowed

    def _fetch(self, chunk: list[str], fmt: str, collect, estimates: dict[str, int], overflowed: dict[str, int]):
        """One batch request for ``chunk``, bounded by its estimates; past the bound, each id in one of its own.

        A raw message alone is one plain ``messages.get``: a batch answer is copied several times over
        while it is parsed, which for a message near the limit is hundreds of MB.
        """
        limit = answer_bytes(fmt, [estimates.get(mid, 0) for mid in chunk], max_bytes=self.max_bytes)
        try:
            if fmt == "raw" and len(chunk) == 1:
                def get(mid=chunk[0]):
                    return self._users().messages().get(userId=self.user_id, id=mid, format=fmt)
                resource = self._call(get, call=CALL_MESSAGE, limit=limit, what="messages.get (raw)")
                if resource is not None:  # None: deleted since it was listed
                    collect(chunk[0], resource, None)
            else:
                self._call(lambda: self._batch(chunk, fmt, collect), call=CALL_OTHER, limit=limit,
                           what=f"a batch of {len(chunk)} messages.get ({fmt})")
        except AnswerTooLarge as exc:
            if len(chunk) > 1:
                log.warning("mailbox=%s folder=%s %s; fetching them one by one", self.mailbox, self.label, exc)
                for mid in chunk:
                    self._fetch([mid], fmt, collect, estimates, overflowed)
            elif fmt == "minimal":
                raise
            else:
                overflowed[chunk[0]] = exc.read

    def _batch(self, chunk: list[str], fmt: str, callback) -> BatchHttpRequest:
        batch = BatchHttpRequest(callback=callback, batch_uri=self.batch_uri)
        for mid in chunk:
            batch.add(self._users().messages().get(userId=self.user_id, id=mid, format=fmt), request_id=mid)
        return batch

    # -- calls -------------------------------------------------------------------

    def _users(self):
        return self.service.users()

    def _shape(self, what: str):
        return _shape(what, self.mailbox)

    def _call(self, make_request, *, call: str, what: str, cursor: str | None = None, limit: int = DEFAULT_BYTES):
        """``make_request().execute()``, its answer held to ``limit`` bytes, again after throttling (a fresh
        request each attempt)."""
        attempt = 0
        while True:
            attempt += 1
            request = make_request()
            uri = getattr(request, "uri", None) or getattr(request, "_batch_uri", "")
            try:
                with limited(limit), self._shape(what):
                    return request.execute()
            except BodyTooLarge as exc:
                raise AnswerTooLarge(f"Gmail's answer to {what} at {where(uri)} passed {exc.limit:,} bytes "
                                     f"(read {exc.read:,} before stopping)", exc.read) from None
            except RedirectRefused as exc:
                raise ProviderError(f"Gmail API: {exc}") from None
            except NETWORK_ERRORS as exc:
                failure = network_failure(exc)
                if failure is None:
                    raise
                # Not retried here: the poller's own backoff per mailbox paces a server that is down.
                raise ProviderError(f"Gmail API at {where(uri)} could not be reached: {scrub(failure)}") from None
            except BatchError as exc:
                log.warning("mailbox=%s Gmail's batch answer at %s is not in the API's shape: %s", self.mailbox,
                            where(uri), scrub(str(exc.reason))[:300])
                raise NotGmail(f"{what}: a batch answer that is not multipart/mixed in Google's form") from None
            except HttpError as exc:
                verdict = decide(exc.resp.status, error_reasons(exc), call=call, attempt=attempt,
                                 max_attempts=self.max_attempts)
                if verdict == GONE:
                    return None
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
        reason = scrub(str(exc.reason))[:300]
        if verdict == EXPIRED:
            return CursorExpired(f"Gmail no longer takes the cursor of label {self.label} (from history "
                                 f"{cursor}; HTTP {status}: {reason})")
        if verdict == THROTTLED:
            return Throttled(f"Gmail kept throttling label {self.label} after {self.max_attempts} attempts "
                             f"(HTTP {status}: {reason})", retry_after=_seconds(exc.resp.get("retry-after")))
        return Refused(f"Gmail refused a call on label {self.label} (HTTP {status}: {reason})", status=status,
                       reasons=error_reasons(exc), reason=reason)


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
