"""What Graph's answers must be before the Graph source acts on them, and its retry rules: pure functions.

Answers are not trusted (issue 19): each has a cap of bytes (``page_cap``, ``HEADERS_BYTES``,
``ERROR_BYTES``), a shape checked before use (``decode_json``, ``delta_page``, ``header_block``,
``error_of``: else ``NotGraph``, whose message is short and whose ``detail`` is for the log), and a
link is followed or kept as a cursor only under the configured API base (``under_api``).
``throttle_wait`` says how long a throttled request waits, within the poll's time; ``received_time``
when a listed message was received.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import json
import math
import urllib.parse

from seoinsight.outbound import EndpointError, endpoint, scrub

from .base import ProviderError

# Delta error codes meaning "this sync state is gone": start over (seen with 410 and, for some, 400).
EXPIRED_CODES = frozenset({"syncstatenotfound", "syncstateinvalid", "resyncrequired"})
# A folder Graph does not have: an id of a deleted folder (404), or a name that is neither a well-known name nor
# an id (400: Graph takes it for a malformed id).
MISSING_FOLDER_CODES = frozenset({"erroritemnotfound", "errorinvalididmalformed"})
THROTTLE_STATUSES = frozenset({429, 503})
MAX_THROTTLE_RETRIES = 5
MAX_THROTTLE_WAIT = 120.0  # seconds; a longer Retry-After is left to a later poll
# The bytes one answer may hold. A delta item ($select=id,receivedDateTime and one extended property) is under
# 1 KB: these are generous for Graph and small for a process that polls many mailboxes at once.
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


def received_time(item: dict) -> dt.datetime | None:
    """A delta item's ``receivedDateTime`` (ISO 8601, UTC: ``2026-06-01T09:30:00Z``) as an aware datetime; None
    when it is absent or not a time. Only a fallback for a missing ``Date:``, so never a reason to refuse.

    >>> received_time({"id": "A", "receivedDateTime": "2026-06-01T09:30:00Z"})
    datetime.datetime(2026, 6, 1, 9, 30, tzinfo=datetime.timezone.utc)
    >>> received_time({"id": "A"}), received_time({"receivedDateTime": 17}), received_time({"receivedDateTime": "x"})
    (None, None, None)
    """
    value = item.get("receivedDateTime")
    if not isinstance(value, str) or len(value) > 40:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.astimezone(dt.UTC) if parsed.tzinfo is not None else parsed.replace(tzinfo=dt.UTC)


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

    >>> base = "https://graph.microsoft.com/v1.0"
    >>> under_api("https://graph.microsoft.com/v1.0/users/u/messages/delta?$deltatoken=x", base)
    True
    >>> under_api("https://graph.microsoft.com/beta/users/u", base), under_api("https://a.example/v1.0/x", base)
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
