"""Text files as exports arrive: guess the encoding and delimiter, bound every line.

Sniffing looks at the first ``HEAD_BYTES`` only, so a file is never read whole.
"""

from __future__ import annotations

import codecs
from typing import BinaryIO, TextIO

from .rows import UnreadableFile

HEAD_BYTES = 64 * 1024
# Longest record accepted: far above any real row (a URL is capped at 2,048
# characters), low enough that a hostile line cannot exhaust memory.
MAX_RECORD_CHARS = 1_000_000
DELIMITERS = ("\t", ";", ",")  # in order of preference when counts tie

ENCODING_NAMES = {
    "utf-8-sig": "UTF-8",
    "utf-16": "UTF-16",
    "utf-16-le": "UTF-16",
    "utf-16-be": "UTF-16",
    "cp1252": "Windows-1252",
}

# Files people upload by mistake, named so the message can say what they are.
_MAGIC = (
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old Excel .xls (Office 97-2003) file: save it as .xlsx or CSV"),
    (b"%PDF-", "a PDF document"),
    (b"\x1f\x8b", "a gzip archive: decompress it first"),
    (b"Rar!", "a RAR archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
)
# Characters no text export holds (tab, newlines and form feed aside), and
# U+FFFD, what undecodable bytes became.
_CONTROL = frozenset(map(chr, [*range(0x00, 0x09), *range(0x0E, 0x20), 0x7F, 0xFFFD]))
# Windows-1252 text is mostly ASCII: accents are a few letters in a word, URLs
# and numbers are ASCII. Bytes that decode to Latin letters and symbols nearly
# throughout (compressed or encrypted data) are not a table.
MIN_ASCII_SHARE_CP1252 = 0.5

NOT_TEXT = ("this is not a text or spreadsheet file (it holds binary data): "
            "upload a CSV, an Excel .xlsx or a Search Console .zip export")


class RecordTooLong(Exception):
    """A record went past ``MAX_RECORD_CHARS``; raised through csv.reader to its caller."""


def detect_encoding(head: bytes, *, complete: bool) -> str:
    """The codec to read a text file with, from its first bytes (``complete``: that is all of it).

    A BOM decides; else a NUL byte in every other position means UTF-16; else
    UTF-8 if the head decodes as UTF-8, Windows-1252 otherwise. Raises
    ``UnreadableFile`` when the bytes are not text at all.
    """
    for magic, what in _MAGIC:
        if head.startswith(magic):
            raise UnreadableFile(f"this is {what}, not a CSV, Excel .xlsx or Search Console .zip export")
    encoding = _guess_encoding(head, complete)
    # A stray NUL is a bad row; many control characters mean this is no text at all.
    sample = head[:8192].decode(encoding, errors="replace")
    if sum(1 for char in sample if char in _CONTROL) > 2 + len(sample) // 100:
        raise UnreadableFile(NOT_TEXT)
    if encoding == "cp1252" and sum(1 for char in sample if char.isascii()) < MIN_ASCII_SHARE_CP1252 * len(sample):
        raise UnreadableFile(NOT_TEXT)
    return encoding


def _guess_encoding(head: bytes, complete: bool) -> str:
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    guess = _utf16_without_bom(head)
    if guess:
        return guess
    try:
        # Incremental, so a character cut at the end of the head is no error.
        codecs.getincrementaldecoder("utf-8")().decode(head, final=complete)
    except UnicodeDecodeError:
        return "cp1252"
    return "utf-8-sig"  # like utf-8, and drops a BOM if one was there


def _utf16_without_bom(head: bytes) -> str | None:
    sample = head[:4096]
    pairs = len(sample) // 2
    if pairs < 2:
        return None
    even = sum(1 for byte in sample[0 : 2 * pairs : 2] if byte == 0)
    odd = sum(1 for byte in sample[1 : 2 * pairs : 2] if byte == 0)
    # ASCII text in UTF-16 has a NUL in nearly every unit, on the same side.
    if odd > pairs * 0.3 and even < pairs * 0.05:
        return "utf-16-le"
    if even > pairs * 0.3 and odd < pairs * 0.05:
        return "utf-16-be"
    return None


def newline_bytes(encoding: str, head: bytes, newline: str) -> bytes:
    """How ``newline`` ("\\n" or "\\r") is encoded in this file, to count lines in bytes."""
    if encoding == "utf-16":
        encoding = "utf-16-le" if head.startswith(codecs.BOM_UTF16_LE) else "utf-16-be"
    return newline.encode(encoding.removesuffix("-sig"))


def detect_delimiter(line: str) -> str:
    """The delimiter of a header line: the most frequent of tab, ";" and "," outside quotes.

    csv.Sniffer guesses from letters too and is easily fooled by URLs; a header
    line of known column names is a better witness.
    """
    counts = dict.fromkeys(DELIMITERS, 0)
    quoted = False
    for char in line:
        if char == '"':
            quoted = not quoted
        elif not quoted and char in counts:
            counts[char] += 1
    best = max(DELIMITERS, key=counts.__getitem__)
    return best if counts[best] else ","


def count_lines(stream: BinaryIO, newline: bytes) -> int:
    """Lines in a binary stream, read in chunks (a last line without newline counts)."""
    lines = 0
    last = b""
    while chunk := stream.read(1 << 20):  # even size: UTF-16 units never straddle chunks
        lines += chunk.count(newline)
        last = chunk
    if last and not last.endswith(newline):
        lines += 1
    return lines


class BoundedLines:
    """Physical lines of a text stream, for csv.reader, with each record bounded.

    Call ``start_record()`` before asking csv.reader for a record: a record
    longer than ``limit`` characters (one huge line, or an unclosed quote
    swallowing the rest of the file) raises ``RecordTooLong`` instead of
    growing without end. csv.reader resets its state on the next call, so
    reading goes on at the next line. ``nul`` and ``undecodable`` flag a NUL
    or an undecodable byte (U+FFFD) in the record's lines.
    """

    def __init__(self, stream: TextIO, limit: int = MAX_RECORD_CHARS):
        self.stream = stream
        self.limit = limit
        self.start_record()

    def start_record(self) -> None:
        self.chars = 0
        self.nul = False
        self.undecodable = False

    def __iter__(self):
        return self

    def __next__(self) -> str:
        line = self.stream.readline(self.limit + 1)
        if not line:
            raise StopIteration
        if len(line) > self.limit and line[-1] not in "\r\n":
            self._skip_rest_of_line()
            raise RecordTooLong
        self.chars += len(line)
        if self.chars > self.limit:
            raise RecordTooLong
        if "\x00" in line:
            self.nul = True
        if "\ufffd" in line:
            self.undecodable = True
        return line

    def _skip_rest_of_line(self) -> None:
        while True:
            rest = self.stream.readline(self.limit)
            if not rest or rest[-1] in "\r\n":
                return
