"""The portfolio's columns, what each one's figure and change are, and the order of its rows. Pure.

A sort is a column name, ``-`` in front for descending. Each column has a natural first direction: the
largest fall first for a change (clicks, impressions, CTR), the worst move first for the position (a
rise), the most clicks, impressions and CTR first, the best position first, the oldest data first, the
most open items first. Unknown figures go last either way; ties go by domain.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from insight.sitepage.listing import change


def clicks_delta(row) -> int | None:
    """The change in clicks, in clicks (the default order's figure); None when the period compared with has none.

    A site with clicks before and no data now has fallen by all of them: it is among the first to look at.
    """
    if row.previous.clicks is None:
        return None
    return (row.current.clicks or 0) - row.previous.clicks


def _difference(name: str) -> Callable:
    def value(row):
        now, before = getattr(row.current, name), getattr(row.previous, name)
        return None if now is None or before is None else now - before
    return value


def _relative(name: str) -> Callable:
    def value(row):
        return change(getattr(row.current, name), getattr(row.previous, name))
    return value


@dataclass(frozen=True)
class Column:
    label: str
    value: Callable  # the row's figure this column sorts by (None: unknown)
    descending: bool  # its natural first direction


COLUMNS = {
    "site": Column("Site", lambda row: row.domain.lower(), False),
    "clicks": Column("Clicks", lambda row: row.current.clicks, True),
    "clicks_delta": Column("Change", clicks_delta, False),
    "clicks_change": Column("Change %", _relative("clicks"), False),
    "impressions": Column("Impressions", lambda row: row.current.impressions, True),
    "impressions_change": Column("Change %", _relative("impressions"), False),
    "ctr": Column("CTR", lambda row: row.current.ctr, True),
    "ctr_change": Column("Change", _difference("ctr"), False),
    "position": Column("Position", lambda row: row.current.position, False),
    "position_change": Column("Change", _difference("position"), True),
    "newest": Column("Newest day", lambda row: row.newest, False),
    "open": Column("Open", lambda row: row.open_count, True),
}
DEFAULT_SORT = "clicks_delta"
SORTS = [f"{'-' if descending else ''}{column}" for column in COLUMNS for descending in (True, False)]


def parse_sort(value: str | None) -> tuple[str, bool]:
    """(column, descending) of a ``sort`` parameter; the default (largest fall in clicks first) for anything else.

    >>> parse_sort("-impressions"), parse_sort("position"), parse_sort(None), parse_sort("1; DROP")
    (('impressions', True), ('position', False), ('clicks_delta', False), ('clicks_delta', False))
    """
    value = value or ""
    column, descending = value.removeprefix("-"), value.startswith("-")
    if column not in COLUMNS:
        return DEFAULT_SORT, COLUMNS[DEFAULT_SORT].descending
    return column, descending


def header_sort(column: str, current: str | None) -> str:
    """The ``sort`` a header links to: the other direction when it is the current sort, else its natural one.

    >>> header_sort("clicks", "-clicks"), header_sort("clicks_delta", None), header_sort("site", "clicks")
    ('clicks', '-clicks_delta', 'site')
    """
    shown, descending = parse_sort(current)
    first = not descending if column == shown else COLUMNS[column].descending
    return f"{'-' if first else ''}{column}"


def ordered(rows: list, sort: str | None) -> list:
    """``rows`` in the order of ``sort``: unknown figures last, ties by domain then id."""
    column, descending = parse_sort(sort)
    value = COLUMNS[column].value
    known = [row for row in rows if value(row) is not None]
    unknown = [row for row in rows if value(row) is None]
    by_name = sorted(known, key=lambda row: (row.domain.lower(), row.site_id))
    known = sorted(by_name, key=value, reverse=descending)
    return known + sorted(unknown, key=lambda row: (row.domain.lower(), row.site_id))
