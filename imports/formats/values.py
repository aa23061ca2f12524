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

Dates written ``a/b/yyyy`` are day first or month first as the caller says:
``decide_date_order`` picks the order for a whole file from its dates.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from datetime import date, datetime, timedelta
from typing import NamedTuple

_GROUPING = str.maketrans("", "", " \u00a0\u202f\u2009'\u2019")
_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.\d+)?|\.\d+)", re.ASCII)
_GROUPED = re.compile(r"[+-]?\d{1,3}(?:[.,]\d{3})+", re.ASCII)
_ISO_DATE = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})(?:[T ][\d:.+Z-]*)?", re.ASCII)
_SLASHED = re.compile(r"(\d{1,2})/(\d{1,2})/(\d{4})(?: [\d:.]*)?", re.ASCII)
_EXCEL_EPOCH = date(1899, 12, 30)  # serial 1 is 1900-01-01 after Lotus' leap-year bug
_EXCEL_MAX_SERIAL = 2958465  # 9999-12-31
MAX_COUNT = 2**63 - 1  # the bigint column's limit

DAY_FIRST, MONTH_FIRST = "dmy", "mdy"
DATE_ORDERS = {DAY_FIRST: "day first (dd/mm/yyyy)", MONTH_FIRST: "month first (mm/dd/yyyy)"}
_PATTERNS = {DAY_FIRST: "dd/mm/yyyy", MONTH_FIRST: "mm/dd/yyyy"}

# What rank trackers write for a page that is not ranked: a dash, "n/a",
# ">100" or "100+" (beyond the positions tracked).
_NOT_RANKED = re.compile(r"[-\u2013\u2014]|n ?[/.]? ?a\.?|none|not ranked|> ?\d+|\d+ ?\+", re.IGNORECASE)


class NotRanked(ValueError):
    """A position cell saying "not ranked": the row is kept, its position left empty."""


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
    """Average position: a number, 0 or more ("4,5" and "4.5" alike).

    Raises ``NotRanked`` for a rank tracker's "not ranked" (``-``, ``n/a``, ``>100``).
    """
    try:
        number = _decimal(value)
    except ValueError:
        # Looked for only once the cell is no number: the common cell pays nothing.
        if isinstance(value, str) and _NOT_RANKED.fullmatch(value.strip()):
            raise NotRanked("is not a rank") from None
        raise
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


def parse_date(value, order: str = DAY_FIRST) -> date | None:
    """A day: yyyy-mm-dd, a/b/yyyy in ``order``, an Excel date or serial number."""
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
    elif match := _SLASHED.fullmatch(text):
        first, second, year = match.groups()
        day, month = (first, second) if order == DAY_FIRST else (second, first)
        try:
            return date(int(year), int(month), int(day))
        except ValueError:
            if _valid(year, day, month):  # it is a date the other way round
                raise ValueError(f"is not a date read {DATE_ORDERS[order]}, the order of this import") from None
            raise ValueError("is not a date (no such day)") from None
    else:
        raise ValueError(f"is not a date (expected yyyy-mm-dd or {_PATTERNS[order]})")
    try:
        return date(int(year), int(month), int(day))
    except ValueError:
        raise ValueError("is not a date (no such day)") from None


def _valid(year, month, day) -> bool:
    try:
        date(int(year), int(month), int(day))
    except ValueError:
        return False
    return True


def date_fits(value) -> tuple[bool, bool] | None:
    """For a text cell written a/b/yyyy: (is a date day first, is a date month first); None otherwise."""
    if not isinstance(value, str):
        return None
    match = _SLASHED.fullmatch(value.strip())
    if match is None:
        return None
    first, second, year = match.groups()
    return _valid(year, second, first), _valid(year, first, second)


class DateOrder(NamedTuple):
    """The order a file's a/b/yyyy dates are read in, and why (for the report).

    ``decided_by``: "choice" (the import says so), "file" (``example`` fits this
    order only), "default" (every a/b/yyyy date fits both orders, ``example``
    being the first, or the column holds no date at all: the configured
    default), "unambiguous" (no a/b/yyyy date among those read to decide: they
    are written ``written``, "iso" or "excel" or both, so no order was needed;
    ``whole_column`` is false when deciding stopped after
    ``PLAIN_DATES_SCANNED`` of them and the order would apply to an a/b/yyyy
    date further down).
    """

    order: str
    decided_by: str
    example: str = ""
    written: str = ""
    whole_column: bool = True

    def describe(self) -> str:
        """One sentence for the report.

        >>> DateOrder("dmy", "unambiguous", written="iso").describe()
        'Dates written yyyy-mm-dd (ISO): unambiguous, no day-first or month-first reading was needed.'
        """
        read = f"Dates read {DATE_ORDERS[self.order]}"
        if self.decided_by == "choice":
            return f"{read}, as chosen for this import."
        if self.decided_by == "file":
            return f"{read}: '{self.example}' can only be read that way."
        if self.decided_by == "unambiguous":
            written = " or ".join(_WRITTEN[kind] for kind in self.written.split("+") if kind in _WRITTEN)
            if self.whole_column:
                return f"Dates {written}: unambiguous, no day-first or month-first reading was needed."
            return (f"The first {PLAIN_DATES_SCANNED:,} dates are {written}: unambiguous; a date written "
                    f"dd/mm or mm/dd further down would be read {DATE_ORDERS[self.order]}, the default.")
        if self.example:
            return (f"{read}, the default: every date like '{self.example}' fits either order "
                    "(choose the order when importing if that is wrong).")
        return f"{read}, the default (the file's dates are not written dd/mm or mm/dd)."


_WRITTEN = {"iso": "written yyyy-mm-dd (ISO)", "excel": "stored as Excel dates"}

# A column that holds only yyyy-mm-dd or Excel dates this far has no a/b/yyyy
# dates to decide for: the scan stops, so such a file is not read twice.
PLAIN_DATES_SCANNED = 1000
# Distinct a/b/yyyy texts remembered as deciding nothing: a file repeats each of its days.
UNDECIDED_REMEMBERED = 1024


def decide_date_order(cells: Iterable, *, chosen: str | None, default: str = DAY_FIRST) -> DateOrder:
    """The order a file's a/b/yyyy dates are read in, from its date cells (read until decided).

    The first cell that fits one order only decides (a later cell that does
    not fit it is a bad row, visible as such). Cells that fit both orders
    decide nothing; a file of only those is read in ``default``. A file of
    yyyy-mm-dd or Excel dates alone needs no order: it is "unambiguous".

    >>> decide_date_order(["1/2/2026", "1/13/2026", "2/1/2026"], chosen=None)
    DateOrder(order='mdy', decided_by='file', example='1/13/2026', written='', whole_column=True)
    >>> decide_date_order(["1/2/2026", "3/4/2026"], chosen=None)
    DateOrder(order='dmy', decided_by='default', example='1/2/2026', written='', whole_column=True)
    >>> decide_date_order(["2026-01-13", "2026-01-14"], chosen=None)
    DateOrder(order='dmy', decided_by='unambiguous', example='', written='iso', whole_column=True)
    >>> decide_date_order(["13/1/2026"], chosen="mdy")
    DateOrder(order='mdy', decided_by='choice', example='', written='', whole_column=True)
    """
    if chosen:
        return DateOrder(chosen, "choice")
    ambiguous = ""
    plain = 0
    whole_column = True
    written = {"iso": False, "excel": False}
    # Texts already found to fit both orders or neither: seen again, they decide nothing again.
    undecided: set[str] = set()
    for cell in cells:
        if type(cell) is str and cell in undecided:
            continue
        fits = date_fits(cell)
        if fits is None:
            if cell is not None and cell != "":
                plain += 1
                if isinstance(cell, str):
                    written["iso"] = written["iso"] or bool(_ISO_DATE.fullmatch(cell.strip()))
                elif not isinstance(cell, bool):
                    written["excel"] = True  # a date cell or a serial number
                if plain >= PLAIN_DATES_SCANNED and not ambiguous:
                    whole_column = False
                    break
            continue
        day_first, month_first = fits
        if day_first != month_first:
            return DateOrder(DAY_FIRST if day_first else MONTH_FIRST, "file", cell.strip())
        if day_first and not ambiguous:
            ambiguous = cell.strip()
        if len(undecided) < UNDECIDED_REMEMBERED:
            undecided.add(cell)
    if not ambiguous and any(written.values()):
        return DateOrder(default, "unambiguous", written="+".join(kind for kind, seen in written.items() if seen),
                         whole_column=whole_column)
    return DateOrder(default, "default", ambiguous)


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
