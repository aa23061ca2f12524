"""Excel .xlsx sheets as a ``Table``, through openpyxl's read-only (streaming) mode.

openpyxl still loads a workbook's shared-strings table whole: a huge workbook
of distinct URLs costs memory that a CSV of the same rows does not. So the zip
is checked first (``ziparchive``), the strings are counted as they are read
(``sharedstrings``), so are each row's cells (``sheetxml``), and in a look
(``look``) every part read is counted.
"""

from __future__ import annotations

import warnings
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from itertools import islice
from typing import Any, BinaryIO
from xml.etree.ElementTree import ParseError

from openpyxl.reader.excel import ExcelReader
from openpyxl.utils.exceptions import InvalidFileException
from openpyxl.workbook.workbook import Workbook
from openpyxl.xml.constants import SHARED_STRINGS

from .. import conf
from . import look, ziparchive
from .headers import map_columns
from .sharedstrings import read_shared_strings
from .sheetxml import RowBounded
from .rows import NoSuchSheet, UnreadableFile, is_blank, quoted

Opener = Callable[[], AbstractContextManager[BinaryIO]]

# Rows scanned for the header: some exports put a title above the table.
# (Materialized while scanning: 50 rows of cells.)
HEADER_SCAN_ROWS = 50


@contextmanager
def opened(opener: Opener) -> Iterator[Workbook]:
    """A read-only workbook, closed on exit; a damaged file is an ``UnreadableFile``."""
    # A file object, not a path: given a path, openpyxl refuses names that do
    # not end in .xlsx, and uploads are stored under names of our choosing.
    with opener() as file:
        ziparchive.check_directory(file, what=ziparchive.WORKBOOK)  # before zipfile reads the directory, whole
        with reading(), warnings.catch_warnings():
            # "Workbook contains no default style" and the like: noise for an import.
            warnings.simplefilter("ignore")
            reader = _Reader(file)
            reader.read()
            workbook = reader.wb
        try:
            yield workbook
        finally:
            workbook.close()


class _Reader(ExcelReader):
    """openpyxl's read-only reader, with every part it opens counted in a look and its strings counted."""

    def __init__(self, file: BinaryIO):
        super().__init__(file, read_only=True, data_only=True, keep_links=False)
        self.sheet_parts: set[str] = set()  # known once read() has listed the worksheets
        open_part = self.archive.open  # ZipFile.read opens through it too; so do the read-only sheets

        def open_counted(name, *args, **kwargs):
            part = look.counted(open_part(name, *args, **kwargs))
            return RowBounded(part, name) if name in self.sheet_parts else part

        self.archive.open = open_counted

    def read(self):
        try:
            super().read()
            self.sheet_parts = {sheet._worksheet_path for sheet in self.wb.worksheets}
        except ValueError as exc:
            # openpyxl rewraps what a step raised: a bound's own message is the one to give. A new
            # exception: re-raising the cause would make its chain a cycle (cause -> wrapper -> cause).
            if isinstance(exc.__cause__, UnreadableFile):
                raise UnreadableFile(str(exc.__cause__)) from None
            raise

    def read_strings(self):
        found = self.package.find(SHARED_STRINGS)
        if found is not None:
            with self.archive.open(found.PartName[1:]) as source:
                self.shared_strings = read_shared_strings(source, conf.get("IMPORT_MAX_SHARED_STRINGS"))


@contextmanager
def reading():
    """Turn what a damaged workbook makes openpyxl raise into an ``UnreadableFile``."""
    try:
        yield
    except UnreadableFile:
        raise
    except (zipfile.BadZipFile, InvalidFileException, ParseError, KeyError, ValueError, TypeError,
            EOFError) as exc:
        raise UnreadableFile(
            f"the Excel workbook is damaged or not an .xlsx file ({type(exc).__name__}: {exc})"
        ) from exc


def sheet_rows(workbook: Workbook, sheet: str) -> Iterator[Sequence[Any]]:
    """Every row of a sheet, as values, whatever its declared size."""
    worksheet = workbook[sheet]
    # Some writers declare a wrong <dimension> (often just "A1"); read-only
    # openpyxl would then stop early or cut columns off. Ignore it.
    worksheet.reset_dimensions()
    with reading():
        yield from worksheet.iter_rows(values_only=True)


def choose_sheet(workbook: Workbook, wanted: str | None) -> str:
    """The sheet to read: ``wanted`` (its name, whatever the case), else the first naming a URL column.

    With no sheet naming one, the first sheet (whose headers the error will list).
    """
    names = sheet_names(workbook)
    if wanted:
        match = next((name for name in names if name == wanted), None) or next(
            (name for name in names if name.casefold().strip() == wanted.casefold().strip()), None)
        if match is None:
            raise NoSuchSheet(f"the workbook has no sheet '{wanted}': its sheets are {quoted(names)}")
        return match
    if not names:
        raise UnreadableFile("the Excel workbook has no worksheet")
    for name in names:
        if has_url_header(workbook, name):
            return name
    return names[0]


def sheet_names(workbook: Workbook) -> list[str]:
    """The worksheets' names, in workbook order (chart sheets hold no cells)."""
    return [worksheet.title for worksheet in workbook.worksheets]


def has_url_header(workbook: Workbook, sheet: str) -> bool:
    top = islice(sheet_rows(workbook, sheet), HEADER_SCAN_ROWS)
    return any("url" in map_columns(_texts(cells)) for cells in top if not is_blank(cells))


class SheetTable:
    """The header and records of one worksheet."""

    def __init__(self, opener: Opener, workbook: Workbook, sheet: str):
        self._opener = opener
        self._sheet = sheet
        worksheet = workbook[sheet]
        self._declared_last_row = worksheet.max_row  # from <dimension>, for count() only
        top = islice(sheet_rows(workbook, sheet), HEADER_SCAN_ROWS)
        candidates = [(index, cells) for index, cells in enumerate(top, start=1) if not is_blank(cells)]
        if not candidates:
            raise UnreadableFile(
                f"the sheet '{sheet}' has no header row (its first {HEADER_SCAN_ROWS} rows are blank)"
            )
        # The first row naming a URL column, else the first row (whose headers the error will list).
        self._header_row, cells = next(
            ((index, cells) for index, cells in candidates if "url" in map_columns(_texts(cells))), candidates[0]
        )
        self.headers = _texts(cells)
        self._counted: int | None = None

    def count(self) -> int:
        if self._declared_last_row is not None and self._declared_last_row > self._header_row:
            return self._declared_last_row - self._header_row
        if self._counted is None:  # no usable <dimension>: count once, streaming
            self._counted = sum(1 for _ in self.records())
        return self._counted

    def records(self) -> Iterator[Sequence[Any]]:
        with opened(self._opener) as workbook:
            worksheet = workbook[self._sheet]
            worksheet.reset_dimensions()
            with reading():
                yield from worksheet.iter_rows(min_row=self._header_row + 1, values_only=True)


def _texts(cells: Sequence[Any]) -> tuple[str, ...]:
    return tuple("" if cell is None else str(cell).strip() for cell in cells)
