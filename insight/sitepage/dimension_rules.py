"""The site page's queries, devices and countries tables: their names, orders and what each export adds. Pure.

A sort is a column of ``ORDERS`` (``-`` in front: descending), never the request's text. ``coverage`` says,
for each export table overlapping the period shown, which period it covers and whether its rows count, in the
words of the page's rule: a row counts when its whole period lies inside the period shown; of a key's rows that
overlap, a daily row wins, then the most recently imported one.
"""

from __future__ import annotations

from dataclasses import dataclass

from seoinsight.periods import Period

# ?table= on the page and in a CSV: the first three are the tabs, pages, days and totals are CSVs only.
TABS = {"queries": "query", "devices": "device", "countries": "country"}
CSV_TABLES = ("pages", "queries", "devices", "countries", "days", "totals")
DEFAULT_TAB = "queries"
# Singular and plural for the sentences; the header of the key column.
NAMES = {"query": ("query", "queries", "Query"), "device": ("device", "devices", "Device"),
         "country": ("country", "countries", "Country")}
TABLE_LABELS = {"query": "Queries", "device": "Devices", "country": "Countries"}

# Column -> its header, and whether it sorts descending first (the best position, 1, first; keys A to Z).
ORDERS = {
    "key": ("Name", False),
    "clicks": ("Clicks", True),
    "impressions": ("Impressions", True),
    "ctr": ("CTR", True),
    "position": ("Position", False),
    "change": ("Change in clicks", True),
}
DEFAULT_SORT = "-clicks"
SORTS = [f"-{column}" if descending else column for column in ORDERS for descending in (True, False)]
PAGE_SIZE = 25
# Devices and countries offered in the filter: more than any export lists (about 250 countries).
MAX_FILTER_KEYS = 400


def parse_sort(value: str | None) -> tuple[str, bool]:
    """(column, descending) of a ``dsort`` parameter; the default for anything unknown.

    >>> parse_sort("key"), parse_sort("-position"), parse_sort("clicks; DROP TABLE x")
    (('key', False), ('position', True), ('clicks', True))
    """
    value = value or ""
    column = value.removeprefix("-")
    if column not in ORDERS:
        return parse_sort(DEFAULT_SORT)
    return column, value.startswith("-")


def header_sort(column: str, current: str | None) -> str:
    """The ``dsort`` a header links to: the other direction if it is the current sort, else its natural one.

    >>> header_sort("clicks", None), header_sort("clicks", "clicks"), header_sort("key", "-clicks")
    ('clicks', '-clicks', 'key')
    """
    shown, descending = parse_sort(current)
    descending = not descending if column == shown else ORDERS[column][1]
    return f"-{column}" if descending else column


def order_by(sort: str | None) -> str:
    """The ORDER BY of a sort: unknown figures last, then by key (so pages of a table never share a row).

    >>> order_by("-change"), order_by("key")
    ('change DESC NULLS LAST, key', 'key ASC NULLS LAST, key')
    """
    column, descending = parse_sort(sort)
    return f"{column} {'DESC' if descending else 'ASC'} NULLS LAST, key"


def short(period: Period) -> str:
    """A period as the sentences write it: the end's year left out when it is the start's.

    >>> from datetime import date
    >>> short(Period(date(2026, 8, 1), date(2026, 10, 29))), short(Period(date(2025, 12, 1), date(2026, 1, 3)))
    ('2026-08-01 → 10-29', '2025-12-01 → 2026-01-03')
    >>> short(Period(date(2026, 8, 1), date(2026, 8, 1)))
    '2026-08-01'
    """
    if period.start == period.end:
        return f"{period.start:%Y-%m-%d}"
    end = f"{period.end:%m-%d}" if period.end.year == period.start.year else f"{period.end:%Y-%m-%d}"
    return f"{period.start:%Y-%m-%d} → {end}"


@dataclass(frozen=True)
class Table:
    """One export table of a dimension overlapping the period shown: all its rows (daily rows: one entry)."""

    period: Period
    daily: bool
    rows: int
    counted: int
    under_daily: int = 0
    under_newer: int = 0
    import_id: int | None = None


def merge_daily(tables: list[Table]) -> list[Table]:
    """``tables`` with their one-day entries folded into one ``daily`` entry from the first to the last day.

    >>> from datetime import date
    >>> days = [Table(Period(date(2026, 5, d), date(2026, 5, d)), True, 3, 3, import_id=d) for d in (1, 2)]
    >>> merge_daily(days)
    [Table(period=Period(start=datetime.date(2026, 5, 1), end=datetime.date(2026, 5, 2)), daily=True, rows=6, counted=6, under_daily=0, under_newer=0, import_id=2)]
    """
    daily = [t for t in tables if t.daily]
    kept = [t for t in tables if not t.daily]
    if daily:
        kept.append(Table(Period(min(t.period.start for t in daily), max(t.period.end for t in daily)), True,
                          sum(t.rows for t in daily), sum(t.counted for t in daily), 0, 0,
                          max((t.import_id for t in daily if t.import_id is not None), default=None)))
    return sorted(kept, key=lambda t: (t.period.start, t.period.end))


def coverage(table: Table, dimension: str, shown: Period) -> tuple[str, str]:
    """(the sentence saying what of ``table`` counts in ``shown``, its tone: ``counted``, ``partly`` or ``left``).

    >>> from datetime import date
    >>> shown = Period(date(2026, 10, 1), date(2026, 10, 28))
    >>> coverage(Table(Period(date(2026, 8, 1), date(2026, 10, 29)), False, 40, 0), "query", shown)[0]
    'The Queries table of the 90-day export 2026-08-01 → 10-29 is not counted: it covers days outside the period shown.'
    >>> coverage(Table(Period(date(2026, 10, 1), date(2026, 10, 28)), False, 40, 30, 0, 10), "query", shown)[0]
    'The Queries table of the 28-day export 2026-10-01 → 10-28: 30 of its 40 queries are counted; 10 are not: a more recently imported export covers some of the same days for them.'
    """
    label, (one, many, _) = TABLE_LABELS[dimension], NAMES[dimension]
    what = (f"The daily {label} rows {short(table.period)}" if table.daily
            else f"The {label} table of the {table.period.days}-day export {short(table.period)}")
    inside = shown.start <= table.period.start and table.period.end <= shown.end
    if not table.daily and not inside:
        return f"{what} is not counted: it covers days outside the period shown.", "left"
    noun = one if table.rows == 1 else many
    if table.counted == table.rows:
        counted = f"its one {noun} is" if table.rows == 1 else f"all its {table.rows:,} {noun} are"
        return f"{what}: {counted} counted.", "counted"
    reasons = []
    if table.under_daily:
        reasons.append(f"{table.under_daily:,} {_are(table.under_daily)} not: daily rows cover some of their days")
    if table.under_newer:
        reasons.append(f"{table.under_newer:,} {_are(table.under_newer)} not: a more recently imported export covers some of the same "
                       "days for them")
    outside = table.rows - table.counted - table.under_daily - table.under_newer
    if outside:  # daily rows of days outside the period shown
        reasons.append(f"{outside:,} {_are(outside)} outside the period shown")
    if not table.counted:
        if table.under_daily == table.rows:
            return f"{what} is not counted: daily rows cover some of its days.", "left"
        if table.under_newer == table.rows:
            return f"{what} is not counted: a more recently imported export covers the same days.", "left"
        return f"{what} is not counted: of its {table.rows:,} {noun}, " + "; ".join(reasons) + ".", "left"
    return f"{what}: {table.counted:,} of its {table.rows:,} {noun} {_are(table.counted)} counted; " + "; ".join(reasons) + ".", \
        "partly"


def _are(count: int) -> str:
    return "is" if count == 1 else "are"
