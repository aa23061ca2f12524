"""Raw RFC 5322 bytes → a ParsedMessage: pure, best effort, never trusting the sender.

Bad input is the normal case here: lying or unknown charsets, broken base64,
truncated MIME, 8-bit bytes in headers. All of it is parsed as far as it goes
and noted in ``defects``; only a message with nothing usable (no header block,
or a MIME structure nested to blow the parser's stack) raises UnparseableMessage.

Everything returned is safe to store in PostgreSQL text columns (no NUL, no
lone surrogates) and capped in length. Attachments are searched for through
forwarded messages (``message/rfc822``, depth-capped), ``multipart/signed`` and
TNEF ``winmail.dat``.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import email
import email.header
import email.utils
import hashlib
import quopri
import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime, timezone
from email.errors import HeaderParseError
from email.message import Message
from email.policy import Compat32
from html.parser import HTMLParser

from . import tnef

__all__ = ["ParsedMessage", "Part", "UnparseableMessage", "parse_message", "safe_filename"]

MAX_DEPTH = 5  # forwarded-inside-forwarded levels searched for attachments
MAX_PARTS = 500
MAX_PART_BYTES = 25 * 1024 * 1024
MAX_MULTIPART_NESTING = 32  # multipart inside multipart, within one message
MAX_DEFECTS = 50
SUBJECT_MAX_CHARS = 1000
SENDER_MAX_CHARS = 500
MESSAGE_ID_MAX_CHARS = 250  # longer is not a real Message-ID: the raw hash names the message instead
ORIGINAL_FILENAME_MAX_CHARS = 500
BODY_MAX_CHARS = 1_000_000
HTML_MAX_CHARS = 5_000_000  # html.parser is slow on huge hostile input; the cut is a defect

# At least one of these makes a header block a mail's: "Foo: bar" alone is not one.
_MAIL_HEADERS = frozenset({
    "from", "to", "cc", "subject", "date", "message-id", "received", "return-path", "mime-version",
    "content-type", "sender", "reply-to", "delivered-to",
})
_SIGNATURE_PROTOCOLS = ("multipart/signed",)
_MIME_RE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}")
_BOUNDARY_LINE = re.compile(rb"^--([^\s]{1,70})\s*$", re.MULTILINE)


class UnparseableMessage(ValueError):
    """Nothing usable in these bytes; ``reason`` says why (for the rejected Request)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Part:
    """A leaf that could be an attachment (not the message's own body text)."""

    filename: str  # safe_filename(original_filename), never empty
    original_filename: str  # decoded as sent (control characters removed), capped; "" if none
    mime: str  # declared, lowercased; application/octet-stream if missing or malformed
    content: bytes  # decoded payload; empty if size > max_part_bytes
    disposition: str | None  # 'attachment' | 'inline' | None
    content_id: str | None  # without angle brackets
    depth: int  # 0 = the message itself, +1 inside each message/rfc822 or TNEF
    size: int  # decoded size, even when the content was not kept


@dataclass(frozen=True)
class ParsedMessage:
    message_id: str | None
    source_ref: str  # message_id, else "sha256:<hex of raw>"
    sender: str  # the From address (display name dropped); "" if none
    subject: str
    date: datetime | None  # aware
    body_text: str
    parts: tuple[Part, ...]
    defects: tuple[str, ...]


class _Policy(Compat32):
    """compat32 parsing, but raw 8-bit header bytes decoded instead of becoming U+FFFD.

    compat32 wraps them in an 'unknown-8bit' Header whose str() loses them; real
    senders put UTF-8 or Windows-1252 there (names, subjects), so we guess.
    """

    def header_fetch_parse(self, name, value):
        if any("\udc80" <= char <= "\udcff" for char in value):
            value = decode_bytes(value.encode("ascii", "surrogateescape"), None)[0]
        return value


_POLICY = _Policy()


def parse_message(raw: bytes, *, max_depth: int = MAX_DEPTH, max_parts: int = MAX_PARTS,
                  max_part_bytes: int = MAX_PART_BYTES) -> ParsedMessage:
    """Parse one raw message. Raises UnparseableMessage only when nothing is usable."""
    if not raw.strip():
        raise UnparseableMessage("empty message")
    root = _parse_bytes(raw)
    if not any(key.lower() in _MAIL_HEADERS for key in root.keys()):
        raise UnparseableMessage("no mail header block")
    walker = _Walker(max_depth=max_depth, max_parts=max_parts, max_part_bytes=max_part_bytes)
    walker.walk(root)
    message_id = _message_id(root, walker.defects)
    return ParsedMessage(
        message_id=message_id,
        source_ref=message_id or "sha256:" + hashlib.sha256(raw).hexdigest(),
        sender=_sender(root.get("from")),
        subject=clean_line(_decode_words(root.get("subject") or ""), SUBJECT_MAX_CHARS),
        date=_date(root.get("date")),
        body_text=walker.body_text(),
        parts=tuple(walker.parts),
        defects=tuple(walker.defects[:MAX_DEFECTS]),
    )


def _parse_bytes(raw: bytes) -> Message:
    try:
        return email.message_from_bytes(raw, policy=_POLICY)
    except RecursionError:
        # The stdlib parser recurses per MIME level; only a hostile message nests hundreds deep.
        raise UnparseableMessage("MIME structure nested too deeply") from None


class _Walker:
    """Depth-first walk of the MIME tree, iterative, collecting body texts, parts and defects."""

    def __init__(self, *, max_depth: int, max_parts: int, max_part_bytes: int):
        self.max_depth, self.max_parts, self.max_part_bytes = max_depth, max_parts, max_part_bytes
        self.parts: list[Part] = []
        self.defects: list[str] = []
        self.plain: list[tuple[int, str]] = []  # (depth, text)
        self.html: list[tuple[int, str]] = []
        self.leaves = 0

    def defect(self, text: str) -> None:
        if text not in self.defects:
            self.defects.append(text)

    def walk(self, root: Message) -> None:
        stack = [(root, 0, 0)]  # (node, message depth, multipart nesting)
        while stack:
            node, depth, nesting = stack.pop()
            children = self.visit(node, depth, nesting)
            stack.extend(reversed(children))

    def visit(self, node: Message, depth: int, nesting: int) -> list:
        ctype = node.get_content_type()
        if node.is_multipart():
            self.note_defects(node, ctype)
            payload = [child for child in node.get_payload() if isinstance(child, Message)]
            if ctype == "message/rfc822":
                inner = _encoded_rfc822(node)
                return self.forwarded([inner] if inner is not None else payload[:1], depth)
            if node.get_content_maintype() == "message":
                return []  # delivery-status, disposition-notification: reports, not attachments
            if nesting >= MAX_MULTIPART_NESTING:
                self.defect(f"multipart nested over {MAX_MULTIPART_NESTING} levels: not searched")
                return []
            if ctype in _SIGNATURE_PROTOCOLS:
                payload = payload[:1]  # the second part is the signature itself, not an attachment
            return [(child, depth, nesting + 1) for child in payload]
        if node.get_content_maintype() == "multipart":
            recovered = _recover_boundary(node)
            self.note_defects(node, ctype)
            if recovered is not None:
                self.defect("multipart without a usable boundary: boundary guessed")
                return [(recovered, depth, nesting + 1)]
        self.leaf(node, ctype, depth)
        return []

    def forwarded(self, messages: list[Message], depth: int) -> list:
        if depth + 1 > self.max_depth:
            self.defect(f"forwarded message nested over {self.max_depth} levels: not searched")
            return []
        return [(message, depth + 1, 0) for message in messages]

    def leaf(self, node: Message, ctype: str, depth: int) -> None:
        self.leaves += 1
        if self.leaves > self.max_parts:
            self.defect(f"over {self.max_parts} parts: the rest ignored")
            return
        content = node.get_payload(decode=True) or b""
        original = _filename(node, self.defects)
        disposition = _disposition(node)
        self.note_defects(node, original or ctype)
        if node.get_content_maintype() == "text" and disposition != "attachment" and not original:
            if node.get_content_subtype() in ("plain", "html"):
                return self.body(node, content, depth)
        mime = ctype if _MIME_RE.fullmatch(ctype) else "application/octet-stream"
        if tnef.is_tnef(content) and (mime in tnef.TNEF_MIMES or original.lower().endswith(".dat")):
            return self.tnef(content, original, depth)
        self.add_part(original, mime, content, disposition, _content_id(node), depth)

    def body(self, node: Message, content: bytes, depth: int) -> None:
        text, defects = decode_bytes(content, node.get_content_charset())
        for defect in defects:
            self.defect(f"{defect} in the body")
        if node.get_content_subtype() == "plain":
            self.plain.append((depth, text))
            return
        if len(text) > HTML_MAX_CHARS:
            self.defect("HTML body cut before its text was extracted")
            text = text[:HTML_MAX_CHARS]
        self.html.append((depth, html_to_text(text)))

    def tnef(self, content: bytes, original: str, depth: int) -> None:
        if depth + 1 > self.max_depth:
            self.defect(f"TNEF nested over {self.max_depth} levels: not unpacked")
            return self.add_part(original, "application/ms-tnef", content, "attachment", None, depth)
        files, defects = tnef.unpack(content)
        for defect in defects:
            self.defect(defect)
        if not files:
            self.defect("TNEF attachment without files")
        for found in files:
            self.add_part(found.name, found.mime, found.content, "attachment", None, depth + 1)

    def add_part(self, original: str, mime: str, content: bytes, disposition: str | None,
                 content_id: str | None, depth: int) -> None:
        size = len(content)
        if size > self.max_part_bytes:
            self.defect(f"part over {self.max_part_bytes} bytes not kept ({size} bytes)")
            content = b""
        original = clean_line(original, ORIGINAL_FILENAME_MAX_CHARS, keep_format=True)
        self.parts.append(Part(
            filename=safe_filename(original), original_filename=original, mime=mime, content=content,
            disposition=disposition, content_id=content_id, depth=depth, size=size,
        ))

    def note_defects(self, node: Message, where: str) -> None:
        for defect in node.defects:
            name = type(defect).__name__.removesuffix("Defect")
            self.defect(f"{_kebab(name)} ({clean_line(where, 80)})")

    def body_text(self) -> str:
        """text/plain of the shallowest message that has any, else its HTML's text."""
        for texts in (self.plain, self.html):
            found = [(depth, text) for depth, text in texts if text.strip()]
            if found:
                top = min(depth for depth, _ in found)
                return clean_text("\n\n".join(text for depth, text in found if depth == top), BODY_MAX_CHARS)
        return ""


def _recover_boundary(node: Message) -> Message | None:
    """A multipart whose boundary is missing or wrong: find the delimiter in the body and reparse."""
    payload = node.get_payload()
    if not isinstance(payload, str):
        return None
    body = payload.encode("ascii", "surrogateescape")
    match = _BOUNDARY_LINE.search(body)
    if match is None or match.group(1).rstrip(b"-") == (node.get_boundary() or "").encode():
        return None
    boundary = match.group(1).decode("ascii", "replace")
    if boundary.endswith("--"):
        return None
    head = f'Content-Type: {node.get_content_type()}; boundary="{boundary}"\r\n\r\n'.encode()
    recovered = _parse_bytes(head + body)
    return recovered if recovered.is_multipart() else None


def _encoded_rfc822(node: Message) -> Message | None:
    """A forwarded message sent base64/QP-encoded (against RFC 2046, but done): decoded and parsed."""
    cte = (node.get("content-transfer-encoding") or "").strip().lower()
    if cte not in ("base64", "quoted-printable"):
        return None
    payload = node.get_payload()
    if isinstance(payload, list):  # the parser read the encoded text as a message without headers
        if not payload or payload[0].keys():
            return None
        payload = payload[0].get_payload()
    if not isinstance(payload, str):
        return None
    encoded = payload.encode("ascii", "surrogateescape")
    raw = quopri.decodestring(encoded) if cte == "quoted-printable" else _lenient_b64(encoded)
    inner = _parse_bytes(raw) if raw and raw.strip() else None
    return inner if inner is not None and inner.keys() else None


def _lenient_b64(encoded: bytes) -> bytes:
    data = re.sub(rb"[^A-Za-z0-9+/]", b"", encoded)
    data = data[: len(data) - len(data) % 4] if len(data) % 4 == 1 else data + b"=" * (-len(data) % 4)
    try:
        return base64.b64decode(data)
    except binascii.Error:
        return b""


def _filename(node: Message, defects: list[str]) -> str:
    """The sender's file name, RFC 2231 and RFC 2047 decoded; "" if none."""
    value = node.get_param("filename", None, "content-disposition")
    if not value:
        value = node.get_param("name", None, "content-type")
    if not value:
        return ""
    if isinstance(value, tuple):  # RFC 2231: (charset, language, %-decoded text as latin-1 chars)
        charset, _language, text = value
        try:
            raw = text.encode("latin-1")
        except UnicodeEncodeError:
            name = text  # already decoded from 8-bit header bytes
        else:
            name, problems = decode_bytes(raw, charset or None)
            defects.extend(f"{problem} in a file name" for problem in problems)
    else:
        name = email.utils.unquote(value)
    if "=?" in name:  # RFC 2047 inside a parameter: forbidden, sent by most clients anyway
        name = _decode_words(name)
    return name


def _decode_words(value: str) -> str:
    """RFC 2047 encoded words decoded; undecodable words kept as they are."""
    value = str(value)
    if "=?" not in value:
        return value
    try:
        chunks = email.header.decode_header(value)
    except (HeaderParseError, binascii.Error, ValueError):
        return value
    out = []
    for chunk, charset in chunks:
        if isinstance(chunk, str):
            out.append(chunk)
        elif charset is None:
            # decode_header turns the unencoded stretches into raw-unicode-escape bytes.
            try:
                out.append(chunk.decode("raw-unicode-escape"))
            except UnicodeDecodeError:
                out.append(chunk.decode("latin-1"))
        else:
            out.append(decode_bytes(chunk, charset.split("*", 1)[0])[0])  # "utf-8*en": RFC 2231 language
    return "".join(out)


def _disposition(node: Message) -> str | None:
    value = node.get_content_disposition()
    return value if value in ("attachment", "inline") else None


def _content_id(node: Message) -> str | None:
    value = clean_line(node.get("content-id") or "", 250).strip("<> ")
    return value or None


def _message_id(root: Message, defects: list[str]) -> str | None:
    values = root.get_all("message-id") or []
    if len(values) > 1:
        defects.append("several Message-ID headers: the first one used")
    if not values:
        return None
    value = clean_line(str(values[0]), 10 * MESSAGE_ID_MAX_CHARS)
    match = re.search(r"<([^<>]*)>", value)
    value = re.sub(r"\s+", "", match.group(1) if match else value).strip("<>")
    if len(value) > MESSAGE_ID_MAX_CHARS:
        defects.append("Message-ID too long: the message is named by its hash")
        return None
    return value or None


def _sender(value: str | None) -> str:
    if not value:
        return ""
    _name, address = email.utils.parseaddr(str(value))
    if address and "@" in address:
        return clean_line(_decode_words(address), SENDER_MAX_CHARS).replace(" ", "")
    return clean_line(_decode_words(value), SENDER_MAX_CHARS)


def _date(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(clean_line(str(value), 200))
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    # "-0000" (zone unknown) parses naive; RFC 5322 says the time is in UTC then.
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _kebab(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", name).lower()



# --- text: charsets, cleaning, HTML, file names --------------------------------------

FILENAME_MAX_CHARS = 150
FILENAME_MAX_BYTES = 240  # UTF-8, under the usual 255-byte file system limit
_CHARSET_SUPERSETS = {"iso8859-1": "cp1252", "ascii": "cp1252", "gb2312": "gb18030"}  # as browsers read them
_UNDECLARED = ("unknown-8bit", "x-unknown", "unknown", "default")
_WINDOWS_DEVICES = frozenset(
    ["con", "prn", "aux", "nul"] + [f"com{n}" for n in range(10)] + [f"lpt{n}" for n in range(10)]
)
_PATH_UNSAFE = re.compile(r'[<>:"|?*]')
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ufeff]")  # Unicode Cc but tab and newline; BOMs
_SURROGATES = re.compile("[\ud800-\udfff]")
_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,16}$")


def decode_bytes(data: bytes, charset: str | None) -> tuple[str, list[str]]:
    """Text from bytes in their declared charset; undeclared, unknown or lying: UTF-8, else Windows-1252.

    Returns (text, defects). Never raises.
    """
    defects = []
    label = clean_line(charset or "", 60).lower()
    if label and label not in _UNDECLARED:
        codec = _text_codec(label)
        if codec is None:
            defects.append(f"unknown charset {label!r}")
        else:
            for name in (_CHARSET_SUPERSETS.get(codec), codec):
                if name:
                    try:
                        return data.decode(name), defects
                    except UnicodeError:
                        pass
            defects.append(f"text not in its declared charset {label!r}")
    try:
        return data.decode("utf-8"), defects
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace"), defects


def _text_codec(label: str) -> str | None:
    if not re.fullmatch(r"[a-z0-9_.:-]{1,40}", label):
        return None
    try:
        name = codecs.lookup(label).name
        b"".decode(name)  # LookupError for bytes-to-bytes codecs: "zlib", "base64"…
    except LookupError:
        return None
    return name


def clean_line(text: str, cap: int, *, keep_format: bool = False) -> str:
    """One line: control characters and lone surrogates out, whitespace collapsed, capped.

    Format characters (bidi overrides, zero-width) go too unless ``keep_format``.
    """
    out = []
    for char in str(text)[: 4 * cap]:
        category = unicodedata.category(char)
        if char.isspace():
            out.append(" ")
        elif category == "Cs":
            out.append("\ufffd")
        elif category == "Cc" or (category == "Cf" and not keep_format):
            continue
        else:
            out.append(char)
    return re.sub(r" {2,}", " ", "".join(out)).strip()[:cap].strip()


def clean_text(text: str, cap: int) -> str:
    """A body: newlines normalized, controls (but tab and newline) and surrogates out, blank runs cut."""
    text = text[: 2 * cap].replace("\r\n", "\n").replace("\r", "\n")
    text = _SURROGATES.sub("\ufffd", _CONTROLS.sub("", text))
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()[:cap]


class _HTMLText(HTMLParser):
    """The visible text of an HTML body: scripts, styles and the head skipped, blocks on their own lines."""

    SKIP = frozenset({"script", "style", "head", "title", "noscript", "template"})
    BLOCK = frozenset({
        "p", "div", "br", "tr", "li", "ul", "ol", "table", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote",
        "pre", "hr", "section", "article", "header", "footer", "dt", "dd", "address",
    })

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.chunks: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag, attrs):
        if tag == "body":
            self.skipping = 0  # an unclosed <head> ends here, as in a browser
        elif tag in self.SKIP:
            self.skipping += 1
        elif tag in self.BLOCK:
            self.chunks.append("\n")
        elif tag in ("td", "th"):
            self.chunks.append(" ")

    def handle_endtag(self, tag):
        if tag in self.SKIP:
            self.skipping = max(0, self.skipping - 1)
        elif tag in self.BLOCK:
            self.chunks.append("\n")

    def handle_data(self, data):
        if not self.skipping:
            self.chunks.append(data)


def html_to_text(html: str) -> str:
    parser = _HTMLText()
    parser.feed(html)
    parser.close()
    lines = (re.sub(r"\s+", " ", line).strip() for line in "".join(parser.chunks).split("\n"))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def safe_filename(name: str, default: str = "attachment") -> str:
    """A file name fit for display and downloads: no path, controls, bidi tricks or device names.

    Keeps the extension when capping the length; never empty. Stored files are
    named by their hash anyway: this name is never a path on our disk.
    """
    name = unicodedata.normalize("NFC", str(name)).replace("\\", "/").rsplit("/", 1)[-1]
    name = clean_line(name, 10 * FILENAME_MAX_CHARS)
    name = _PATH_UNSAFE.sub("_", re.sub(r"^[A-Za-z]:(?=.)", "", name))
    name = name.strip(" .")  # leading dots hide files; trailing ones vanish on Windows
    if name.split(".", 1)[0].strip().lower() in _WINDOWS_DEVICES:
        name = "_" + name
    match = _EXTENSION.search(name)
    extension = match.group(0) if match and match.start() > 0 else ""
    stem = name[: len(name) - len(extension)][: FILENAME_MAX_CHARS - len(extension)]
    while len((stem + extension).encode("utf-8")) > FILENAME_MAX_BYTES:
        stem = stem[:-1]
    name = (stem.rstrip(" .") + extension) if stem.rstrip(" .") else ""
    return name or default
