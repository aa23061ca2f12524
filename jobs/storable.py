"""What a run produced, made storable; and the task API's values, refused unless stored faithfully.

PostgreSQL refuses NUL in text and jsonb, NaN/Infinity and lone surrogates in
jsonb; a huge value costs every page that shows it. A finish must land whatever
a handler produced, so its report, error and progress are cleaned and capped. A
task's arguments and return value are the caller's data: never cleaned, refused.
"""

from __future__ import annotations

import json
import math

from django.core.serializers.json import DjangoJSONEncoder

MAX_ERROR_CHARS = 2000
MAX_TRACEBACK_CHARS = 20_000
MAX_REPORT_BYTES = 1_000_000
MAX_REPORT_DEPTH = 64
REPLACEMENT = "\ufffd"


class JSONRoundTripError(ValueError):
    """A task's value that JSON (jsonb) would not give back as it is; the message says where and why."""


class UnstorableReport(ValueError):
    """The handler's report is not JSON at all (a set, an object); the message says what."""


def storable_text(text, limit: int, *, keep: str = "head") -> str:
    """``text`` without what PostgreSQL refuses (NUL, lone surrogates), at most ``limit`` characters.

    >>> storable_text("a\\x00b", 10) == "a\\ufffdb"
    True
    >>> storable_text("x" * 20, 8), storable_text("x" * 20 + "END", 8, keep="tail")
    ('xxxxxxx…', '…xxxxEND')
    """
    text = str(text)
    if len(text) > limit:
        text = text[: limit - 1] + "…" if keep == "head" else "…" + text[-(limit - 1):]
    return _clean_str(text)


def storable(value, depth: int = 0):
    """A copy of a JSON-able ``value`` that jsonb accepts.

    NUL and lone surrogates in strings (and keys) become U+FFFD, NaN and ±Infinity
    become null (JSON has neither), nesting deeper than MAX_REPORT_DEPTH becomes
    the string "…". Types the encoder knows (dates, UUIDs, Decimals) pass through.
    """
    if isinstance(value, str):
        return _clean_str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        if depth >= MAX_REPORT_DEPTH:
            return "…"
        return {(_clean_str(k) if isinstance(k, str) else k): storable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if depth >= MAX_REPORT_DEPTH:
            return "…"
        return [storable(v, depth + 1) for v in value]
    return value


def check_round_trip(value, what: str, max_bytes: int) -> None:
    """Raise ``JSONRoundTripError`` unless ``value`` (``normalize_json``'s output) comes back from jsonb unchanged.

    Refused: NaN and ±Infinity (JSON has neither), NUL and lone surrogates in a string or key
    (jsonb refuses them), a key that is not a string (it would come back as one), nesting deeper
    than MAX_REPORT_DEPTH, and more than ``max_bytes`` of JSON (UTF-8).
    """
    path: list = []
    # A lower bound of the encoded size, kept while walking: a huge value is refused before it is encoded.
    budget = [max_bytes]

    def refuse(why: str):
        where = " at " + "".join(f"[{step!r}]" for step in path) if path else ""
        raise JSONRoundTripError(f"{what}{where} {why}")

    def walk(node, depth: int) -> None:
        if isinstance(node, str):
            budget[0] -= len(node) + 2
            if "\x00" in node:
                refuse("holds a NUL character, which PostgreSQL cannot store")
            if _has_lone_surrogate(node):
                refuse("holds a lone surrogate, which UTF-8 cannot encode")
        elif isinstance(node, float):
            budget[0] -= 1
            if not math.isfinite(node):
                refuse(f"is {node!r}, which JSON cannot hold (pass it as a string, or None)")
        elif isinstance(node, (dict, list)):
            budget[0] -= 2
            if depth >= MAX_REPORT_DEPTH:
                refuse(f"is nested deeper than {MAX_REPORT_DEPTH} levels")
            items = node.items() if isinstance(node, dict) else enumerate(node)
            for key, item in items:
                if isinstance(node, dict):
                    if not isinstance(key, str):
                        refuse(f"has the key {key!r}: JSON keys are strings, so it would come back as "
                               f"{_as_json_key(key)!r}")
                    budget[0] -= len(key) + 3
                    if "\x00" in key or _has_lone_surrogate(key):
                        refuse(f"has the key {key!r}: a NUL character or a lone surrogate, which PostgreSQL "
                               f"cannot store")
                path.append(key)
                walk(item, depth + 1)
                path.pop()
        else:
            budget[0] -= 1
        if budget[0] < 0:
            raise JSONRoundTripError(f"{what}: over the {max_bytes} byte limit")

    walk(value, 0)
    try:
        size = len(json.dumps(value, ensure_ascii=False, allow_nan=False).encode())
    except ValueError as exc:  # an int of more digits than Python converts to text
        raise JSONRoundTripError(f"{what}: cannot be written as JSON: {exc}") from None
    if size > max_bytes:
        raise JSONRoundTripError(f"{what}: {size} bytes of JSON, over the {max_bytes} byte limit")


def _as_json_key(key) -> str:
    try:
        return next(iter(json.loads(json.dumps({key: None}))))
    except (TypeError, ValueError):
        return str(key)


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a str holds surrogates only unpaired: UTF-8 cannot carry them
        return True
    return False


def _clean_str(text: str) -> str:
    if "\x00" in text:
        text = text.replace("\x00", REPLACEMENT)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a str holds surrogates only unpaired: UTF-8 cannot carry them
        text = "".join(REPLACEMENT if "\ud800" <= ch <= "\udfff" else ch for ch in text)
    return text


# One encoder for every report: json.dumps(cls=...) builds one per call (a run's report is encoded in its slot).
_encoder = DjangoJSONEncoder(allow_nan=False)


def storable_report(report: dict | None) -> str | None:
    """The report as jsonb text: cleaned, and replaced by a note when over MAX_REPORT_BYTES.

    Raises ``UnstorableReport`` for a value that is not JSON at all.
    """
    if report is None:
        return None
    try:
        encoded = _encoder.encode(storable(report))
    except (TypeError, ValueError) as exc:
        raise UnstorableReport(str(exc)) from None
    if len(encoded) > MAX_REPORT_BYTES:
        return json.dumps({"report_dropped": f"the handler's report of {len(encoded)} bytes is over the "
                                             f"{MAX_REPORT_BYTES} byte limit"})
    return encoded


def describe(exc: BaseException) -> str:
    """``"Type: message"`` for an error column, even when the exception's ``str()`` raises."""
    try:
        message = str(exc)
    except Exception:
        message = "<the exception's message could not be read>"
    name = type(exc).__name__
    return f"{name}: {message}" if message else name
