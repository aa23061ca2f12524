"""Walking a parsed message's MIME tree: body texts, attachment parts and defects, within caps.

Iterative and depth-capped, so no structure can exhaust the stack or the time:
forwarded messages, ``multipart/signed`` and TNEF are searched for files; what
lies past a cap is still recorded, as a Part with its skip reason. Broken
structures (a lost boundary, a forward sent base64-encoded) are repaired where
the bytes allow it.
"""

from __future__ import annotations

import email
import quopri
import re
from email.message import Message

from . import leaves, tnef
from .headers import POLICY
from .leaves import Part
from .text import clean_line, clean_text, decode_bytes, html_to_text, safe_filename

MAX_DEPTH = 5  # forwarded-inside-forwarded levels searched for attachments
MAX_PARTS = 500
MAX_PART_BYTES = 25 * 1024 * 1024
MAX_MULTIPART_NESTING = 32  # multipart inside multipart, within one message
ORIGINAL_FILENAME_MAX_CHARS = 500
BODY_MAX_CHARS = 1_000_000
HTML_MAX_CHARS = 2_000_000  # html.parser needs ~1 s per MB of hostile markup; the cut is a defect
# Skip reasons the parser already knows (triage records the part as skipped with it).
EMPTY_TNEF = "empty TNEF: the winmail.dat holds no files"

_MIME_RE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}")
_BOUNDARY_LINE = re.compile(rb"^--([^\s]{1,70})\s*$", re.MULTILINE)


class UnparseableMessage(ValueError):
    """Nothing usable in these bytes; ``reason`` says why (for the rejected Request)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def parse_bytes(raw: bytes) -> Message:
    """The message as the stdlib parses it under our header policy; UnparseableMessage if it nests too deep."""
    try:
        return email.message_from_bytes(raw, policy=POLICY)
    except RecursionError:
        # The stdlib parser recurses per MIME level; only a hostile message nests hundreds deep.
        raise UnparseableMessage("MIME structure nested too deeply") from None


class Walker:
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
        content = leaves.payload(node)
        original = leaves.filename(node, self.defects)
        disposition = leaves.disposition(node)
        self.note_defects(node, original or ctype)
        if node.get_content_maintype() == "text" and disposition != "attachment" and not original:
            if node.get_content_subtype() in ("plain", "html"):
                return self.body(node, content, depth)
        if too_deep:
            return self.add_part(original, ctype, b"", disposition, leaves.content_id(node), depth, size=len(content),
                                 skip_reason=too_deep)
        if tnef.is_tnef(content) and (ctype in tnef.TNEF_MIMES or original.lower().endswith(".dat")):
            return self.tnef(content, original, depth)
        self.add_part(original, ctype, content, disposition, leaves.content_id(node), depth)

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
    recovered = parse_bytes(head + body)
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
    raw = quopri.decodestring(encoded) if cte == "quoted-printable" else leaves.lenient_b64(encoded)
    inner = parse_bytes(raw) if raw.strip() else None
    return inner if inner is not None and inner.keys() else None


def _kebab(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", name).lower()
