"""Delimited text (.csv, .tsv, .txt) as a ``Table``, streamed.

The file, or a zip member, is reopened for every pass through an ``opener``, so
a table holds no open file between passes and can be read again after a crash.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from itertools import islice
from typing import BinaryIO

from .headers import map_columns
from .rows import BadRecord, UnreadableFile
from .text import (
    ENCODING_NAMES,
    HEAD_BYTES,
    BoundedLines,
    RecordTooLong,
    count_lines,
    detect_delimiter,
    detect_encoding,
    newline_bytes,
)

Opener = Callable[[], AbstractContextManager[BinaryIO]]

# Lines looked at for the header: blank ones, then up to MAX_TITLE_LINES
# lines of titles above it.
MAX_LEADING_LINES = 1000
MAX_TITLE_LINES = 50
# Longest line looked at for the header: 500 columns (IMPORT_MAX_COLUMNS) of long names fit,
# a header of 100,000 columns is refused before csv parses it.
HEADER_LINE_CHARS = 128 * 1024
# Excel's hint line, "sep=;", written above the header by some European exports.
_SEP_LINE = re.compile(r"sep=(.)", re.IGNORECASE)


class CsvTable:
    """The header and records of one delimited text file."""

    def __init__(self, opener: Opener):
        self._opener = opener
        with opener() as raw:
            head = raw.read(HEAD_BYTES)
            complete = len(head) < HEAD_BYTES
        if not head:
            raise UnreadableFile("the file is empty")
        self.encoding = detect_encoding(head, complete=complete)
        self.delimiter, self.leading_lines, self.headers, newline = self._find_header()
        self._newline = newline_bytes(self.encoding, head, newline)

    def _find_header(self) -> tuple[str, int, tuple[str, ...], str]:
        """The header: the first line naming a URL column, else the first non-blank line.

        Returns (delimiter, lines above the header, header cells, newline).
        Lines above it may be blank, titles, or Excel's "sep=;" hint.
        """
        sep = first = None
        titles = 0
        with self._text() as text:
            lines = BoundedLines(text, HEADER_LINE_CHARS)
            try:
                for index, line in enumerate(islice(lines, MAX_LEADING_LINES)):
                    lines.start_record()
                    if not line.strip():
                        continue
                    hint = _SEP_LINE.fullmatch(line.rstrip("\r\n").strip(" ")) if first is None else None
                    if hint and sep is None:
                        sep = hint.group(1)
                        continue
                    delimiter = sep or detect_delimiter(line)
                    cells = next(csv.reader([line], delimiter=delimiter))
                    cells = tuple(cell.strip().lstrip("\ufeff") for cell in cells)
                    found = (delimiter, index, cells, "\r" if line.endswith("\r") else "\n")
                    if "url" in map_columns(cells):
                        return found
                    first = first or found
                    titles += 1
                    if titles > MAX_TITLE_LINES:
                        break
            except RecordTooLong:
                raise UnreadableFile(
                    f"a line near the top is longer than {lines.limit:,} characters: no export's header is that long"
                ) from None
        if first is None:
            raise UnreadableFile("the file has no header row (it is blank)")
        return first

    def count(self) -> int:
        with self._opener() as raw:
            return max(0, count_lines(raw, self._newline) - self.leading_lines - 1)

    def records(self) -> Iterator[Sequence[str] | BadRecord]:
        with self._text() as text:
            lines = BoundedLines(text)
            for _ in range(self.leading_lines):
                next(lines)
            reader = csv.reader(lines, delimiter=self.delimiter, quotechar='"', doublequote=True, strict=False)
            lines.start_record()
            next(reader)  # the header, found and parsed on opening
            while True:
                lines.start_record()
                try:
                    cells = next(reader)
                except StopIteration:
                    return
                except RecordTooLong:
                    yield BadRecord(f"row is longer than {lines.limit:,} characters (an unclosed quote?)")
                except csv.Error as exc:
                    yield BadRecord(f"row could not be read: {exc}")
                else:
                    if lines.nul:
                        yield BadRecord("row contains a NUL byte")
                    elif lines.undecodable:
                        yield BadRecord(f"row has bytes that are not valid {ENCODING_NAMES[self.encoding]}")
                    else:
                        yield cells

    @contextmanager
    def _text(self):
        with self._opener() as raw:
            # newline="" lets csv see quoted line breaks; "replace" turns a bad
            # byte into U+FFFD, which BoundedLines flags as a row error.
            text = io.TextIOWrapper(raw, encoding=self.encoding, errors="replace", newline="")
            try:
                yield text
            finally:
                text.detach()  # the opener closes the underlying stream
