"""Raw RFC 5322 bytes → a ParsedMessage: pure, best effort, never trusting the sender.

Bad input is the normal case here: lying or unknown charsets, broken base64,
truncated MIME, 8-bit bytes in headers. All of it is parsed as far as it goes
and noted in ``defects``; only a message with nothing usable (no header block,
or a MIME structure nested to blow the parser's stack) raises UnparseableMessage.

Everything returned is safe to store in PostgreSQL text columns (no NUL, no
lone surrogates) and capped in length. Attachments are searched for through
forwarded messages (``message/rfc822``, depth-capped), ``multipart/signed`` and
TNEF ``winmail.dat``. Nothing found is dropped unsaid: a file past a cap, or an
empty ``winmail.dat``, is a Part with a ``skip_reason``.
"""

from __future__ import annotations

import base64
import binascii
import email
import email.header
import email.parser
import email.utils
import hashlib
import quopri
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from email.errors import HeaderParseError, InvalidBase64LengthDefect
from email.message import Message
from email.policy import Compat32

from . import tnef
from .text import clean_line, clean_text, decode_bytes, html_to_text, safe_filename

__all__ = ["MessageHeaders", "ParsedMessage", "Part", "UnparseableMessage", "message_ref", "normalize_message_id",
           "parse_headers", "parse_message", "safe_filename"]

MAX_DEPTH = 5  # forwarded-inside-forwarded levels searched for attachments
MAX_PARTS = 500
MAX_PART_BYTES = 25 * 1024 * 1024
MAX_MULTIPART_NESTING = 32  # multipart inside multipart, within one message
MAX_DEFECTS = 50
SUBJECT_MAX_CHARS = 1000
SENDER_MAX_CHARS = 500
MESSAGE_ID_MAX_CHARS = 250  # longer ones are named by the hash of the normalized id (message_ref)
MESSAGE_ID_READ_CHARS = 100_000  # what is read of a Message-ID header at most, for its hash
LONG_MESSAGE_ID_PREFIX = "message-id-sha256:"
ORIGINAL_FILENAME_MAX_CHARS = 500
BODY_MAX_CHARS = 1_000_000
HTML_MAX_CHARS = 2_000_000  # html.parser needs ~1 s per MB of hostile markup; the cut is a defect
# Skip reasons the parser already knows (triage records the part as skipped with it).
EMPTY_TNEF = "empty TNEF: the winmail.dat holds no files"

# At least one of these makes a header block a mail's: "Foo: bar" alone is not one.
_MAIL_HEADERS = frozenset({
    "from", "to", "cc", "subject", "date", "message-id", "received", "return-path", "mime-version",
    "content-type", "sender", "reply-to", "delivered-to",
})
_MIME_RE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}")
# A parameter name as the stdlib splits them: after a ';', ending at '=', ';' or the end.
_STAR_PARAM = re.compile(r";\s*([A-Za-z0-9_]+)\*(\d*)\*?(?=\s*(?:[=;]|$))")
# A raw 8-bit header byte, as the parser hands it over (surrogateescape).
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")
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
    skip_reason: str = ""  # set when the parser already knows this part is not processed (too deep, empty TNEF)


@dataclass(frozen=True)
class MessageHeaders:
    """What a Request shows of a message, decoded the same way whether it is accepted or rejected."""

    message_id: str | None  # normalized, whatever its length
    source_ref: str | None  # message_ref(message_id); None without a usable Message-ID
    sender: str  # the From address (display name dropped); "" if none
    subject: str
    date: datetime | None  # aware


@dataclass(frozen=True)
class ParsedMessage:
    message_id: str | None
    source_ref: str  # message_ref(message_id), else "sha256:<hex of raw>"
    sender: str  # the From address (display name dropped); "" if none
    subject: str
    date: datetime | None  # aware
    body_text: str
    parts: tuple[Part, ...]
    defects: tuple[str, ...]


class _Policy(Compat32):
    """compat32 parsing, with two repairs on every header read (the parser reads through here too).

    - Raw 8-bit bytes are decoded: compat32 wraps them in an 'unknown-8bit' Header
      whose str() is U+FFFD; senders put UTF-8 or Windows-1252 there, so we guess.
    - A parameter sent both as ``name*=`` and ``name*0=`` (RFC 2231) crashes the
      stdlib (TypeError sorting None with 0), parser included: the unnumbered one is renamed.
    """

    def header_fetch_parse(self, name, value):
        if _ESCAPED_BYTE.search(value):
            value = decode_bytes(value.encode("ascii", "surrogateescape"), None)[0]
        if name.lower().startswith("content-") and "*" in value:
            value = _defuse_rfc2231(value)
        return value


def _defuse_rfc2231(value: str) -> str:
    kinds: dict[str, set[bool]] = {}
    for match in _STAR_PARAM.finditer(value):
        kinds.setdefault(match.group(1).lower(), set()).add(bool(match.group(2)))
    clashing = {name for name, numbered in kinds.items() if len(numbered) == 2}
    if not clashing:
        return value

    def rename(match: re.Match) -> str:
        if match.group(1).lower() in clashing and not match.group(2):
            return match.group(0).replace("*", "-unnumbered*", 1)
        return match.group(0)

    return _STAR_PARAM.sub(rename, value)


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
    body_text = walker.body_text()
    if len(root.get_all("message-id") or []) > 1:
        walker.defect("several Message-ID headers: the first one used")
    head = _headers(root)
    if head.message_id and head.source_ref != head.message_id:
        walker.defect(f"Message-ID over {MESSAGE_ID_MAX_CHARS} characters: named by its hash")
    return ParsedMessage(
        message_id=head.message_id,
        source_ref=head.source_ref or "sha256:" + hashlib.sha256(raw).hexdigest(),
        sender=head.sender,
        subject=head.subject,
        date=head.date,
        body_text=body_text,
        parts=tuple(walker.parts),
        defects=tuple(dict.fromkeys(walker.defects))[:MAX_DEFECTS],
    )


def parse_headers(raw_headers: bytes) -> MessageHeaders:
    """A header block alone (what a message too large to fetch shows), decoded as parse_message decodes it."""
    return _headers(email.parser.BytesHeaderParser(policy=_POLICY).parsebytes(raw_headers))


def _headers(root: Message) -> MessageHeaders:
    ids = root.get_all("message-id") or []
    message_id = normalize_message_id(ids[0] if ids else None)
    return MessageHeaders(
        message_id=message_id,
        source_ref=message_ref(message_id),
        sender=_sender(root.get("from")),
        subject=clean_line(_decode_words(root.get("subject") or ""), SUBJECT_MAX_CHARS),
        date=_date(root.get("date")),
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
        self.html: list[tuple[int, str]] = []  # (depth, markup)
        self.leaves = 0

    def defect(self, text: str) -> None:
        self.defects.append(text)

    def walk(self, root: Message) -> None:
        # (node, message depth, multipart nesting, too_deep): below a cap the walk goes on only to
        # record each file found there as skipped with too_deep as its reason, so none vanishes.
        stack = [(root, 0, 0, "")]
        while stack:
            node, depth, nesting, too_deep = stack.pop()
            children = self.visit(node, depth, nesting, too_deep)
            stack.extend(reversed(children))
        if self.leaves > self.max_parts:
            # One row stands for the parts not read, so they are counted, not silently gone.
            unread = self.leaves - self.max_parts
            self.add_part(f"{unread} more parts", "application/octet-stream", b"", None, None, 0, size=0,
                          skip_reason=f"over {self.max_parts} parts in the message: {unread} more not read")

    def visit(self, node: Message, depth: int, nesting: int, too_deep: str) -> list:
        ctype = node.get_content_type()
        if node.is_multipart():
            self.note_defects(node, ctype)
            payload = [child for child in node.get_payload() if isinstance(child, Message)]
            if ctype == "message/rfc822":
                inner = _encoded_rfc822(node)
                return self.forwarded([inner] if inner is not None else payload[:1], depth, too_deep)
            if node.get_content_maintype() == "message":
                return []  # delivery-status, disposition-notification: reports, not attachments
            if nesting >= MAX_MULTIPART_NESTING and not too_deep:
                self.defect(f"multipart nested over {MAX_MULTIPART_NESTING} levels: its files recorded, not searched")
                too_deep = f"nested too deep (over {MAX_MULTIPART_NESTING} MIME levels): not searched"
            if ctype == "multipart/signed":
                payload = payload[:1]  # the second part is the signature itself, not an attachment
            return [(child, depth, nesting + 1, too_deep) for child in payload]
        if node.get_content_maintype() == "multipart":
            recovered = _recover_boundary(node)
            self.note_defects(node, ctype)
            if recovered is not None:
                self.defect("multipart without a usable boundary: boundary guessed")
                return [(recovered, depth, nesting + 1, too_deep)]
        self.leaf(node, ctype, depth, too_deep)
        return []

    def forwarded(self, messages: list[Message], depth: int, too_deep: str) -> list:
        if depth + 1 > self.max_depth and not too_deep:
            self.defect(f"forwarded message nested over {self.max_depth} levels: its files recorded, not searched")
            too_deep = f"nested too deep (forwarded over {self.max_depth} times): not searched"
        return [(message, depth + 1, 0, too_deep) for message in messages]

    def leaf(self, node: Message, ctype: str, depth: int, too_deep: str = "") -> None:
        self.leaves += 1
        if self.leaves > self.max_parts:
            self.defect(f"over {self.max_parts} parts: the rest ignored")
            return
        content = _payload(node)
        original = _filename(node, self.defects)
        disposition = _disposition(node)
        self.note_defects(node, original or ctype)
        if node.get_content_maintype() == "text" and disposition != "attachment" and not original:
            if node.get_content_subtype() in ("plain", "html"):
                return self.body(node, content, depth)
        if too_deep:
            return self.add_part(original, ctype, b"", disposition, _content_id(node), depth, size=len(content),
                                 skip_reason=too_deep)
        if tnef.is_tnef(content) and (ctype in tnef.TNEF_MIMES or original.lower().endswith(".dat")):
            return self.tnef(content, original, depth)
        self.add_part(original, ctype, content, disposition, _content_id(node), depth)

    def body(self, node: Message, content: bytes, depth: int) -> None:
        text, defects = decode_bytes(content, node.get_content_charset())
        for defect in defects:
            self.defect(f"{defect} in the body")
        (self.plain if node.get_content_subtype() == "plain" else self.html).append((depth, text))

    def tnef(self, content: bytes, original: str, depth: int) -> None:
        if depth + 1 > self.max_depth:
            self.defect(f"TNEF nested over {self.max_depth} levels: not unpacked")
            return self.add_part(original, "application/ms-tnef", b"", "attachment", None, depth, size=len(content),
                                 skip_reason=f"nested too deep (TNEF forwarded over {self.max_depth} times): "
                                             "not unpacked")
        files, defects = tnef.unpack(content)
        for defect in defects:
            self.defect(defect)
        if not files:
            self.defect("TNEF attachment without files")
            return self.add_part(original or "winmail.dat", "application/ms-tnef", b"", "attachment", None, depth,
                                 size=len(content), skip_reason=EMPTY_TNEF)
        for found in files:
            self.add_part(found.name, found.mime, found.content, "attachment", None, depth + 1)

    def add_part(self, original: str, mime: str, content: bytes, disposition: str | None,
                 content_id: str | None, depth: int, *, size: int | None = None, skip_reason: str = "") -> None:
        mime = mime if _MIME_RE.fullmatch(mime) else "application/octet-stream"
        size = len(content) if size is None else size
        if len(content) > self.max_part_bytes:
            self.defect(f"part over {self.max_part_bytes} bytes not kept ({size} bytes)")
            content = b""
        original = clean_line(original, ORIGINAL_FILENAME_MAX_CHARS, keep_format=True)
        self.parts.append(Part(
            filename=safe_filename(original), original_filename=original, mime=mime, content=content,
            disposition=disposition, content_id=content_id, depth=depth, size=size, skip_reason=skip_reason,
        ))

    def note_defects(self, node: Message, where: str) -> None:
        for defect in node.defects:
            name = type(defect).__name__.removesuffix("Defect")
            self.defect(f"{_kebab(name)} ({clean_line(where, 80)})")

    def body_text(self) -> str:
        """text/plain of the shallowest message that has any, else the text of its HTML."""
        plain = _shallowest(self.plain)
        if plain:
            return clean_text("\n\n".join(plain), BODY_MAX_CHARS)
        texts, budget = [], HTML_MAX_CHARS  # HTML is converted only when needed, and only so much of it
        for html in _shallowest(self.html):
            if len(html) > budget:
                self.defect("HTML body cut before its text was extracted")
            texts.append(html_to_text(html[:budget]))
            budget -= len(html)
            if budget <= 0:
                break
        return clean_text("\n\n".join(texts), BODY_MAX_CHARS)


def _shallowest(texts: list[tuple[int, str]]) -> list[str]:
    found = [(depth, text) for depth, text in texts if text.strip()]
    top = min((depth for depth, _ in found), default=0)
    return [text for depth, text in found if depth == top]


def _recover_boundary(node: Message) -> Message | None:
    """A multipart whose boundary is missing or wrong: find the delimiter in the body and reparse."""
    if isinstance(node.get_payload(), list):
        return None
    body = node.get_payload(decode=True) or b""  # raw bytes; get_payload() would mangle 8-bit ones
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
    if not payload or payload[0].keys():  # the parser found a header block: it was readable as it came
        return None
    encoded = payload[0].get_payload(decode=True) or b""  # the encoded text, read as a headerless message
    raw = quopri.decodestring(encoded) if cte == "quoted-printable" else _lenient_b64(encoded)
    inner = _parse_bytes(raw) if raw.strip() else None
    return inner if inner is not None and inner.keys() else None


def _payload(node: Message) -> bytes:
    """The decoded payload. Base64 cut mid-quantum makes the stdlib hand back the undecoded text;
    it is decoded leniently instead, as far as it goes (the length defect stays recorded)."""
    content = node.get_payload(decode=True) or b""
    if (node.get("content-transfer-encoding") or "").strip().lower() == "base64" and any(
            isinstance(defect, InvalidBase64LengthDefect) for defect in node.defects):
        encoded = node.get_payload()
        if isinstance(encoded, str):
            content = _lenient_b64(encoded.encode("ascii", "ignore"))
    return content


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
        name = value
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


def normalize_message_id(value: str | None) -> str | None:
    """The Message-ID trimmed, angle brackets and inner whitespace gone, whatever its length; None if empty.

    ``" <Abc@x>  (comment)"`` → ``"Abc@x"``. Two copies of one message (one more
    ``Received:`` line, another folder) always give the same value.
    """
    value = clean_line(str(value or ""), MESSAGE_ID_READ_CHARS)
    match = re.search(r"<([^<>]*)>", value)
    value = re.sub(r"\s+", "", match.group(1) if match else value).strip("<>")
    return value or None


def message_ref(message_id: str | None) -> str | None:
    """The source_ref of a normalized Message-ID: itself, or over MESSAGE_ID_MAX_CHARS the hash of it.

    Hashing the id, never the raw bytes, keeps a resend of a long-id message a duplicate.
    """
    if not message_id:
        return None
    # An id that looks like one of our hash refs is hashed too, so it can never take another message's name.
    if len(message_id) <= MESSAGE_ID_MAX_CHARS and not message_id.startswith(("sha256:", LONG_MESSAGE_ID_PREFIX)):
        return message_id
    return LONG_MESSAGE_ID_PREFIX + hashlib.sha256(message_id.encode("utf-8", "replace")).hexdigest()


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
