"""What a run produced, made storable.

PostgreSQL refuses NUL in text and jsonb, NaN/Infinity and lone surrogates in
jsonb; a huge value costs every page that shows it. A finish must land whatever
the handler produced, so each value is cleaned and capped before it is written.
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
