"""What every format yields, and the one place cells become a row.

A format reads its file as a ``Table``: header cells, then records of raw
cells. ``RowSource`` maps the headers to fields, numbers the records and turns
each into a ``ParsedRow`` or a ``RowError``, whatever the format, and says what
it read (``summary()``: columns used and ignored, sheet, period and where it was read, date order).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import date
from functools import cached_property, partial
from itertools import islice
from typing import Any, NamedTuple, Protocol

from . import headers as header_aliases
from .values import (DAY_FIRST, DateOrder, NotRanked, decide_date_order, parse_count, parse_ctr, parse_date,
                     parse_position)


class UnreadableFile(ValueError):
    """The file cannot be an import at all; the message is meant for the operator."""


class NoSuchSheet(UnreadableFile):
    """The sheet the import names is not in the workbook (the message lists those that are)."""


class ParsedRow(NamedTuple):
    number: int  # 1-based, in file order, blank rows not counted
    url: str  # as found, stripped; normalizing is the caller's business
    date: date | None
    clicks: int | None
    impressions: int | None
    ctr: float | None  # a fraction from 0 to 1
    position: float | None
    # What was noticed but kept, counted in the report ("position '-' is not a rank: …").
    notes: tuple[str, ...] = ()


class RowError(NamedTuple):
    number: int
    reason: str


class BadRecord(NamedTuple):
    """A record a table could not read at all (too long, a NUL byte, …); it still has a number."""

    reason: str


class Table(Protocol):
    headers: tuple[str, ...]

    def records(self) -> Iterator[Sequence[Any] | BadRecord]:
        """Every record under the header, blank ones included, in order."""

    def count(self) -> int:
        """A cheap estimate of the number of records, for progress."""


_PARSERS = (("date", parse_date), ("clicks", parse_count), ("impressions", parse_count),
            ("ctr", parse_ctr), ("position", parse_position))


class RowSource:
    """The rows of one import file, readable as many times as needed.

    Rows are numbered from 1 in file order; blank records are skipped silently
    and not numbered, so after yielding n items the last number is n.
    ``rows(skip=n)`` starts after row n: a resumed import passes the number of
    rows it has committed (or the last committed row's number, the same thing).
    Skipped rows are read but not converted.

    ``date_order`` is the import's choice for a/b/yyyy dates ("dmy", "mdy"),
    or None to decide from the file's dates (``default_date_order`` when they
    fit both orders). Deciding reads the date column before the first row is
    converted, the same way on every run, so a resumed import reads as the
    first run did.
    """

    def __init__(self, kind: str, table: Table, *, period: tuple[date, date] | None = None, period_from: str = "",
                 sheet: str | None = None, other_sheets: Sequence[str] = (), date_order: str | None = None,
                 default_date_order: str = DAY_FIRST):
        check_width(table.headers)
        columns = header_aliases.map_columns(table.headers)
        if "url" not in columns:
            where = f" in the sheet '{sheet}'" if sheet else ""
            message = header_aliases.describe_missing("url", table.headers)
            if where:
                message = message.replace("no URL column:", f"no URL column{where}:", 1)
            if other_sheets:
                message += f" (the workbook also has {quoted(other_sheets, 10)}: choose the sheet to read)"
            raise UnreadableFile(message)
        self.kind = kind
        self.headers = table.headers
        self.columns = {field: table.headers[index] for field, index in columns.items()}
        used = set(columns.values())
        # Named columns no field took: unrecognised ones, and a second match of a field.
        self.ignored = tuple(header for index, header in enumerate(table.headers) if header and index not in used)
        self.period = period
        self.period_from = period_from  # the table the file's period was read from ("Filters.csv"), for the report
        self.sheet = sheet
        self.other_sheets = tuple(other_sheets)
        self._chosen_date_order = date_order or None
        self._default_date_order = default_date_order
        self._table = table
        self._indices = columns

    def __repr__(self) -> str:
        return f"<RowSource {self.kind} columns={self.columns} period={self.period}>"

    @property
    def needs_period(self) -> bool:
        """No date column and no period in the file: the import must give one."""
        return "date" not in self.columns and self.period is None

    @cached_property
    def date_order(self) -> DateOrder | None:
        """How a/b/yyyy dates are read; None without a date column."""
        return self._decide_date_order()

    def date_order_of_first_rows(self, rows: int) -> DateOrder | None:
        """``date_order`` as the first ``rows`` records alone settle it (for a warning at upload)."""
        return self._decide_date_order(limit=rows)

    def _decide_date_order(self, limit: int | None = None) -> DateOrder | None:
        if "date" not in self._indices:
            return None
        index = self._indices["date"]
        cells = (record[index] for record in islice(self._table.records(), limit)
                 if not isinstance(record, BadRecord) and index < len(record))
        return decide_date_order(cells, chosen=self._chosen_date_order, default=self._default_date_order)

    def summary(self) -> dict:
        """What was read, for the import's report (JSON-able)."""
        summary: dict[str, Any] = {
            "format": self.kind,
            # Pairs, in the file's order (a jsonb object would sort its keys).
            "columns_used": [[field, header] for field, header in sorted(
                self.columns.items(), key=lambda item: self._indices[item[0]])],
            "columns_ignored": list(self.ignored),
        }
        if self.sheet:
            summary["sheet"] = self.sheet
            summary["other_sheets"] = list(self.other_sheets)
        if self.period:
            summary["period"] = [day.isoformat() for day in self.period]
            if self.period_from:
                summary["period_from"] = self.period_from
        if self.date_order is not None:
            summary["date_order"] = {**self.date_order._asdict(), "text": self.date_order.describe()}
        return summary

    def total_rows(self) -> int:
        """An estimate for progress (it counts lines, blank or multi-line records included)."""
        return self._table.count()

    def rows(self, skip: int = 0) -> Iterator[ParsedRow | RowError]:
        url_index = self._indices["url"]
        order = self.date_order
        convert = _Converter(self._indices, date_order=order.order if order else DAY_FIRST)
        number = 0
        for record in self._table.records():
            if isinstance(record, BadRecord):
                number += 1
                if number > skip:
                    yield RowError(number, record.reason)
                continue
            url = record[url_index] if url_index < len(record) else None
            if (url is None or url == "" or (isinstance(url, str) and url.isspace())) and is_blank(record):
                continue
            number += 1
            if number > skip:
                yield convert(number, record)


def check_width(headers: Sequence[str]) -> None:
    """Refuse a header row of more columns than an import considers (IMPORT_MAX_COLUMNS).

    Empty headers at its end (a spreadsheet's formatted but empty columns) do not count.
    """
    from .. import conf  # read at call time: a test's or deployment's settings apply

    limit = conf.get("IMPORT_MAX_COLUMNS")
    width = len(headers)
    while width and not headers[width - 1]:
        width -= 1
    if width > limit:
        raise UnreadableFile(f"the header row has {width:,} columns; an import considers at most {limit:,} "
                             "(no export has more)")


def quoted(names: Sequence[str], limit: int = 20) -> str:
    """``'a', 'b', …``: the first ``limit`` names, quoted, for a message."""
    shown = ", ".join(f"'{name}'" for name in names[:limit])
    return shown + (", …" if len(names) > limit else "")


class _Converter:
    """Cells of one non-blank record -> ParsedRow or RowError. The hot loop of every import."""

    def __init__(self, indices: dict[str, int], *, date_order: str = DAY_FIRST):
        self.url = indices["url"]
        self.width = max(indices.values()) + 1
        parsers = {"date": _memoized(partial(parse_date, order=date_order))}
        # Only the columns present: (position in ParsedRow after url, column, parser, field).
        self.fields = [
            (slot, indices[field], parsers.get(field, parser), field)
            for slot, (field, parser) in enumerate(_PARSERS)
            if field in indices
        ]

    def __call__(self, number: int, cells: Sequence[Any]) -> ParsedRow | RowError:
        if len(cells) < self.width:
            cells = [*cells, *([None] * (self.width - len(cells)))]
        url = cells[self.url]
        url = url.strip() if isinstance(url, str) else ("" if url is None else str(url))
        if not url:
            return RowError(number, "missing URL")
        values = [None] * len(_PARSERS)
        notes = ()
        for slot, index, parser, field in self.fields:
            raw = cells[index]
            if raw is None or raw == "":
                continue
            try:
                values[slot] = parser(raw)
            except NotRanked as exc:
                notes += (f"{field} '{_shown(raw, 12)}' {exc}: row kept without a {field}",)
            except ValueError as exc:
                return RowError(number, f"{field} '{_shown(raw)}' {exc}")
        return ParsedRow(number, url, *values, notes)


# Distinct dates remembered per pass: a file holds few (one per day it covers).
MEMOIZED_VALUES = 1024


def _memoized(parser):
    """``parser`` remembering its last ``MEMOIZED_VALUES`` distinct text cells or fewer.

    Only text: Excel's 1 and True are equal keys but not the same cell. Errors are not remembered.
    """
    seen = {}

    def parse(raw):
        if type(raw) is not str:
            return parser(raw)
        value = seen.get(raw, _UNSEEN)
        if value is _UNSEEN:
            value = parser(raw)
            if len(seen) >= MEMOIZED_VALUES:
                seen.clear()
            seen[raw] = value
        return value

    return parse


_UNSEEN = object()


def is_blank(cells: Sequence[Any]) -> bool:
    """No cell holds anything but whitespace."""
    return all(cell is None or (isinstance(cell, str) and not cell.strip()) for cell in cells)


def _shown(raw: Any, limit: int = 40) -> str:
    text = str(raw).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"
