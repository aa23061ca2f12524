"""A zip's bounds, checked from what it declares before anything is inflated (xlsx workbooks and .zip bundles).

zipfile reads a zip's whole directory when it opens it: ``check_directory`` first reads the end
record (the file's last bytes) and refuses more members than IMPORT_MAX_ZIP_MEMBERS, or a directory
larger than that many members need. ``check_members`` then bounds what the members declare they
unpack to, each and together, absolutely and as a ratio to the archive's size; zipfile stops a member
at its declared size, so checking the declarations bounds the work.
"""

from __future__ import annotations

import io
import struct
import zipfile
from typing import BinaryIO, NamedTuple

from .. import conf
from .rows import UnreadableFile

_END = b"PK\x05\x06"
_END_SIZE = 22
_MAX_COMMENT = 0xFFFF
_ZIP64_LOCATOR = b"PK\x06\x07"
_ZIP64_END = b"PK\x06\x06"
# Directory bytes allowed per member: 46 fixed, and a name, extra field and comment of real sizes.
DIRECTORY_BYTES_PER_MEMBER = 1024
# Small parts (styles, themes, an empty sheet) compress far better than data: the ratio spares them.
RATIO_FLOOR_BYTES = 1_000_000
# What the user uploaded, in their words: a damaged .xlsx is a damaged Excel workbook, not a zip to them.
ZIP = "zip archive"
WORKBOOK = "Excel workbook"
_WORKBOOK_NAMES = (".xlsx", ".xlsm")


class Directory(NamedTuple):
    """What a zip's end record declares, and the archive's own size."""

    members: int
    directory_bytes: int
    archive_bytes: int


def kind_of(filename: str) -> str:
    """What a zip-based upload is to the user who sent it, by its name: an Excel workbook, else a zip archive."""
    return WORKBOOK if filename.lower().endswith(_WORKBOOK_NAMES) else ZIP


def damaged(what: str, why: str) -> UnreadableFile:
    """The error for a damaged zip, named as the user knows it (``what``: ZIP or WORKBOOK)."""
    advice = "open it in Excel and save it again, or export it again" if what == WORKBOOK else "download it again"
    return UnreadableFile(f"the {what} is damaged ({why}): {advice}")


def check_directory(file: BinaryIO, max_members: int | None = None, *, what: str = ZIP) -> Directory:
    """Refuse a zip of more than ``max_members`` members (IMPORT_MAX_ZIP_MEMBERS), reading only its end record.

    Leaves ``file`` at its start, for zipfile. ``what`` names the upload in a damaged file's message.
    """
    declared = read_end_record(file, what=what)
    file.seek(0)
    return check_declared(declared, max_members, what=what)


def check_declared(declared: Directory, max_members: int | None = None, *, what: str = ZIP) -> Directory:
    """Refuse what an end record declares: more than ``max_members`` members, or a directory too large for them."""
    if max_members is None:
        max_members = conf.get("IMPORT_MAX_ZIP_MEMBERS")
    if declared.members > max_members:
        raise UnreadableFile(f"the zip holds {declared.members:,} files; an import reads at most {max_members:,}")
    if declared.directory_bytes > max(declared.members, 1) * DIRECTORY_BYTES_PER_MEMBER:
        files = "1 file" if declared.members == 1 else f"{declared.members:,} files"
        raise damaged(what, f"its directory is {size_text(declared.directory_bytes)}, too large for {files}")
    return declared


def read_end_record(file: BinaryIO, *, what: str = ZIP) -> Directory:
    """The member count and directory size the end record declares (ZIP64's when the record defers to it)."""
    archive_bytes = file.seek(0, io.SEEK_END)
    tail_start = max(0, archive_bytes - _END_SIZE - _MAX_COMMENT)
    file.seek(tail_start)
    tail = file.read(archive_bytes - tail_start)
    at = tail.rfind(_END)
    if at < 0 or len(tail) - at < _END_SIZE:
        raise damaged(what, "it is cut short: its end record is missing")
    _, _, _, _, members, directory_bytes, directory_at, _ = struct.unpack("<4s4H2LH", tail[at:at + _END_SIZE])
    if members == 0xFFFF or directory_bytes == 0xFFFFFFFF or directory_at == 0xFFFFFFFF:
        members, directory_bytes = _zip64_end_record(file, tail_start + at, what)
    return Directory(members, directory_bytes, archive_bytes)


def _zip64_end_record(file: BinaryIO, end_at: int, what: str) -> tuple[int, int]:
    file.seek(max(0, end_at - 20))
    locator = file.read(20)
    if len(locator) < 20 or not locator.startswith(_ZIP64_LOCATOR):
        raise damaged(what, "its ZIP64 end record is missing")
    _, _, record_at, _ = struct.unpack("<4sLQL", locator)
    file.seek(record_at)
    record = file.read(56)
    if len(record) < 56 or not record.startswith(_ZIP64_END):
        raise damaged(what, "its ZIP64 end record is missing")
    _, _, _, _, _, _, _, members, directory_bytes, _ = struct.unpack("<4sQ2H2L4Q", record)
    return members, directory_bytes


def check_members(members: list[zipfile.ZipInfo], declared: Directory, max_unzipped_bytes: int, *,
                  what: str = "zip", max_ratio: int | None = None) -> None:
    """Refuse members we could not read, or that unpack past the bounds: each, all together, and as a ratio.

    ``what`` names the archive in the message ("zip", "workbook").
    """
    if max_ratio is None:
        max_ratio = conf.get("IMPORT_MAX_ZIP_RATIO")
    max_members = conf.get("IMPORT_MAX_ZIP_MEMBERS")
    if len(members) > max_members:  # more than the end record said: its directory was read, still bounded
        raise UnreadableFile(f"the zip holds {len(members):,} files; an import reads at most {max_members:,}")
    for info in members:
        check_member(info, max_unzipped_bytes)
    total = sum(info.file_size for info in members)
    if total > max_unzipped_bytes:
        raise UnreadableFile(f"the {what} unpacks to {size_text(total)}, over the {size_text(max_unzipped_bytes)} limit")
    if total > max(RATIO_FLOOR_BYTES, max_ratio * declared.archive_bytes):
        raise UnreadableFile(
            f"the {what} unpacks to {size_text(total)} from {size_text(declared.archive_bytes)}, more than "
            f"{max_ratio:,} times its size: no export compresses that well"
        )


def check_member(info: zipfile.ZipInfo, max_unzipped_bytes: int) -> None:
    """Refuse a zip member we could not read, or that unpacks to more than the limit."""
    if info.flag_bits & 0x1:
        raise UnreadableFile(f"'{info.filename}' in the zip is password-protected")
    if info.file_size > max_unzipped_bytes:
        raise UnreadableFile(
            f"'{info.filename}' in the zip unpacks to {size_text(info.file_size)}, "
            f"over the {size_text(max_unzipped_bytes)} limit"
        )


def size_text(size: int) -> str:
    return f"{size / 1_000_000:,.1f} MB" if size >= 1_000_000 else f"{size / 1000:,.1f} KB"
