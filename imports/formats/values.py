"""Cell values as SEO tools write them: numbers in any locale, percentages, dates.

Each parser takes a cell (text from a CSV; text, number or datetime from Excel),
returns ``None`` for an empty one, and raises ``ValueError`` whose message is
the end of a sentence about the value ("is not a number"), so the caller can
say which column and value were wrong.

Numbers (``_number``): spaces (normal, U+00A0, U+202F, U+2009) and apostrophes
group thousands; with both "," and "." the last one is the decimal mark; a
single separator is a decimal mark ("12,3" is 12.3) except in counts, where one
separator followed by exactly three digits groups thousands ("1,234" and
"1.234" are 1234 clicks).
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime, timedelta

_GROUPING = str.maketrans("", "", " \u00a0\u202f\u2009'\u2019")
_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.\d+)?|\.\d+)", re.ASCII)
_GROUPED = re.compile(r"[+-]?\d{1,3}(?:[.,]\d{3})+", re.ASCII)
_ISO_DATE = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})(?:[T ][\d:.+Z-]*)?", re.ASCII)
_DAY_FIRST = re.compile(r"(\d{1,2})/(\d{1,2})/(\d{4})(?: [\d:.]*)?", re.ASCII)
_EXCEL_EPOCH = date(1899, 12, 30)  # serial 1 is 1900-01-01 after Lotus' leap-year bug
_EXCEL_MAX_SERIAL = 2958465  # 9999-12-31
MAX_COUNT = 2**63 - 1  # the bigint column's limit


def parse_count(value) -> int | None:
    """Clicks or impressions: a whole number, 0 or more."""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        if text.isdigit() and text.isascii() and len(text) < 19:
            return int(text)  # the plain "1234" most exports write
        number = _number(text, count=True)
    elif value is None:
        return None
    else:
        number = _native_number(value)
    if isinstance(number, float):
        if not number.is_integer():
            raise ValueError("is not a whole number")
        number = int(number)
    if number < 0:
        raise ValueError("is negative")
    if number > MAX_COUNT:
        raise ValueError("is too large")
    return number


def parse_position(value) -> float | None:
    """Average position: a number, 0 or more ("4,5" and "4.5" alike)."""
    number = _decimal(value)
    if number is not None and number < 0:
        raise ValueError("is negative")
    return number


def parse_ctr(value) -> float | None:
    """Click-through rate as a fraction from 0 to 1.

    "12,3 %" and "12.3%" are percentages (0.123). A bare number above 1 is a
    percentage too ("12.3" is 0.123); from 0 to 1 it is already a fraction
    ("0.5" is 50 %, "1" is 100 %).
    """
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        if text.endswith("%"):
            number = _decimal(text[:-1].rstrip(), empty_ok=False) / 100
        else:
            number = _decimal(text)
            if number > 1:
                number /= 100
    else:
        number = _decimal(value)
        if number is None:
            return None
        if number > 1:
            number /= 100
    if not 0 <= number <= 1:
        raise ValueError("is not between 0 and 100 %")
    return number


def parse_date(value) -> date | None:
    """A day: yyyy-mm-dd or dd/mm/yyyy (day first, always), an Excel date or serial number."""
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if 1 <= value <= _EXCEL_MAX_SERIAL:
            return _EXCEL_EPOCH + timedelta(days=int(value))
        raise ValueError("is not a date")
    text = str(value).strip()
    if not text:
        return None
    if match := _ISO_DATE.fullmatch(text):
        year, month, day = match.groups()
    elif match := _DAY_FIRST.fullmatch(text):
        day, month, year = match.groups()
    else:
        raise ValueError("is not a date (expected yyyy-mm-dd or dd/mm/yyyy)")
    try:
        return date(int(year), int(month), int(day))
    except ValueError:
        raise ValueError("is not a date (no such day)") from None


def _decimal(value, *, empty_ok: bool = True) -> float | None:
    if isinstance(value, str):
        text = value.strip()
        if not text:
            if empty_ok:
                return None
            raise ValueError("is not a number")
        # Fast path for "4.5"; float() also takes "1_0", "nan" and non-ASCII
        # digits, which the careful path must judge instead.
        if text.isascii() and "_" not in text:
            try:
                number = float(text)
            except ValueError:
                pass
            else:
                if math.isfinite(number):
                    return number
        return float(_number(text, count=False))
    if value is None:
        return None
    return float(_native_number(value))


def _native_number(value) -> int | float:
    """A number cell from Excel; a bool or a datetime in a number column is not one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("is not a number")
    if not math.isfinite(value):
        raise ValueError("is not a number")
    return value


def _number(text: str, *, count: bool) -> int | float:
    """Locale-tolerant parsing of a number written as text (see the module docstring)."""
    text = text.translate(_GROUPING).replace("\u2212", "-")
    commas, dots = text.count(","), text.count(".")
    if commas and dots:
        decimal_mark = "," if text.rfind(",") > text.rfind(".") else "."
        whole, _, fraction = text.rpartition(decimal_mark)
        text = _ungroup(whole) + "." + fraction
    elif commas + dots > 1:
        text = _ungroup(text)
    elif commas + dots == 1:
        whole, _, fraction = text.partition("," if commas else ".")
        if count and len(fraction) == 3 and whole.lstrip("+-"):
            text = whole + fraction
        else:
            text = whole + "." + fraction
    if not _DECIMAL.fullmatch(text):
        raise ValueError("is not a number")
    return int(text) if "." not in text else float(text)


def _ungroup(text: str) -> str:
    """Remove thousands separators from an integer part, checking groups of three."""
    if "," in text or "." in text:
        if not _GROUPED.fullmatch(text) or ("," in text and "." in text):
            raise ValueError("is not a number")
        return text.replace(",", "").replace(".", "")
    return text
