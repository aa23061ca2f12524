"""Gmail's pure decisions: backoff, what a failed call means, cursors (history ids, sweep cursors) and what
may become one, history records, grouping, the bytes an answer may take, when a message was received, which
label a folder names, and what to fix when Google refuses a service account.

Plain functions over plain values, so each is table-tested without a server; ``gmail.py``
makes the calls.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlencode

from seoinsight.backoff import doubling

from .base import ProviderError
from .changes import CursorExpired

MAX_ATTEMPTS = 5
BACKOFF_FIRST = 1.0
BACKOFF_MAX = 32.0
THROTTLE_REASONS = frozenset({"rateLimitExceeded", "userRateLimitExceeded"})

# What ``decide`` says of a failed call.
RETRY = "retry"  # throttled, attempts left: pause, then again
THROTTLED = "throttled"  # throttled, no attempts left
EXPIRED = "expired"  # the history id is too old
GONE = "gone"  # the message was deleted since it was listed
FAIL = "fail"  # anything else: the caller's error

# What was called, for ``decide``.
CALL_HISTORY = "history"
CALL_MESSAGE = "message"
CALL_SWEEP = "sweep"  # messages.list from a stored page token
CALL_OTHER = "other"
SWEEP = "sweep?"

# Gmail's history ids are unsigned 64-bit integers, sent as decimal strings.
HISTORY_ID = re.compile(r"[0-9]{1,20}")
# Page tokens and message ids are opaque, but short and URL-safe; anything else is not Gmail's.
PAGE_TOKEN = re.compile(r"[0-9A-Za-z_\-.~+/=]{1,512}")
MESSAGE_ID = re.compile(r"[0-9A-Za-z_\-]{1,128}")
INTERNAL_DATE = re.compile(r"[0-9]{1,16}")

# The bytes one message's part of an answer may take besides its content: JSON fields, a batch part's headers.
PART_OVERHEAD = 16 * 1024
MINIMAL_BYTES = 16 * 1024  # a format=minimal answer: ids, labels, sizeEstimate
HEADERS_BYTES = 256 * 1024  # a format=metadata answer: the header block


class NotGmail(ProviderError):
    """What answered at Gmail's address sent something that is not the Gmail API's shape."""

    def __init__(self, what: str):
        super().__init__(f"Gmail answered something that is not its API ({what})")
        self.what = what


def history_id(value) -> str:
    """``value`` as a history id that may be committed; NotGmail if it is not one.

    >>> history_id("1042"), history_id(1042)
    ('1042', '1042')
    >>> history_id({"x": 1})
    Traceback (most recent call last):
    ...
    mailpoll.providers.gmail_rules.NotGmail: Gmail answered something that is not its API (a historyId that is a dict)
    """
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2 ** 64:
        return str(value)
    if isinstance(value, str) and HISTORY_ID.fullmatch(value):
        return value
    return _not_gmail("a historyId", value)


def page_token(value) -> str | None:
    """A ``nextPageToken`` (None: the last page); NotGmail for anything Gmail does not send."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and PAGE_TOKEN.fullmatch(value):
        return value
    return _not_gmail("a nextPageToken", value)


def message_id(value) -> str:
    """A message id as Gmail names one; NotGmail otherwise."""
    if isinstance(value, str) and MESSAGE_ID.fullmatch(value):
        return value
    return _not_gmail("a message id", value)


def size_estimate(value) -> int:
    """A ``sizeEstimate``: a count of bytes."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return _not_gmail("a sizeEstimate", value)


def _not_gmail(what: str, value):
    kind = type(value).__name__ if not isinstance(value, str) else f"string of {len(value)} characters"
    raise NotGmail(f"{what} that is a {kind}")


def stored_cursor_problem(cursor: str) -> str:
    """Why a stored cursor cannot be handed to Gmail (then the label is resynced), or "".

    >>> [stored_cursor_problem(c) for c in ("1042", sweep_cursor("1042", "", "0912"))]
    ['', '']
    >>> stored_cursor_problem("{'x': 1}"), stored_cursor_problem("sweep?start=abc&q=&page=1")
    ('not a Gmail history id', 'not a Gmail sweep cursor')
    """
    if not is_sweep(cursor):
        return "" if HISTORY_ID.fullmatch(cursor) else "not a Gmail history id"
    fields = parse_qs(cursor[len(SWEEP):], keep_blank_values=True)
    if not all(len(fields.get(name, ())) == 1 for name in ("start", "q", "page")):
        return "not a Gmail sweep cursor"
    if not HISTORY_ID.fullmatch(fields["start"][0]) or not PAGE_TOKEN.fullmatch(fields["page"][0]):
        return "not a Gmail sweep cursor"
    return ""


def answer_bytes(fmt: str, estimates: list[int], *, max_bytes: int) -> int:
    """The most bytes a batch answer of ``messages.get`` in ``fmt`` for messages of ``estimates`` may take.

    Raw content comes base64-encoded (4/3 of it); a group of several is held to its estimates, with an
    eighth's margin, so estimates that lie overflow it (then each message is fetched alone); a message
    alone may take what a message within ``max_bytes`` takes, whatever its estimate said.

    >>> answer_bytes("raw", [300], max_bytes=3000), answer_bytes("raw", [300, 300], max_bytes=3000)
    (20384, 33642)
    >>> answer_bytes("minimal", [0] * 50, max_bytes=3000) == 50 * MINIMAL_BYTES
    True
    """
    if fmt == "minimal":
        return len(estimates) * MINIMAL_BYTES
    if fmt == "metadata":
        return len(estimates) * HEADERS_BYTES
    if len(estimates) == 1:
        return _base64_length(max_bytes) + PART_OVERHEAD
    return sum(_base64_length(size) + min(size, max_bytes) // 8 + PART_OVERHEAD
               for size in (min(e, max_bytes) for e in estimates))


def _base64_length(size: int) -> int:
    return -(-size // 3) * 4


def backoff_delay(attempt: int, jitter: float, retry_after: str | None = None, *,
                  first: float = BACKOFF_FIRST, cap: float = BACKOFF_MAX) -> float:
    """Seconds to wait after throttled attempt ``attempt`` (1-based); ``jitter`` is in [0, 1).

    "Equal jitter": between half and all of the doubling step, so pollers throttled together
    spread out and no pause is ever near zero (no hot loop). A numeric ``Retry-After`` wins,
    capped at ``cap``:

    >>> [backoff_delay(n, 0.0) for n in (1, 2, 3, 6, 9)]
    [0.5, 1.0, 2.0, 16.0, 16.0]
    >>> backoff_delay(3, 0.999) < 4.0, backoff_delay(1, 0.0, "7"), backoff_delay(1, 0.5, "3600")
    (True, 7.0, 32.0)
    """
    if retry_after is not None:
        try:
            return min(max(float(retry_after), 0.0), cap)
        except ValueError:
            pass
    # The jitter is Gmail's own, outside the shared doubling rule.
    return doubling(attempt, first, cap) / 2 * (1 + jitter)


def decide(status: int, reasons: Iterable[str], *, call: str, attempt: int, max_attempts: int) -> str:
    """What to do after call ``call`` failed with HTTP ``status`` on attempt ``attempt``.

    Only throttling is retried; a 404 means an expired cursor for ``history.list`` and a deleted
    message for ``messages.get``; a listing resumed from a stored page token that Gmail refuses
    (400, 404) is an expired cursor too; everything else fails at once (a bad grant, a missing label).
    """
    throttled = status == 429 or (status == 403 and bool(THROTTLE_REASONS & set(reasons)))
    if throttled:
        return RETRY if attempt < max_attempts else THROTTLED
    if status == 404 and call == CALL_HISTORY:
        return EXPIRED
    if status == 404 and call == CALL_MESSAGE:
        return GONE
    if status in (400, 404) and call == CALL_SWEEP:  # the stored page token is no longer taken
        return EXPIRED
    return FAIL


def sweep_cursor(start: str, query: str, page_token: str) -> str:
    """The cursor of an unfinished listing: resume at ``page_token``, then commit ``start``.

    >>> sweep_cursor("1042", "after:1704067200", "0912")
    'sweep?start=1042&q=after%3A1704067200&page=0912'
    >>> parse_sweep(sweep_cursor("1042", "", "Zx/9+a=="))
    ('1042', '', 'Zx/9+a==')
    """
    return SWEEP + urlencode({"start": start, "q": query, "page": page_token})


def is_sweep(cursor: str) -> bool:
    """Whether ``cursor`` is an unfinished listing's (a resync in progress) rather than a history id."""
    return cursor.startswith(SWEEP)


def parse_sweep(cursor: str) -> tuple[str, str, str]:
    """``(start, query, page_token)`` of a sweep cursor."""
    if stored_cursor_problem(cursor):
        raise CursorExpired(f"not a Gmail sweep cursor: {cursor[:100]!r}")
    fields = parse_qs(cursor[len(SWEEP):], keep_blank_values=True)
    return fields["start"][0], fields["q"][0], fields["page"][0]


def added_to(record: dict, label: str) -> list[str]:
    """The ids a history record brings into ``label``: messages added (``labelId`` has Gmail
    keep only the label's), and messages given the label later (out of Spam, moved into the
    inbox), as IMAP shows a message moved into a folder as a new one. Dedup absorbs repeats.

    >>> added_to({"messagesAdded": [{"message": {"id": "a"}}],
    ...           "labelsAdded": [{"message": {"id": "b"}, "labelIds": ["INBOX"]},
    ...                           {"message": {"id": "c"}, "labelIds": ["STARRED"]}]}, "INBOX")
    ['a', 'b']
    """
    ids = [added["message"]["id"] for added in record.get("messagesAdded", [])]
    ids += [added["message"]["id"] for added in record.get("labelsAdded", []) if label in added.get("labelIds", [])]
    return ids


def size_groups(ids: list[str], sizes: dict[str, int], *, max_count: int, max_bytes: int) -> list[list[str]]:
    """``ids`` cut, in order, into groups of at most ``max_count`` ids and ``max_bytes`` bytes
    (a single id larger than that is a group of its own).

    >>> size_groups(["a", "b", "c", "d"], {"a": 5, "b": 5, "c": 20, "d": 1}, max_count=3, max_bytes=10)
    [['a', 'b'], ['c'], ['d']]
    """
    groups: list[list[str]] = []
    total = 0
    for mid in ids:
        if not groups or len(groups[-1]) >= max_count or total + sizes[mid] > max_bytes:
            groups.append([])
            total = 0
        groups[-1].append(mid)
        total += sizes[mid]
    return groups


def header_block(raw: bytes) -> bytes:
    """The header block of a raw message, blank line included."""
    for end in (b"\r\n\r\n", b"\n\n"):
        at = raw.find(end)
        if at >= 0:
            return raw[: at + len(end)]
    return raw


def metadata_headers(resource: dict) -> bytes:
    """A header block rebuilt from a ``format=metadata`` resource's ``payload.headers``."""
    lines = [f"{h.get('name', '')}: {h.get('value', '')}\r\n"
             for h in resource.get("payload", {}).get("headers", [])]
    return ("".join(lines) + "\r\n").encode("utf-8", "surrogateescape")


def internal_date(value) -> datetime | None:
    """A message resource's ``internalDate`` (milliseconds since the epoch, as a decimal string: when Gmail
    received it) as an aware datetime; None for anything else. Only a fallback for a missing ``Date:``, so a
    value out of shape is no reason to refuse the message.

    >>> internal_date("1700000000123")
    datetime.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=datetime.timezone.utc)
    >>> internal_date(None), internal_date("-5"), internal_date("9" * 20), internal_date(1700000000000)
    (None, None, None, None)
    """
    if not isinstance(value, str) or not INTERNAL_DATE.fullmatch(value):
        return None
    try:
        return datetime.fromtimestamp(int(value) / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def resolve_label(folder: str, labels: dict[str, str]) -> str | None:
    """The id of the label a mailbox folder names, among ``labels`` (id -> name); None if there is none.

    A folder is a label id (``INBOX``, ``Label_12``) or, for a user label, its name; Gmail keeps label
    names unique whatever their case, so a name matches case-insensitively when no exact match exists.

    >>> labels = {"INBOX": "INBOX", "Label_3": "Clients/Reports", "Label_4": "reports"}
    >>> [resolve_label(f, labels) for f in ("INBOX", "Label_3", "Clients/Reports", "REPORTS", "inbox", "Nope")]
    ['INBOX', 'Label_3', 'Label_3', 'Label_4', 'INBOX', None]
    """
    if folder in labels:
        return folder
    exact = [label_id for label_id, name in labels.items() if name == folder]
    if exact:
        return exact[0]
    folded = folder.casefold()
    return next((label_id for label_id, name in labels.items() if name.casefold() == folded), None)


# What a service account's refused token request means, by the token endpoint's ``error``.
DELEGATION = "unauthorized_client"


def service_refusal_hint(error: str, description: str, *, client_id: str, subject: str) -> str:
    """What an operator should fix when Google's token endpoint refuses a delegated service account.

    >>> service_refusal_hint("unauthorized_client", "Client is unauthorized", client_id="1001", subject="a@x.example")[:52]
    'domain-wide delegation is not granted to client id 1'
    >>> service_refusal_hint("invalid_grant", "Invalid email or User ID", client_id="1001", subject="a@x.example")
    'no Workspace user a@x.example (or it is suspended): check the mailbox username'
    >>> service_refusal_hint("invalid_grant", "Invalid JWT Signature.", client_id="1001", subject="a@x.example")[:28]
    'the key itself was refused: '
    """
    if error == DELEGATION or "not authorized" in description.lower():
        return (f"domain-wide delegation is not granted to client id {client_id} for the scope "
                "https://www.googleapis.com/auth/gmail.readonly: add it in the Google Workspace admin console "
                "(Security, API controls, Domain-wide delegation)")
    if error == "invalid_grant" and ("user" in description.lower() or "email" in description.lower()):
        return f"no Workspace user {subject} (or it is suspended): check the mailbox username"
    if error == "invalid_grant":
        return ("the key itself was refused: it may have been deleted or disabled, or its service account "
                "removed; create a new JSON key and store it on the mailbox")
    return "check the service account and its key in the Google Cloud console"
