"""Streaming readers for SEO exports: delimited text, Excel .xlsx, Search Console bundles.

    source = open_source(path, "export.csv")    # or UnreadableFile, for the operator
    source.kind, source.columns, source.period  # what was recognised
    source.needs_period                         # no date column, no period in the file
    source.total_rows()                         # an estimate, for progress
    for row in source.rows(skip=rows_committed):  # to resume: rows already written
        ...                                     # ParsedRow, or RowError for a bad row
    source.summary()                            # columns used / ignored, sheet, date order

``path`` may also be an opener: a callable returning a context manager over a
fresh binary file object (an upload still in memory, say).

Nothing here touches the database; memory stays flat whatever the file size
(but see xlsxfile about shared strings). A zip is bounded from its directory
before anything is inflated (``ziparchive``); within ``look.bounded(n)`` (the
upload's check) at most n bytes are read, then ``look.LookExhausted``.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from .. import conf
from . import look, ole, searchconsole_export, xlsxfile, ziparchive
from .csvfile import CsvTable
from .rows import NoSuchSheet, ParsedRow, RowError, RowSource, UnreadableFile
from .values import DATE_ORDERS, DAY_FIRST
from .xlsxfile import Opener

__all__ = ["DATE_ORDERS", "NoSuchSheet", "look", "ParsedRow", "RowError", "RowSource",
           "UnreadableFile", "open_source"]

_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a member first, or an empty archive
_ZIP_NAMES = (".xlsx", ".xlsm", ".zip")


def open_source(
    path: str | Path | Opener, filename: str, *, sheet: str | None = None, date_order: str | None = None,
    default_date_order: str = DAY_FIRST, max_unzipped_bytes: int | None = None,
) -> RowSource:
    """Recognise an uploaded file (stored at ``path``, uploaded as ``filename``) and its columns.

    The content decides: a zip is an Excel workbook if it holds one, else a
    Search Console bundle; anything else must be text. ``sheet`` names the
    worksheet to read (default: the Pages sheet of a Search Console export,
    else the first sheet naming a URL column); ``date_order`` ("dmy", "mdy")
    is the import's choice for a/b/yyyy dates, None to decide from the file,
    with ``default_date_order`` when its dates fit both; ``max_unzipped_bytes``
    is per zip member (default: IMPORT_MAX_UNZIPPED_BYTES). Raises
    ``UnreadableFile`` when the file cannot be an import.
    """
    opener = path if callable(path) else _path_opener(Path(path))
    if max_unzipped_bytes is None:
        max_unzipped_bytes = conf.get("IMPORT_MAX_UNZIPPED_BYTES")
    options = {"date_order": date_order, "default_date_order": default_date_order}
    with opener() as file:
        magic = file.read(8)
    if not magic:
        raise UnreadableFile(f"{filename} is empty")
    if magic.startswith(ole.MAGIC):
        raise UnreadableFile(ole.describe(opener))
    if magic[:4] in _ZIP_MAGIC:
        return _open_zip(opener, filename, max_unzipped_bytes, sheet, options)
    try:
        return RowSource("csv", CsvTable(look.counted_opener(opener)), **options)
    except UnreadableFile as exc:
        if Path(filename).suffix.lower() in _ZIP_NAMES:
            raise UnreadableFile(f"{filename} is not a valid {Path(filename).suffix} file: {exc}") from None
        raise


def _path_opener(path: Path) -> Opener:
    return lambda: path.open("rb")


# Zip-based documents that are not Excel workbooks, by a member only they have.
_OTHER_DOCUMENTS = (
    ("word/document.xml", "a Word document"),
    ("ppt/presentation.xml", "a PowerPoint presentation"),
)


def _open_zip(opener: Opener, filename: str, max_unzipped_bytes: int, sheet: str | None, options: dict) -> RowSource:
    what = ziparchive.kind_of(filename)
    try:
        with opener() as file:
            declared = ziparchive.check_directory(file, what=what)  # zipfile would read a directory of any size
            with zipfile.ZipFile(file) as archive:
                members = archive.infolist()
                mimetype = _opendocument_type(archive, members)
    except zipfile.BadZipFile as exc:
        raise ziparchive.damaged(what, str(exc)) from None
    names = {info.filename for info in members}
    if mimetype is not None:
        what = "an OpenDocument spreadsheet (.ods)" if "spreadsheet" in mimetype else "an OpenDocument file"
        raise UnreadableFile(f"this is {what}, not an Excel .xlsx: save it as .xlsx or CSV")
    for member, what in _OTHER_DOCUMENTS:
        if member in names:
            raise UnreadableFile(f"this is {what}, not a text or spreadsheet file")
    is_workbook = "xl/workbook.xml" in names
    # Whatever is read of it later, every member is checked before anything is inflated.
    ziparchive.check_members(members, declared, max_unzipped_bytes, what="workbook" if is_workbook else "zip")
    if not is_workbook:
        return searchconsole_export.from_bundle(opener, members, max_unzipped_bytes, **options)
    with xlsxfile.opened(opener) as workbook:
        if searchconsole_export.is_export(workbook.sheetnames):
            return searchconsole_export.from_workbook(opener, workbook, sheet=sheet, **options)
        read = xlsxfile.choose_sheet(workbook, sheet)
        others = [name for name in xlsxfile.sheet_names(workbook) if name != read]
        return RowSource("xlsx", xlsxfile.SheetTable(opener, workbook, read), sheet=read, other_sheets=others,
                         **options)


def _opendocument_type(archive: zipfile.ZipFile, members) -> str | None:
    """The ``mimetype`` an OpenDocument file declares first in its zip, or None."""
    first = members[0] if members else None
    if first is None or first.filename != "mimetype" or first.file_size > 200:
        return None
    declared = archive.read(first).decode("ascii", errors="replace")
    return declared if declared.startswith("application/vnd.oasis.opendocument") else None
