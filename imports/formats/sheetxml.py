"""A worksheet's XML as openpyxl reads it, with each row's markup counted as it streams past.

openpyxl's streaming reader still builds a whole row (every cell's elements) before it yields it:
a row of millions of cells would be held at once. This counts the tags between row ends and refuses
a row past Excel's widest (16,384 cells), before the parser has built it.
"""

from __future__ import annotations

import io
import re
from typing import BinaryIO

from .rows import UnreadableFile

# Excel's widest row, and tags a cell may take (<c><is><t>…</t></is></c> and its <v>, <f>).
MAX_ROW_CELLS = 16_384
MAX_ROW_TAGS = MAX_ROW_CELLS * 8
# A row's closing tag, or an empty row's self-closing one (<row r="5" ht="20" customHeight="1"/>).
_ROW_END = re.compile(rb"</(?:[A-Za-z_][\w.-]*:)?row\s*>|<(?:[A-Za-z_][\w.-]*:)?row\b[^<>]*/>")
# Markup whose text may hold "<" and "</row>" without being tags; no spreadsheet writes it in a sheet.
_OPAQUE = (b"<![CDATA[", b"<!--")
_TAIL = 32  # bytes kept back for a row end or an opaque start cut across two reads


class RowBounded(io.RawIOBase):
    """``stream`` (a worksheet part named ``name``), refused past ``MAX_ROW_TAGS`` tags in one row."""

    def __init__(self, stream: BinaryIO, name: str):
        super().__init__()
        self._stream = stream
        self._name = name
        self._tail = b""
        self._tags = 0

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        if not self.closed:
            self._stream.close()
        super().close()

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self._scan(data, final=not data)
        return data

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def _scan(self, data: bytes, *, final: bool) -> None:
        seen = self._tail + data
        if any(opaque in seen for opaque in _OPAQUE):
            raise UnreadableFile(f"'{self._name}' in the workbook holds CDATA or comments, which no spreadsheet "
                                 "writes in a sheet")
        counted_to = 0
        for end in _ROW_END.finditer(seen):
            self._count(seen, counted_to, end.start())
            self._tags = 0
            counted_to = end.end()
        keep = len(seen) if final else max(counted_to, len(seen) - _TAIL)
        self._count(seen, counted_to, keep)
        self._tail = seen[keep:]

    def _count(self, seen: bytes, start: int, end: int) -> None:
        self._tags += seen.count(b"<", start, end)
        if self._tags > MAX_ROW_TAGS:
            raise UnreadableFile(f"a row of '{self._name}' in the workbook holds more than {MAX_ROW_CELLS:,} "
                                 "cells, Excel's widest: it was not written by a spreadsheet")
