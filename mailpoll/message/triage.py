"""Which parts of a parsed message go down the pipeline: pure decisions, no I/O.

The intake's rule: only extractable attachments (PDF, Excel, CSV) become
documents; inline images (logos, signatures, banners) are dropped; anything
else is recorded as skipped, metadata only. With no extractable attachment the
body is the document; with some, the body travels as each one's context_text
(the reader sees both at once, so no row is duplicated).

What a file is, is decided by its content first: a ``.pdf`` that is an HTML
error page is not a PDF, an ``application/octet-stream`` PDF is one.

Every part the parser found ends as a document, a skipped row with its reason,
or a dropped image: a part the parser already knows is not processed (nested
too deep, an empty ``winmail.dat``) is skipped with the parser's reason.
"""

from __future__ import annotations

import codecs
import io
import re
import zipfile
from dataclasses import dataclass

from imports.formats import ziparchive
from imports.formats.rows import UnreadableFile

from .parse import ParsedMessage, Part

SMALL_IMAGE_BYTES = 50 * 1024
# The body beside each document is context for a reader, copied onto every
# document of the message: a long quoted thread is cut, not repeated whole.
CONTEXT_MAX_CHARS = 32_000
EXTRACTABLE = ("pdf", "xlsx", "xls", "csv")
BODY_FILENAME = "message.txt"

_IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a")
_OLE2_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
# Excel's stream in an OLE2 compound file ("Book" before Excel 97), UTF-16LE in the directory.
_OLE2_WORKBOOK = ("Workbook\x00".encode("utf-16-le"), "Book\x00".encode("utf-16-le"))
# A password-protected .xlsx/.docx is an OLE2 file holding the encrypted package.
_OLE2_ENCRYPTED = "EncryptedPackage\x00".encode("utf-16-le")
_XLS_MIMES = frozenset({"application/vnd.ms-excel", "application/msexcel", "application/x-msexcel",
                        "application/x-excel", "application/excel"})
_CSV_MIMES = frozenset({
    "text/csv", "text/x-csv", "application/csv", "application/x-csv", "text/comma-separated-values",
    "text/x-comma-separated-values", "text/tab-separated-values",
})
# Names and types that may hold delimited text (Excel's "Unicode text" export, a TSV saved as .xls):
# taken as CSV only when the text has a delimiter pattern.
_MAYBE_CSV_EXTENSIONS = (".tsv", ".tab", ".txt", ".xls")
_MAYBE_CSV_MIMES = frozenset({"text/plain", "application/vnd.ms-excel", "application/octet-stream"})
_MARKUP = re.compile(r"\s*<(!doctype|html|\?xml|head|body|table|!--)", re.IGNORECASE)
_SNIFF_BYTES = 64 * 1024
# Control characters (Unicode category Cc) other than tab, newline, carriage return and form feed.
_CONTROLS = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class Document:
    kind: str  # pdf | xlsx | xls | csv | body
    filename: str  # safe
    original_filename: str
    mime: str
    content: bytes
    context_text: str  # the message body, beside an attachment; "" for the body document itself


@dataclass(frozen=True)
class Skipped:
    filename: str
    original_filename: str
    mime: str
    size: int
    reason: str


@dataclass(frozen=True)
class Triage:
    documents: tuple[Document, ...]
    skipped: tuple[Skipped, ...]
    dropped: int  # inline and small images: not recorded at all


def triage(message: ParsedMessage, *, small_image_bytes: int = SMALL_IMAGE_BYTES) -> Triage:
    """Sort a message's parts into documents, skipped attachments and dropped images.

    An empty body and no extractable attachment give no documents at all: the
    caller still records the message (and its skipped rows), with nothing to process.
    """
    body = message.body_text.strip()
    context = body[:CONTEXT_MAX_CHARS]
    documents, skipped, dropped = [], [], 0
    for part in message.parts:
        kind = sniff_kind(part.content, part.filename, part.mime)
        if kind in EXTRACTABLE and not part.skip_reason:  # a part the parser skipped is never a document
            # Disposition does not matter: Apple Mail sends PDFs inline.
            documents.append(Document(kind, part.filename, part.original_filename, part.mime, part.content, context))
        elif _is_image(kind, part) and (_is_inline(part) or part.size < small_image_bytes):
            dropped += 1
        else:
            skipped.append(Skipped(part.filename, part.original_filename, part.mime, part.size,
                                   part.skip_reason or _skip_reason(part, kind)))
    if not documents and body:
        documents.append(Document("body", BODY_FILENAME, "", "text/plain", body.encode("utf-8"), ""))
    return Triage(documents=tuple(documents), skipped=tuple(skipped), dropped=dropped)


def sniff_kind(content: bytes, filename: str, mime: str) -> str:
    """'pdf', 'xlsx', 'xls', 'csv', 'image', 'encrypted' or 'other': magic bytes first, then names and types.

    Names and types decide only among what the bytes allow: text (CSV or not),
    and an OLE2 file whose Excel stream name was not found (an .xls still).
    """
    head = content[:1024]
    if b"%PDF-" in head:  # readers accept junk before the header, and so do we
        return "pdf"
    if content.startswith(b"PK\x03\x04"):
        if not _zip_within_bounds(content):  # an .xlsx by its name: its import says which bound it breaks
            return "xlsx" if filename.lower().endswith(".xlsx") else "other"
        return "xlsx" if _zip_has(content, "xl/workbook.xml") else "other"
    if content.startswith(_OLE2_MAGIC):
        if _OLE2_ENCRYPTED in content:
            return "encrypted"
        if any(name in content for name in _OLE2_WORKBOOK):
            return "xls"
        return "xls" if filename.lower().endswith(".xls") or mime.lower() in _XLS_MIMES else "other"
    if content.startswith(_IMAGE_MAGIC) or (content[:4] == b"RIFF" and content[8:12] == b"WEBP"):
        return "image"
    return "csv" if _is_csv(content, filename.lower(), mime.lower()) else "other"


def _zip_within_bounds(content: bytes) -> bool:
    """Does the zip's end record declare no more members than an import reads? zipfile lists them all at open.

    A zip without an end record is left to zipfile, which refuses it at once.
    """
    try:
        declared = ziparchive.read_end_record(io.BytesIO(content))
    except UnreadableFile:
        return True
    try:
        ziparchive.check_declared(declared)
    except UnreadableFile:
        return False
    return True


def _zip_has(content: bytes, member: str) -> bool:
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            return member in archive.namelist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError):
        return False


def _is_csv(content: bytes, filename: str, mime: str) -> bool:
    text = _as_text(content[:_SNIFF_BYTES])
    if text is None or not text.strip() or _MARKUP.match(text):
        return False
    if filename.endswith(".csv") or mime in _CSV_MIMES:
        return True
    if not (filename.endswith(_MAYBE_CSV_EXTENSIONS) or mime in _MAYBE_CSV_MIMES):
        return False
    lines = [line for line in text.splitlines() if line.strip()]
    if len(content) > _SNIFF_BYTES:
        lines = lines[:-1]  # the sample may end mid-line
    return _has_delimiter_pattern(lines[:20])


def _as_text(head: bytes) -> str | None:
    """The text of these bytes if they are text (UTF-16 with BOM, UTF-8, Windows-1252), else None."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encodings = ["utf-16"]
    else:
        encodings = ["utf-8-sig", "cp1252"]
    for encoding in encodings:
        try:
            # Incremental and not final: the sample may end inside a multibyte character.
            text = codecs.getincrementaldecoder(encoding)().decode(head, final=False)
        except UnicodeDecodeError:
            continue
        controls = len(_CONTROLS.findall(text))
        return text if controls <= len(text) // 100 else None
    return None


def _has_delimiter_pattern(lines: list[str]) -> bool:
    """The same non-zero count of one delimiter on every line: two lines for 3+ columns, three for 2.

    So "Hello, Anne" above "Thanks, Bob" is prose, not a table.
    """
    for delimiter in ("\t", ";", ",", "|"):
        counts = {line.count(delimiter) for line in lines}
        if len(counts) == 1 and (count := counts.pop()) > 0 and len(lines) >= (2 if count >= 2 else 3):
            return True
    return False


def _is_image(kind: str, part: Part) -> bool:
    return kind == "image" or part.mime.startswith("image/")


def _is_inline(part: Part) -> bool:
    # Apple Mail gives every attachment a Content-ID: an explicit 'attachment' disposition wins.
    return part.disposition == "inline" or (part.content_id is not None and part.disposition != "attachment")


def _skip_reason(part: Part, kind: str) -> str:
    if part.size == 0:
        return "empty attachment"
    if part.size > len(part.content):
        return f"too large to keep ({part.size} bytes)"
    if kind == "encrypted":
        return "password-protected Office file: send it again without a password"
    return f"not a PDF, Excel or CSV file ({part.mime})"
