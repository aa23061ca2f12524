"""Search Console performance exports: the .xlsx workbook and the .zip of CSVs.

What the Performance report's Export writes, in English or French: one table
per dimension (Queries/Requêtes, Pages, Countries/Pays, Devices/Appareils, …),
the daily totals (Dates; newer exports call it Chart) and Filters/Filtres, a
two-column table whose "Date" row says the period: relative ("Last 3 months",
"3 derniers mois") or explicit ("2024-01-01 - 2024-03-31",
"Jan 1, 2024 - Mar 31, 2024", "1 janv. 2024 - 31 mars 2024").

Rows come from the Pages table. The period is the explicit Filters range, else
the first and last day of the Dates table, else unknown; the source names the
table it came from (``period_from``: "Filters.csv", "the sheet 'Filters'", …),
which the import's page shows beside the period. The Queries, Devices and
Countries tables come along as ``ExportSource.dimensions``, read to a bound
(``DimensionTable.read``) for the import to store beside the Pages rows.
"""

from __future__ import annotations

import re
import unicodedata
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date
from functools import partial
from itertools import chain
from typing import Any, NamedTuple

from openpyxl.workbook.workbook import Workbook

from .csvfile import CsvTable
from .headers import METRICS, field_for, fold, map_columns
from .look import counted
from .rows import BadRecord, RowSource, Table, UnreadableFile, is_blank
from .values import parse_count, parse_ctr, parse_date, parse_position
from .xlsxfile import Opener, SheetTable, choose_sheet, sheet_names, sheet_rows
from .xlsxfile import opened as open_workbook
from .ziparchive import check_directory, check_member

PAGES = "pages"
FILTERS = ("filters", "filtres")
DATES = ("dates", "chart", "graphique")
QUERIES = ("queries", "requetes")
# The tables stored beside Pages: dimension -> its table's names (``table_key``), English and French.
DIMENSIONS = {"query": QUERIES, "device": ("devices", "appareils"), "country": ("countries", "pays")}

_MONTHS = {
    **dict.fromkeys(("jan", "january", "janv", "janvier"), 1),
    **dict.fromkeys(("feb", "february", "fev", "fevr", "fevrier"), 2),
    **dict.fromkeys(("mar", "march", "mars"), 3),
    **dict.fromkeys(("apr", "april", "avr", "avril"), 4),
    **dict.fromkeys(("may", "mai"), 5),
    **dict.fromkeys(("jun", "june", "juin"), 6),
    **dict.fromkeys(("jul", "july", "juil", "juillet"), 7),
    **dict.fromkeys(("aug", "august", "aout"), 8),
    **dict.fromkeys(("sep", "sept", "september", "septembre"), 9),
    **dict.fromkeys(("oct", "october", "octobre"), 10),
    **dict.fromkeys(("nov", "november", "novembre"), 11),
    **dict.fromkeys(("dec", "december", "decembre"), 12),
}
_DATE_IN_TEXT = re.compile(
    r"(?P<iso>(?P<iy>\d{4})-(?P<im>\d{2})-(?P<id>\d{2}))"
    r"|(?P<dmy>(?P<sd>\d{1,2})/(?P<sm>\d{1,2})/(?P<sy>\d{4}))"
    r"|(?P<en>(?P<em>[a-z]+)\.? (?P<ed>\d{1,2}),? (?P<ey>\d{4}))"
    r"|(?P<fr>(?P<fd>\d{1,2})(?:er)? (?P<fm>[a-z]+)\.? (?P<fy>\d{4}))",
    re.ASCII,
)


def table_key(name: str) -> str:
    """A sheet or member name reduced for lookup: "Requêtes.csv" -> "requetes"."""
    name = name.rsplit("/", 1)[-1]
    if name.lower().endswith(".csv"):
        name = name[:-4]
    decomposed = unicodedata.normalize("NFKD", name)
    return "".join(char for char in decomposed if not unicodedata.combining(char)).casefold().strip()


def is_export(sheet_names: Iterable[str]) -> bool:
    """A workbook with a Pages sheet beside Filters, Dates or Queries is a Search Console export."""
    keys = {table_key(name) for name in sheet_names}
    return PAGES in keys and bool(keys & {*FILTERS, *DATES, *QUERIES})


def from_workbook(opener: Opener, workbook: Workbook, *, sheet: str | None = None, **options) -> RowSource:
    """The Pages sheet (or ``sheet``, if the import names another) with the export's period."""
    sheets: dict[str, str] = {}
    names = sheet_names(workbook)
    for name in names:
        sheets.setdefault(table_key(name), name)
    read = choose_sheet(workbook, sheet) if sheet else sheets[PAGES]
    pages = SheetTable(opener, workbook, read)
    filters = _first(sheets, FILTERS)
    dates = _first(sheets, DATES)
    period = period_from_filters(sheet_rows(workbook, filters)) if filters else None
    read_from = f"the sheet '{filters}'"
    if period is None and dates:
        period = period_from_dates(sheet_rows(workbook, dates))
        read_from = f"the first and last day of the sheet '{dates}'"
    dimensions = [DimensionTable(dimension, f"the sheet '{name}'", partial(_reopened_sheet, opener, name))
                  for dimension, keys in DIMENSIONS.items() if (name := _first(sheets, keys))]
    return _pages_source(pages, period, dimensions, period_from=read_from if period else "", sheet=read,
                         other_sheets=[name for name in names if name != read], **options)


def from_bundle(opener: Opener, members: Sequence[zipfile.ZipInfo], max_unzipped_bytes: int,
                **options) -> RowSource:
    tables: dict[str, zipfile.ZipInfo] = {}
    for info in members:
        base = _base_name(info)
        # Skip folders and macOS resource forks ("__MACOSX/._Pages.csv").
        if info.is_dir() or info.filename.startswith("__MACOSX/") or base.startswith("._"):
            continue
        if base.lower().endswith(".csv"):
            tables.setdefault(table_key(base), info)
    if PAGES not in tables:
        names = [info.filename for info in members if not info.is_dir()]
        found = ", ".join(f"'{name}'" for name in names[:10]) + (", …" if len(names) > 10 else "")
        raise UnreadableFile(
            f"the zip has no Pages.csv (found {found or 'no files'}): upload the .zip exactly as "
            "Search Console exported it, or the Pages table alone as .csv"
        )

    def table(info: zipfile.ZipInfo) -> CsvTable:
        return CsvTable(_member_opener(opener, info, max_unzipped_bytes))

    pages = table(tables[PAGES])
    filters = _first(tables, FILTERS)
    dates = _first(tables, DATES)
    period = period_from_filters(_all_rows(table(filters))) if filters else None
    read_from = _base_name(filters) if filters else ""
    if period is None and dates:
        period = period_from_dates(_all_rows(table(dates)))
        read_from = f"the first and last day of {_base_name(dates)}"
    dimensions = [DimensionTable(dimension, _base_name(info), partial(table, info))
                  for dimension, keys in DIMENSIONS.items() if (info := _first(tables, keys))]
    return _pages_source(pages, period, dimensions, period_from=read_from if period else "", **options)


def period_from_filters(rows: Iterable[Sequence[Any]]) -> tuple[date, date] | None:
    """The explicit range in the Filters table's "Date" row, if it holds one."""
    for cells in rows:
        if len(cells) >= 2 and isinstance(cells[0], str) and fold(cells[0]) == "date":
            return parse_period(cells[1])
    return None


def period_from_dates(rows: Iterable[Sequence[Any]]) -> tuple[date, date] | None:
    """First and last day of a daily table (header first); unreadable dates are ignored."""
    rows = iter(rows)
    header = next((cells for cells in rows if not is_blank(cells)), None)
    column = map_columns(tuple("" if cell is None else str(cell) for cell in header or ())).get("date")
    if column is None:
        return None
    first = last = None
    for cells in rows:
        try:
            day = parse_date(cells[column]) if column < len(cells) else None
        except ValueError:
            continue
        if day is not None:
            first = day if first is None else min(first, day)
            last = day if last is None else max(last, day)
    return None if first is None else (first, last)


def parse_period(text: Any) -> tuple[date, date] | None:
    """An explicit date range written in a Filters cell; None for a relative or compared one.

    >>> parse_period("Jan 1, 2024 - Mar 31, 2024")
    (datetime.date(2024, 1, 1), datetime.date(2024, 3, 31))
    >>> parse_period("Last 3 months") is None
    True
    """
    if not isinstance(text, str):
        return None
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(char for char in decomposed if not unicodedata.combining(char)).casefold()
    days = [day for match in _DATE_IN_TEXT.finditer(plain) if (day := _matched_date(match))]
    if len(days) == 1:
        return days[0], days[0]
    if len(days) == 2 and days[0] <= days[1]:
        return days[0], days[1]
    return None  # none, or a comparison of two ranges


def _matched_date(match: re.Match) -> date | None:
    groups = match.groupdict()
    if groups["iso"]:
        parts = groups["iy"], groups["im"], groups["id"]
    elif groups["dmy"]:
        parts = groups["sy"], groups["sm"], groups["sd"]
    else:
        prefix = "e" if groups["en"] else "f"  # "Jan 1, 2024" or "1 janv. 2024"
        month_word, day, year = (groups[prefix + part] for part in "mdy")
        month = _MONTHS.get(month_word)
        if month is None:
            return None
        parts = year, month, day
    try:
        return date(int(parts[0]), int(parts[1]), int(parts[2]))
    except ValueError:
        return None


class DimensionRow(NamedTuple):
    """One row of a dimension table: its key (the query, device or country as exported) and metrics."""

    key: str
    clicks: int | None
    impressions: int | None
    ctr: float | None
    position: float | None


@dataclass
class DimensionRead:
    """What ``DimensionTable.read`` kept: rows by key, and what it left out (JSON-able but ``rows``)."""

    rows: dict[str, tuple] = field(default_factory=dict)
    read: int = 0
    errors: int = 0
    error_samples: list[dict] = field(default_factory=list)
    cut_at: int | None = None  # the bound, when the table went past it


class DimensionTable:
    """A Queries, Devices or Countries table of an export; its first column that is no metric holds the key.

    Opened only when read: a blank or damaged table fails its own reading (``UnreadableFile``), not the import.
    """

    def __init__(self, dimension: str, name: str, open_table: Callable[[], Table]):
        self.dimension = dimension
        self.name = name  # where it was read, for the report: "Queries.csv", "the sheet 'Requêtes'"
        self._open_table = open_table
        self.key_column: int | None = None
        self.metric_columns: dict[str, int] = {}

    def read(self, limit: int, max_error_samples: int = 20) -> DimensionRead:
        """Its first ``limit`` rows by key (a repeated key is a bad row); a longer table is cut, never refused."""
        table = self._open_table()
        self._columns(table.headers)
        read = DimensionRead()
        number = 0
        for record in table.records():
            if not isinstance(record, BadRecord) and is_blank(record):
                continue
            number += 1
            if number > limit:
                read.cut_at = limit
                break
            read.read += 1
            row = self._row(record)
            if isinstance(row, DimensionRow) and row.key in read.rows:
                row = f"{self.dimension} '{row.key[:80]}' repeats an earlier row"
            if isinstance(row, str):
                read.errors += 1
                if len(read.error_samples) < max_error_samples:
                    read.error_samples.append({"row": number, "reason": row})
                continue
            read.rows[row.key] = row[1:]
        return read

    def _columns(self, headers: Sequence[str]) -> None:
        """Find the key and metric columns (the leftmost of a metric wins), or raise why the table is unusable."""
        fields = [field_for(header) if header else "" for header in headers]
        self.key_column = next((index for index, found in enumerate(fields) if found != "" and found not in METRICS),
                               None)
        self.metric_columns = {metric: fields.index(metric) for metric in METRICS if metric in fields}
        if self.key_column is None:
            raise UnreadableFile(f"{self.name} has no column naming the {self.dimension}")
        if not self.metric_columns:
            raise UnreadableFile(f"{self.name} has no Clicks, Impressions, CTR or Position column")

    def _row(self, record: Sequence[Any] | BadRecord) -> DimensionRow | str:
        """The record as a row, or why it is not one."""
        if isinstance(record, BadRecord):
            return record.reason
        cell = record[self.key_column] if self.key_column < len(record) else None
        key = ("" if cell is None else str(cell)).strip()
        if not key:
            return f"missing {self.dimension}"
        values = dict.fromkeys(METRICS)
        for metric, index in self.metric_columns.items():
            raw = record[index] if index < len(record) else None
            try:
                values[metric] = _METRIC_PARSERS[metric](raw)
            except ValueError as exc:  # NotRanked too: Search Console never writes one, so it is a bad row
                return f"{metric} '{str(raw)[:40]}' {exc}"
        return DimensionRow(key, **values)


_METRIC_PARSERS = {"clicks": parse_count, "impressions": parse_count, "ctr": parse_ctr, "position": parse_position}


class ExportSource(RowSource):
    """The Pages rows of an export (a ``RowSource``) with its dimension tables to store beside them."""

    def __init__(self, pages: Table, *, dimensions: Sequence[DimensionTable] = (), **options):
        super().__init__("searchconsole", pages, **options)
        self.dimensions = tuple(dimensions)


def _pages_source(pages: Table, period: tuple[date, date] | None, dimensions: Sequence[DimensionTable],
                  **options) -> RowSource:
    source = ExportSource(pages, period=period, dimensions=dimensions, **options)
    if not any(field in source.columns for field in METRICS):
        raise UnreadableFile(
            "the Search Console Pages table has no Clicks, Impressions, CTR or Position column "
            "(a comparison export?): export a single date range"
        )
    return source


def _reopened_sheet(opener: Opener, sheet: str) -> SheetTable:
    with open_workbook(opener) as workbook:
        return SheetTable(opener, workbook, sheet)


def _base_name(info: zipfile.ZipInfo) -> str:
    return info.filename.rsplit("/", 1)[-1]


def _first(tables: dict[str, Any], keys: Sequence[str]) -> Any:
    return next((tables[key] for key in keys if key in tables), None)


def _all_rows(table: CsvTable) -> Iterator[Sequence[Any]]:
    records = (record for record in table.records() if not isinstance(record, BadRecord))
    return chain([table.headers], records)


def _member_opener(opener: Opener, info: zipfile.ZipInfo, max_unzipped_bytes: int):
    check_member(info, max_unzipped_bytes)

    @contextmanager
    def member_opener():
        try:
            with opener() as raw:
                check_directory(raw)  # before zipfile reads the directory, whole
                with zipfile.ZipFile(raw) as archive, archive.open(info.filename) as member:
                    yield counted(member)
        except (zipfile.BadZipFile, NotImplementedError, zlib.error, EOFError) as exc:
            raise UnreadableFile(f"'{info.filename}' in the zip is damaged ({exc})") from exc

    return member_opener


