"""One MIME leaf read as an attachment: its decoded payload, the sender's file name, disposition, Content-ID.

Each of these is lenient: base64 cut short is decoded as far as it goes, a file
name is decoded from RFC 2231 or RFC 2047 whichever the sender used.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from email.errors import InvalidBase64LengthDefect
from email.message import Message

from .headers import decode_words
from .text import clean_line, decode_bytes


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


def payload(node: Message) -> bytes:
    """The decoded payload. Base64 cut mid-quantum makes the stdlib hand back the undecoded text;
    it is decoded leniently instead, as far as it goes (the length defect stays recorded)."""
    content = node.get_payload(decode=True) or b""
    if (node.get("content-transfer-encoding") or "").strip().lower() == "base64" and any(
            isinstance(defect, InvalidBase64LengthDefect) for defect in node.defects):
        encoded = node.get_payload()
        if isinstance(encoded, str):
            content = lenient_b64(encoded.encode("ascii", "ignore"))
    return content


def lenient_b64(encoded: bytes) -> bytes:
    data = re.sub(rb"[^A-Za-z0-9+/]", b"", encoded)
    data = data[: len(data) - len(data) % 4] if len(data) % 4 == 1 else data + b"=" * (-len(data) % 4)
    try:
        return base64.b64decode(data)
    except binascii.Error:
        return b""


def filename(node: Message, defects: list[str]) -> str:
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
        name = decode_words(name)
    return name


def disposition(node: Message) -> str | None:
    value = node.get_content_disposition()
    return value if value in ("attachment", "inline") else None


def content_id(node: Message) -> str | None:
    value = clean_line(node.get("content-id") or "", 250).strip("<> ")
    return value or None
