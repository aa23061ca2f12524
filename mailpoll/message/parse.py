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

from dataclasses import dataclass
from datetime import datetime

from .headers import (
    MESSAGE_ID_MAX_CHARS,
    MessageHeaders,
    dedup_ref,
    message_ref,
    normalize_message_id,
    parse_headers,
    read_headers,
)
from .leaves import Part
from .mime import MAX_DEPTH, MAX_PART_BYTES, MAX_PARTS, UnparseableMessage, Walker, parse_bytes
from .text import safe_filename

__all__ = ["MessageHeaders", "ParsedMessage", "Part", "UnparseableMessage", "message_ref", "normalize_message_id",
           "parse_headers", "parse_message", "safe_filename"]

MAX_DEFECTS = 50

# At least one of these makes a header block a mail's: "Foo: bar" alone is not one.
_MAIL_HEADERS = frozenset({
    "from", "to", "cc", "subject", "date", "message-id", "received", "return-path", "mime-version",
    "content-type", "sender", "reply-to", "delivered-to",
})


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
    recipients: tuple[str, ...] = ()  # To, Cc, Delivered-To addresses, lower-cased, once each
    auth_results: tuple[str, ...] = ()  # raw Authentication-Results values, topmost first (sender_auth judges them)


def parse_message(raw: bytes, *, max_depth: int = MAX_DEPTH, max_parts: int = MAX_PARTS,
                  max_part_bytes: int = MAX_PART_BYTES) -> ParsedMessage:
    """Parse one raw message. Raises UnparseableMessage only when nothing is usable."""
    if not raw.strip():
        raise UnparseableMessage("empty message")
    root = parse_bytes(raw)
    if not any(key.lower() in _MAIL_HEADERS for key in root.keys()):
        raise UnparseableMessage("no mail header block")
    walker = Walker(max_depth=max_depth, max_parts=max_parts, max_part_bytes=max_part_bytes)
    walker.walk(root)
    body_text = walker.body_text()
    if len(root.get_all("message-id") or []) > 1:
        walker.defect("several Message-ID headers: the first one used")
    head = read_headers(root)
    if head.message_id and head.source_ref != head.message_id:
        walker.defect(f"Message-ID over {MESSAGE_ID_MAX_CHARS} characters: named by its hash")
    return ParsedMessage(
        message_id=head.message_id,
        source_ref=dedup_ref(head.message_id, raw),
        sender=head.sender,
        subject=head.subject,
        date=head.date,
        body_text=body_text,
        parts=tuple(walker.parts),
        defects=tuple(dict.fromkeys(walker.defects))[:MAX_DEFECTS],
        recipients=head.recipients,
        auth_results=head.auth_results,
    )
