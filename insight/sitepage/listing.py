"""The top pages table's order, its column headers' links and the page's links. Pure.

A sort is a column name, ``-`` in front for descending (``-clicks``). Each
column has a natural first direction: most clicks, impressions, CTR and
growth first, but the best (lowest) position first. An ORDER BY names only
columns of ``ORDERS`` (output columns of sql.TOP_PAGES), never the request's text.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlencode

# Column -> its header, and whether it sorts descending first.
ORDERS = {
    "clicks": ("Clicks", True),
    "impressions": ("Impressions", True),
    "ctr": ("CTR", True),
    "position": ("Position", False),
    "change": ("Change in clicks", True),
}
DEFAULT_SORT = "-clicks"
PAGE_SIZE = 25


def parse_sort(value: str | None) -> tuple[str, bool]:
    """(column, descending) of a ``sort`` parameter; the default for anything unknown.

    >>> parse_sort("-impressions"), parse_sort("position"), parse_sort("url; DROP TABLE")
    (('impressions', True), ('position', False), ('clicks', True))
    """
    value = value or ""
    column, descending = value.removeprefix("-"), value.startswith("-")
    if column not in ORDERS:
        return parse_sort(DEFAULT_SORT)
    return column, descending


def sort_value(column: str, descending: bool) -> str:
    return f"-{column}" if descending else column


def header_sort(column: str, current: str | None) -> str:
    """The ``sort`` a column's header links to: the other direction if it is the current sort, else its natural one.

    >>> header_sort("clicks", "-clicks"), header_sort("position", "-clicks"), header_sort("position", "position")
    ('clicks', 'position', '-position')
    """
    shown, descending = parse_sort(current)
    if column == shown:
        return sort_value(column, not descending)
    return sort_value(column, ORDERS[column][1])


def order_by(sort: str | None) -> str:
    """The ORDER BY of a sort: unknown figures (no previous clicks, no position) last, then by URL.

    >>> order_by("position")
    'position ASC NULLS LAST, url_normalized'
    """
    column, descending = parse_sort(sort)
    return f"{column} {'DESC' if descending else 'ASC'} NULLS LAST, url_normalized"


def change(current: float | None, previous: float | None) -> float | None:
    """Relative change from ``previous`` to ``current`` (0.25 is +25 %); None when there was nothing before.

    >>> change(125, 100), change(0, 40), change(10, 0), change(10, None)
    (0.25, -1.0, None, None)
    """
    if not previous:
        return None
    return ((current or 0) - previous) / previous


def like_pattern(text: str) -> str:
    """An ILIKE pattern matching ``text`` anywhere, its own ``%``, ``_`` and ``\\`` taken literally.

    >>> like_pattern("50%_off")
    '%50\\\\%\\\\_off%'
    """
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def query(params: Mapping[str, str], **changes: str | int | None) -> str:
    """``?…`` of ``params`` with ``changes`` applied (None or "" drops a parameter).

    >>> query({"period": "7d", "page": "3"}, page=None, sort="-ctr")
    '?period=7d&sort=-ctr'
    """
    kept = {key: value for key, value in {**params, **changes}.items() if value not in (None, "")}
    return "?" + urlencode(kept) if kept else "?"
