"""Streaming readers for SEO exports: delimited text, Excel .xlsx, Search Console bundles.

    source = open_source(path, "export.csv")    # or UnreadableFile, for the operator
    source.kind, source.columns, source.period  # what was recognised
    source.total_rows()                         # an estimate, for progress
    for row in source.rows(skip=rows_committed):  # to resume: rows already written
        ...                                     # ParsedRow, or RowError for a bad row

Nothing here touches the database; memory stays flat whatever the file size
(but see xlsxfile about shared strings).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from . import searchconsole, xlsxfile
from .csvfile import CsvTable
from .rows import ParsedRow, RowError, RowSource, UnreadableFile

__all__ = ["DEFAULT_MAX_UNZIPPED_BYTES", "ParsedRow", "RowError", "RowSource", "UnreadableFile", "open_source"]

# Per zip member (a bundle's CSV, a workbook's sheet): far above a real export
# (Search Console stops at 1,000 rows), far below a zip bomb.
DEFAULT_MAX_UNZIPPED_BYTES = 1 << 30

_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a member first, or an empty archive
_ZIP_NAMES = (".xlsx", ".xlsm", ".zip")


def open_source(
    path: str | Path, filename: str, *, max_unzipped_bytes: int = DEFAULT_MAX_UNZIPPED_BYTES
) -> RowSource:
    """Recognise an uploaded file (stored at ``path``, uploaded as ``filename``) and its columns.

    The content decides: a zip is an Excel workbook if it holds one, else a
    Search Console bundle; anything else must be text. Raises
    ``UnreadableFile`` when the file cannot be an import.
    """
    path = Path(path)
    with path.open("rb") as file:
        magic = file.read(4)
    if not magic:
        raise UnreadableFile(f"{filename} is empty")
    if magic in _ZIP_MAGIC:
        return _open_zip(path, max_unzipped_bytes)
    try:
        return RowSource("csv", CsvTable(lambda: path.open("rb")))
    except UnreadableFile as exc:
        if Path(filename).suffix.lower() in _ZIP_NAMES:
            raise UnreadableFile(f"{filename} is not a valid {Path(filename).suffix} file: {exc}") from None
        raise


def _open_zip(path: Path, max_unzipped_bytes: int) -> RowSource:
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except zipfile.BadZipFile as exc:
        raise UnreadableFile(f"the zip archive is damaged ({exc})") from None
    if not any(info.filename == "xl/workbook.xml" for info in members):
        return searchconsole.from_bundle(path, members, max_unzipped_bytes)
    # openpyxl inflates what it reads: check every part before it does.
    for info in members:
        searchconsole.check_member(info, max_unzipped_bytes)
    with xlsxfile.opened(path) as workbook:
        if searchconsole.is_export(workbook.sheetnames):
            return searchconsole.from_workbook(path, workbook)
        if not workbook.worksheets:
            raise UnreadableFile("the Excel workbook has no worksheet")
        return RowSource("xlsx", xlsxfile.SheetTable(path, workbook, workbook.worksheets[0].title))
