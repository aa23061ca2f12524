"""What an OLE2 compound file (the container of Office 97-2003 files) holds, by its stream names.

An old ``.xls`` and a password-protected ``.xlsx`` both start with the same
magic bytes: Excel encrypts a workbook by wrapping it in a compound file with
an ``EncryptedPackage`` stream. Only the directory is read (a few sectors),
never the streams, and every chain is bounded, so a hostile file costs little.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import BinaryIO

MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"

_END_OF_CHAIN = 0xFFFFFFFE
_HEADER_DIFAT = 109
_MAX_SECTORS = 4096  # directory and DIFAT sectors followed: far above a real file's few
_ENTRY = 128

# Stream name -> what the file is, in the order they are looked for.
_KINDS = (
    ("EncryptedPackage", "password-protected"),
    ("Workbook", "xls"),
    ("Book", "xls"),
    ("WordDocument", "doc"),
    ("PowerPoint Document", "ppt"),
)

MESSAGES = {
    "password-protected": ("this Excel file is password-protected: remove the password in Excel (File → Info → "
                           "Protect Workbook → Encrypt with Password, clear it) and upload it again"),
    "xls": "this is an old Excel .xls (Office 97-2003) file: save it as .xlsx or CSV",
    "doc": "this is a Word document, not a text or spreadsheet file",
    "ppt": "this is a PowerPoint presentation, not a text or spreadsheet file",
    None: "this is an old Office 97-2003 file (.xls?): save it as .xlsx or CSV",
}


def describe(opener: Callable[[], AbstractContextManager[BinaryIO]]) -> str:
    """The operator's message for a compound file: password-protected, old .xls, Word, …"""
    with opener() as file:
        try:
            names = set(stream_names(file))
        except (struct.error, ValueError, OSError):
            names = set()
    kind = next((kind for name, kind in _KINDS if name in names), None)
    return MESSAGES[kind]


def stream_names(file: BinaryIO) -> list[str]:
    """Names of the directory entries of a compound file (raises ValueError when it is damaged)."""
    header = file.read(512)
    if len(header) < 512 or not header.startswith(MAGIC):
        raise ValueError("not a compound file")
    shift = struct.unpack_from("<H", header, 0x1E)[0]
    if shift not in (9, 12):
        raise ValueError("bad sector size")
    size = 1 << shift
    (fat_count, first_directory, first_difat, difat_count) = (
        struct.unpack_from("<I", header, 0x2C)[0], struct.unpack_from("<I", header, 0x30)[0],
        struct.unpack_from("<I", header, 0x44)[0], struct.unpack_from("<I", header, 0x48)[0])

    def sector(number: int) -> bytes:
        file.seek((number + 1) * size)
        data = file.read(size)
        if len(data) < size:
            raise ValueError("truncated")
        return data

    # Where the FAT sectors are: 109 in the header, the rest in the DIFAT chain.
    fat_sectors = list(struct.unpack_from(f"<{_HEADER_DIFAT}I", header, 0x4C))[: min(fat_count, _HEADER_DIFAT)]
    per_sector = size // 4
    difat, seen = first_difat, 0
    while len(fat_sectors) < fat_count and difat < _END_OF_CHAIN and seen < min(difat_count, _MAX_SECTORS):
        entries = struct.unpack(f"<{per_sector}I", sector(difat))
        fat_sectors.extend(entries[:-1])
        difat, seen = entries[-1], seen + 1

    def next_sector(number: int) -> int:
        index, offset = divmod(number, per_sector)
        if index >= len(fat_sectors):
            raise ValueError("chain outside the FAT")
        return struct.unpack_from("<I", sector(fat_sectors[index]), offset * 4)[0]

    names = []
    current, visited = first_directory, set()
    while current < _END_OF_CHAIN and current not in visited and len(visited) < _MAX_SECTORS:
        visited.add(current)
        data = sector(current)
        for start in range(0, size, _ENTRY):
            length = struct.unpack_from("<H", data, start + 64)[0]
            if 2 <= length <= 64:
                names.append(data[start : start + length - 2].decode("utf-16-le", errors="replace"))
        current = next_sector(current)
    return names
