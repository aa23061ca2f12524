"""What every format yields, and the one place cells become a row.

A format reads its file as a ``Table``: header cells, then records of raw
cells. ``RowSource`` maps the headers to fields, numbers the records and turns
each into a ``ParsedRow`` or a ``RowError``, whatever the format.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import date
from typing import Any, NamedTuple, Protocol

from . import headers as header_aliases
from .values import parse_count, parse_ctr, parse_date, parse_position


class UnreadableFile(ValueError):
    """The file cannot be an import at all; the message is meant for the operator."""


class ParsedRow(NamedTuple):
    number: int  # 1-based, in file order, blank rows not counted
    url: str  # as found, stripped; normalizing is the caller's business
    date: date | None
    clicks: int | None
    impressions: int | None
    ctr: float | None  # a fraction from 0 to 1
    position: float | None


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
    """

    def __init__(self, kind: str, table: Table, *, period: tuple[date, date] | None = None):
        columns = header_aliases.map_columns(table.headers)
        if "url" not in columns:
            raise UnreadableFile(header_aliases.describe_missing("url", table.headers))
        self.kind = kind
        self.headers = table.headers
        self.columns = {field: table.headers[index] for field, index in columns.items()}
        self.period = period
        self._table = table
        self._indices = columns

    def __repr__(self) -> str:
        return f"<RowSource {self.kind} columns={self.columns} period={self.period}>"

    def total_rows(self) -> int:
        """An estimate for progress (it counts lines, blank or multi-line records included)."""
        return self._table.count()

    def rows(self, skip: int = 0) -> Iterator[ParsedRow | RowError]:
        url_index = self._indices["url"]
        convert = _Converter(self._indices)
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


class _Converter:
    """Cells of one non-blank record -> ParsedRow or RowError. The hot loop of every import."""

    def __init__(self, indices: dict[str, int]):
        self.url = indices["url"]
        self.width = max(indices.values()) + 1
        # Only the columns present: (position in ParsedRow after url, column, parser, field).
        self.fields = [
            (slot, indices[field], _memoized(parser) if field == "date" else parser, field)
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
        for slot, index, parser, field in self.fields:
            raw = cells[index]
            if raw is None or raw == "":
                continue
            try:
                values[slot] = parser(raw)
            except ValueError as exc:
                return RowError(number, f"{field} '{_shown(raw)}' {exc}")
        return ParsedRow(number, url, *values)


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
