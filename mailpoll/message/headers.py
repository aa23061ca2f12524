"""A message's header block decoded: sender, recipients, subject, date, and the name a message is deduplicated by.

Used on a whole message (``mailpoll.message.parse``) and on the header block of one too
large to fetch (``parse_headers``), so both are named and shown alike. The
parsing policy here also repairs what the stdlib trips on in any header,
MIME headers included.

The dedup key (``Request.source_ref``, unique per org) is defined here and only
here: ``dedup_ref``. The Authentication-Results headers are kept raw for
``mailpoll.message.sender_auth`` to judge; nothing here trusts them. From is read
strictly (``read_from``): the sender is its address only when it is one plain
mailbox, else the header's text, which ``sender_problem`` never takes for one.
"""

from __future__ import annotations

import binascii
import email.header
import email.parser
import email.policy
import email.utils
import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from email.errors import HeaderParseError, NonASCIILocalPartDefect
from email.message import Message
from email.policy import Compat32

from .text import clean_line, decode_bytes

SUBJECT_MAX_CHARS = 1000
SENDER_MAX_CHARS = 500
MESSAGE_ID_MAX_CHARS = 250  # longer ones are named by the hash of the normalized id (message_ref)
MESSAGE_ID_READ_CHARS = 100_000  # what is read of a Message-ID header at most, for its hash
LONG_MESSAGE_ID_PREFIX = "message-id-sha256:"
RAW_REF_PREFIX = "sha256:"  # the source_ref of a message without a usable Message-ID (raw_ref)
RECIPIENT_HEADERS = ("to", "cc", "delivered-to")  # read in this order
RECIPIENT_MAX_CHARS = 320  # a longer address is dropped, not cut: cut short it could name another mailbox
MAX_RECIPIENTS = 100
RECIPIENT_READ_CHARS = 32_000  # of each To/Cc/Delivered-To header, cut at an address boundary
MAX_HEADERS_READ = 20  # of each recipient header name, and of Authentication-Results
AUTH_RESULTS_MAX_CHARS = 2000
# What ends an Authentication-Results value cut at AUTH_RESULTS_MAX_CHARS. No header grammar accepts
# it, so a cut header can never read as a shorter valid one ("header.d=victim.example" of
# "header.d=victim.example.attacker.example").
CUT_MARK = "\u2026"
ADDRESS_MAX_NESTING = 20  # of '(' in an address header; the stdlib address parser recurses once per level
FROM_READ_CHARS = 2000  # a longer From is not parsed: no sender a rule may trust is that long
# Something in a display name that reads as an address ("ceo@victim.example" <attacker@evil.example>).
_ADDRESS_LIKE = re.compile(r"[^\s<>()\[\]\"',;:@]+@[^\s<>()\[\]\"',;:@]+")

# A parameter name as the stdlib splits them: after a ';', ending at '=', ';' or the end.
_STAR_PARAM = re.compile(r";\s*([A-Za-z0-9_]+)\*(\d*)\*?(?=\s*(?:[=;]|$))")
# A raw 8-bit header byte, as the parser hands it over (surrogateescape).
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")
_FOLDING_SPACE = re.compile(r"[ \t\r\n]+")
_UNSTORABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")  # controls, lone surrogates


@dataclass(frozen=True)
class MessageHeaders:
    """What a Request shows of a message, decoded the same way whether it is accepted or rejected."""

    message_id: str | None  # normalized, whatever its length
    source_ref: str | None  # message_ref(message_id); None without a usable Message-ID
    sender: str  # the From address (display name dropped) if one plain mailbox, else the header's text; "" if none
    subject: str
    date: datetime | None  # aware
    recipients: tuple[str, ...] = ()  # lower-cased addresses of To, Cc, Delivered-To, in that order, once each
    auth_results: tuple[str, ...] = ()  # raw Authentication-Results values, topmost first (_auth_results)


class Policy(Compat32):
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


POLICY = Policy()


def parse_headers(raw_headers: bytes) -> MessageHeaders:
    """A header block alone (what a message too large to fetch shows), decoded as parse_message decodes it."""
    return read_headers(email.parser.BytesHeaderParser(policy=POLICY).parsebytes(raw_headers))


def read_headers(root: Message) -> MessageHeaders:
    ids = root.get_all("message-id") or []
    message_id = normalize_message_id(ids[0] if ids else None)
    return MessageHeaders(
        message_id=message_id,
        source_ref=message_ref(message_id),
        sender=_sender(root.get("from")),
        subject=clean_line(decode_words(root.get("subject") or ""), SUBJECT_MAX_CHARS),
        date=_date(root.get("date")),
        recipients=_recipients(root),
        auth_results=_auth_results(root),
    )


def _recipients(root: Message) -> tuple[str, ...]:
    """The addresses of To, Cc and Delivered-To, in that order: lower-cased, decoded like the sender, once each.

    At most MAX_RECIPIENTS; an address over RECIPIENT_MAX_CHARS, or without '@', is left out.
    """
    found: dict[str, None] = {}
    for name in RECIPIENT_HEADERS:
        for value in (root.get_all(name) or [])[:MAX_HEADERS_READ]:
            for address in _addresses(str(value)):
                text = clean_line(decode_words(address), RECIPIENT_MAX_CHARS + 1).replace(" ", "").lower()
                if "@" in text and len(text) <= RECIPIENT_MAX_CHARS:
                    found.setdefault(text)
                    if len(found) == MAX_RECIPIENTS:
                        return tuple(found)
    return tuple(found)


def _auth_results(root: Message) -> tuple[str, ...]:
    """Every Authentication-Results value, topmost first: unfolded, spaces collapsed, storable, capped.

    At most MAX_HEADERS_READ of them (the lower ones are dropped: only the top can be the
    receiving server's own). A value over AUTH_RESULTS_MAX_CHARS is cut and ends with CUT_MARK;
    a control character or lone surrogate becomes U+FFFD rather than vanishing, so no two
    tokens are ever joined into one.
    """
    values = (root.get_all("authentication-results") or [])[:MAX_HEADERS_READ]
    return tuple(_header_line(str(value), AUTH_RESULTS_MAX_CHARS) for value in values)


def _header_line(value: str, cap: int) -> str:
    text = _FOLDING_SPACE.sub(" ", value[: 4 * cap]).strip()
    text = _UNSTORABLE.sub("\ufffd", text)
    if len(value) > 4 * cap or len(text) > cap:
        text = text[: cap - 1] + CUT_MARK
    return text


def plus_tag(address: str) -> str:
    """The sub-address of an address, lower-cased; "" without one.

    >>> plus_tag("reports+Acme@agency.example"), plus_tag("reports@agency.example")
    ('acme', '')
    """
    local, at, _domain = address.rpartition("@")
    _base, plus, tag = local.partition("+")
    return tag.lower() if at and plus else ""


def decode_words(value: str) -> str:
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
    if len(message_id) <= MESSAGE_ID_MAX_CHARS and not message_id.startswith((RAW_REF_PREFIX, LONG_MESSAGE_ID_PREFIX)):
        return message_id
    return LONG_MESSAGE_ID_PREFIX + hashlib.sha256(message_id.encode("utf-8", "replace")).hexdigest()


def dedup_ref(message_id: str | None, raw: bytes) -> str:
    """What a message is deduplicated by in its org: ``message_ref`` of its Message-ID, else ``raw_ref(raw)``.

    ``raw`` is the message's bytes, or for one too large to fetch, its header block and size.
    """
    return message_ref(message_id) or raw_ref(raw)


def raw_ref(raw: bytes) -> str:
    """The source_ref of a message without Message-ID."""
    return RAW_REF_PREFIX + hashlib.sha256(raw).hexdigest()


def _addresses(value: str) -> list[str]:
    """The addr-specs of one address header, read up to RECIPIENT_READ_CHARS; [] if nested too deep to parse.

    A longer value is cut at its last comma, so no address is read cut short.
    """
    if len(value) > RECIPIENT_READ_CHARS:
        value = value[:RECIPIENT_READ_CHARS].rpartition(",")[0]
    if _too_nested(value):
        return []
    return [address for _name, address in email.utils.getaddresses([value]) if address]


def _too_nested(value: str) -> bool:
    """More '(' open at once than ADDRESS_MAX_NESTING, quotes ignored: the stdlib would hit RecursionError."""
    if value.count("(") <= ADDRESS_MAX_NESTING:
        return False
    depth = 0
    for char in value:
        if char == "(":
            depth += 1
            if depth > ADDRESS_MAX_NESTING:
                return True
        elif char == ")" and depth:
            depth -= 1
    return False


@dataclass(frozen=True)
class FromHeader:
    address: str  # the addr-spec of its (first) mailbox; "" if none reads
    problem: str  # why it is not one plain mailbox, in plain words; "" when it is


def read_from(value: str | None) -> FromHeader:
    """A From header read as a strict RFC 5322 address list (``email.headerregistry``). Pure, never raises.

    Anything but one mailbox that parses without defects has a problem: several mailboxes, group syntax, a
    display name that reads as another address, a defect the parser noted (``a@b <c@d>``, which lenient
    parsers read as ``a@b``). What a MX's DMARC check read as From cannot be told for those.
    """
    text = str(value or "").strip()
    if not text:
        return FromHeader("", "no From address")
    if len(text) > FROM_READ_CHARS or _too_nested(text):
        return FromHeader("", "the From header is too long or nested to read")
    try:
        header = email.policy.default.header_factory("from", text)
        groups, defects = header.groups, header.defects
    except (HeaderParseError, IndexError, ValueError, TypeError, AttributeError, RecursionError):
        return FromHeader("", "the From header does not parse")
    mailboxes = [mailbox for group in groups for mailbox in group.addresses]
    first = mailboxes[0].addr_spec if mailboxes else ""
    if any(group.display_name is not None for group in groups):
        return FromHeader(first, "group syntax in From")
    if len(mailboxes) != 1:
        return FromHeader(first, f"{len(mailboxes)} addresses in From" if mailboxes else "no address in From")
    # An internationalized local part (RFC 6532) is an address all the same; the domain is sender_auth's to judge.
    defects = [defect for defect in defects if not isinstance(defect, NonASCIILocalPartDefect)]
    if defects:
        return FromHeader(first, f"From does not read as one address ({defects[0]})")
    mailbox = mailboxes[0]
    if not mailbox.username or not mailbox.domain:
        return FromHeader(first, "the From address has no domain")
    if len(first) > SENDER_MAX_CHARS:
        return FromHeader("", "the From address is too long")
    if any(found.lower() != first.lower() for found in _ADDRESS_LIKE.findall(mailbox.display_name)):
        return FromHeader(first, "the From display name reads as another address")
    return FromHeader(first, "")


def sender_problem(sender: str) -> str:
    """Why a stored sender (``MessageHeaders.sender``) is not one plain address, or "".

    >>> sender_problem("anne@client.example"), sender_problem("ceo@victim.example <x@evil.example>")[:22]
    ('', 'From does not read as ')
    """
    read = read_from(sender)
    if read.problem:
        return read.problem
    return "" if read.address == sender else "the From header is more than its address"


def _sender(value: str | None) -> str:
    """The From address of one plain mailbox; else the header's text, which ``sender_problem`` flags."""
    if not value:
        return ""
    read = read_from(value)
    if not read.problem:
        return clean_line(read.address, SENDER_MAX_CHARS)
    shown = clean_line(decode_words(str(value)), SENDER_MAX_CHARS)
    # Cleaning and decoding may leave what reads as one address ("=?utf-8?q?a@b.example?="): said so in front.
    return shown if sender_problem(shown) else clean_line(f"(not one plain address) {shown}", SENDER_MAX_CHARS)


def _date(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(clean_line(str(value), 200))
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    # "-0000" (zone unknown) parses naive; RFC 5322 says the time is in UTC then.
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
