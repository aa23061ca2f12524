"""A page's query string, read parameter by parameter: each one validated and bounded before it costs anything.

The parsers (``whole_number``, ``day``, ``span``, ``one_of``, ``text``) raise ``BadParameter`` with a reason in
plain words. ``Params`` wraps ``request.GET``: each reader returns a usable value, the default for a missing or
bad parameter, and keeps a bad one's reason in ``problems`` for the page to show. A parameter given twice is
bad: which one was meant is not guessed.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from datetime import date
from typing import NamedTuple

from django.http import QueryDict

from . import conf

# A page number past these is no list anyone reads, and its OFFSET would not fit a bigint.
MAX_PAGE = 100_000
# The earliest day a chosen period may start: no search data an export holds is older.
EARLIEST_DAY = date(2000, 1, 1)
# Longer texts (a search, a URL) are no one's typing: refused before any query sees them.
MAX_TEXT = 2048
ISO_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


class BadParameter(ValueError):
    """A parameter the page cannot follow; ``str()`` is the reason, in plain words."""


def whole_number(value: str, *, low: int = 1, high: int = MAX_PAGE, what: str = "The page number") -> int:
    """``value`` as a whole number from ``low`` to ``high``.

    >>> whole_number("3"), whole_number(" 7 ")
    (3, 7)
    >>> whole_number("99999999999999999999")
    Traceback (most recent call last):
    ...
    seoinsight.query_params.BadParameter: The page number must be a whole number from 1 to 100,000.
    """
    value = value.strip()
    # Digits only, and few of them: int() of a long text costs, and "1e400", "٣", "1_0" are no page numbers.
    if not (value.isascii() and value.isdigit()) or len(value) > len(str(high)) or not low <= int(value) <= high:
        raise BadParameter(f"{what} must be a whole number from {low:,} to {high:,}.")
    return int(value)


def day(value: str, *, earliest: date = EARLIEST_DAY, latest: date, latest_name: str = "",
        what: str = "The date") -> date:
    """``value`` as a day (YYYY-MM-DD) from ``earliest`` to ``latest`` (``latest_name``: what that day is).

    >>> day("2026-05-01", latest=date(2026, 12, 1))
    datetime.date(2026, 5, 1)
    >>> day("9999-12-31", latest=date(2026, 12, 1), what="The end")
    Traceback (most recent call last):
    ...
    seoinsight.query_params.BadParameter: The end, 9999-12-31, is after 2026-12-01.
    """
    # Only YYYY-MM-DD: fromisoformat also takes "20260501" and "2026-W18-5", which no form sends.
    try:
        found = date.fromisoformat(value) if ISO_DAY.fullmatch(value := value.strip()) else None
    except ValueError:  # 2026-02-30
        found = None
    if found is None:
        raise BadParameter(f"{what} must be a date written YYYY-MM-DD.")
    if found < earliest:
        raise BadParameter(f"{what}, {found.isoformat()}, is before {earliest.isoformat()}.")
    if found > latest:
        named = f" ({latest_name})" if latest_name else ""
        raise BadParameter(f"{what}, {found.isoformat()}, is after {latest.isoformat()}{named}.")
    return found


def span(first: date, last: date, *, max_days: int | None = None, what: str = "The period") -> int:
    """The days from ``first`` to ``last``, both included: at least one, at most ``max_days``.

    ``max_days`` defaults to the ``QUERY_MAX_PERIOD_DAYS`` setting.

    >>> span(date(2026, 5, 1), date(2026, 5, 31), max_days=100)
    31
    >>> span(date(2024, 1, 1), date(2026, 5, 31), max_days=500)
    Traceback (most recent call last):
    ...
    seoinsight.query_params.BadParameter: The period spans 882 days; it may span 500 at most.
    """
    if max_days is None:
        max_days = conf.get("QUERY_MAX_PERIOD_DAYS")
    if first > last:
        raise BadParameter(f"{what} starts after it ends.")
    days = (last - first).days + 1
    if days > max_days:
        raise BadParameter(f"{what} spans {days:,} days; it may span {max_days:,} at most.")
    return days


def one_of(value: str, choices: Collection[str], *, what: str) -> str:
    """``value`` if it is one of ``choices``.

    >>> one_of("csv", ("csv",), what="The format")
    'csv'
    >>> one_of("99", [str(n) for n in range(20)], what="The target")
    Traceback (most recent call last):
    ...
    seoinsight.query_params.BadParameter: The target is not one this page offers.
    """
    if value not in choices:
        if len(choices) > 10:  # a list no one reads: the page's own controls show them
            raise BadParameter(f"{what} is not one this page offers.")
        raise BadParameter(f"{what} must be one of {', '.join(sorted(choices))}.")
    return value


def text(value: str, *, max_length: int = MAX_TEXT, what: str = "The text") -> str:
    """``value`` without surrounding spaces: no longer than ``max_length``, no control characters.

    PostgreSQL refuses a NUL in any text, so one would fail the page's query instead of the parameter.

    >>> text("  shoes "), text("a\\x00b", what="The search")
    Traceback (most recent call last):
    ...
    seoinsight.query_params.BadParameter: The search holds a control character.
    """
    value = value.strip()
    if len(value) > max_length:
        raise BadParameter(f"{what} is longer than {max_length:,} characters.")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise BadParameter(f"{what} holds a control character.")
    return value


class Problem(NamedTuple):
    """A parameter not followed: why (``reason``), and what the page does in its place (``instead``)."""

    reason: str
    instead: str = "It was ignored."

    def __str__(self) -> str:
        return f"{self.reason} {self.instead}"


class Params:
    """The query string of one request, read once per parameter; ``problems``: each bad one's Problem."""

    def __init__(self, query: QueryDict):
        self._query = query
        self.problems: list[Problem] = []

    def raw(self, name: str, *, instead: str = "It was ignored.") -> str | None:
        """The parameter's only value; None when missing, or given more than once (a problem)."""
        values = self._query.getlist(name)
        if len(values) > 1:
            self.problems.append(Problem(f"“{name}” is given {len(values)} times in the address.", instead))
            return None
        return values[0] if values else None

    def read(self, name: str, parse, default, *, instead: str = "It was ignored.", **bounds):
        """``parse(value, **bounds)`` of the parameter; ``default`` when missing, empty or bad (the reason kept).

        ``instead`` says what the page does in its place, after the reason.
        """
        value = self.raw(name, instead=instead)
        if value is None or not value.strip():
            return default
        try:
            return parse(value, **bounds)
        except BadParameter as exc:
            self.problems.append(Problem(str(exc), instead))
            return default

    def page(self, name: str = "page") -> int:
        """A page number from 1 to ``MAX_PAGE``; 1 when missing or bad."""
        return self.read(name, whole_number, 1, instead="Showing page 1.")

    def choice(self, name: str, choices: Collection[str], default: str | None, *, what: str,
               instead: str = "It was ignored.") -> str | None:
        return self.read(name, one_of, default, choices=choices, what=what, instead=instead)

    def text(self, name: str, *, what: str, max_length: int = MAX_TEXT) -> str:
        return self.read(name, text, "", what=what, max_length=max_length)
