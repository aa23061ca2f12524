"""Files out of a TNEF stream (Outlook's ``winmail.dat``), without trusting it.

TNEF is a flat list of attributes — ``level (u8), id (u16), type (u16),
length (u32), data, checksum (u16)``, little-endian (MS-OXTNEF). An attachment
starts with ``attAttachRendData``; its bytes are in ``attAttachData``, its 8.3
name in ``attAttachTitle``, its long name and MIME type among the MAPI
properties of ``attAttachment``.

Both levels are read here, in bounded passes. tnefparse (which the tests use as
the reference decoder) is not safe on hostile streams: it copies the rest of
the stream for every attribute, loops over a 32-bit property count taken from
the data (four billion iterations for 4 bytes of input), and strips trailing
NULs from binaries, corrupting files that end in zeros.
"""

from __future__ import annotations

import codecs
import mimetypes
import struct
from dataclasses import dataclass

TNEF_SIGNATURE = b"\x78\x9f\x3e\x22"
TNEF_MIMES = ("application/ms-tnef", "application/vnd.ms-tnef")
MAX_ATTRIBUTES = 10_000
MAX_FILES = 100

_LEVEL_ATTACHMENT = 0x02
_ATT_ATTACH_DATA = 0x800F
_ATT_ATTACH_TITLE = 0x8010
_ATT_ATTACH_REND_DATA = 0x9002
_ATT_ATTACHMENT = 0x9005
_ATT_OEM_CODEPAGE = 0x9007
_HEADER = struct.Struct("<BHHI")  # level, id, type, length
_CHECKSUM_SIZE = 2

# MAPI properties we read, and the size of each fixed-size MAPI type (values are padded to 4 bytes).
_PR_ATTACH_DATA = 0x3701
_PR_ATTACH_LONG_FILENAME = 0x3707
_PR_ATTACH_MIME_TAG = 0x370E
_FIXED_SIZES = {0x0001: 0, 0x0002: 4, 0x0003: 4, 0x0004: 4, 0x0005: 8, 0x0006: 8, 0x0007: 8, 0x000A: 4,
                0x000B: 4, 0x0014: 8, 0x0040: 8, 0x0048: 16}
_PT_STRING8, _PT_UNICODE, _PT_OBJECT, _PT_BINARY = 0x001E, 0x001F, 0x000D, 0x0102
_MULTI_VALUE = 0x1000
_NAMED = 0x8000  # property ids from here on come with a GUID and a name or number
_CODEPAGES = {20127: "ascii", 20866: "koi8-r", 28591: "latin-1", 65001: "utf-8"}


class TnefError(ValueError):
    """Not a TNEF stream."""


@dataclass(frozen=True)
class TnefFile:
    name: str  # the long name, else the 8.3 title, as found: not yet made safe
    mime: str  # the MAPI MIME tag, else guessed from the name
    content: bytes


def is_tnef(data: bytes) -> bool:
    return data[:4] == TNEF_SIGNATURE


def unpack(data: bytes, *, max_files: int = MAX_FILES) -> tuple[list[TnefFile], list[str]]:
    """The attached files of a TNEF stream, and defects (short strings). Raises TnefError if it is not one.

    A stream cut short yields what came before the cut, with a defect; so does
    one with more than ``max_files`` attachments or MAX_ATTRIBUTES attributes.
    """
    if not is_tnef(data):
        raise TnefError("no TNEF signature")
    defects: list[str] = []
    codepage = "cp1252"
    pending: list[dict] = []  # one per attAttachRendData, in stream order
    offset, count = 6, 0
    while offset + _HEADER.size + _CHECKSUM_SIZE <= len(data):
        count += 1
        if count > MAX_ATTRIBUTES:
            defects.append(f"tnef: over {MAX_ATTRIBUTES} attributes, the rest ignored")
            break
        level, attr_id, _type, length = _HEADER.unpack_from(data, offset)
        start = offset + _HEADER.size
        value = data[start:start + length]
        if len(value) < length:
            defects.append("tnef: stream cut short")
            break
        offset = start + length + _CHECKSUM_SIZE
        if attr_id == _ATT_OEM_CODEPAGE and len(value) >= 4:
            codepage = _codec(struct.unpack_from("<I", value)[0])
        elif attr_id == _ATT_ATTACH_REND_DATA:
            if len(pending) == max_files:
                defects.append(f"tnef: over {max_files} attachments, the rest ignored")
                break
            pending.append({})
        elif level == _LEVEL_ATTACHMENT and pending:
            if attr_id == _ATT_ATTACH_TITLE:
                pending[-1]["title"] = _decode(value.split(b"\x00", 1)[0], codepage)
            elif attr_id == _ATT_ATTACH_DATA:
                pending[-1]["content"] = value
            elif attr_id == _ATT_ATTACHMENT:
                pending[-1].update(_mapi(value, codepage, defects))
    files = []
    for found in pending:
        name = found.get("long_name") or found.get("title") or ""
        # Outlook writes the bytes twice (attAttachData, PR_ATTACH_DATA_BIN); some writers only the latter.
        content = found.get("content") or found.get("mapi_content") or b""
        mime = found.get("mime") or mimetypes.guess_type(name)[0] or "application/octet-stream"
        files.append(TnefFile(name=name, mime=mime.strip().lower(), content=content))
    return files, defects


def _mapi(block: bytes, codepage: str, defects: list[str]) -> dict:
    """Long name, MIME tag and (fallback) content from one attAttachment MAPI block.

    Every property advances the offset by at least 4 bytes and every loop stops
    at the end of the block, so the counts read from the data bound nothing.
    """
    found: dict = {}
    if len(block) < 4:
        return found
    (count,), offset = struct.unpack_from("<I", block), 4
    for _ in range(min(count, len(block) // 4)):
        if offset + 4 > len(block):
            break
        prop_type, prop_id = struct.unpack_from("<HH", block, offset)
        offset += 4
        if prop_id >= _NAMED:
            offset += 16 + 4  # GUID, kind
            if offset > len(block):
                break
            kind = struct.unpack_from("<I", block, offset - 4)[0]
            if kind == 0:
                offset += 4
            elif offset + 4 <= len(block):
                offset += 4 + _padded(struct.unpack_from("<I", block, offset)[0])
        multi = bool(prop_type & _MULTI_VALUE)
        prop_type &= ~_MULTI_VALUE
        values, offset = _mapi_values(block, offset, prop_type, multi)
        if values is None:
            defects.append(f"tnef: unknown MAPI type {prop_type:#06x}, the rest of the properties ignored")
            break
        if not values:
            continue
        if prop_id in (_PR_ATTACH_LONG_FILENAME, _PR_ATTACH_MIME_TAG) and prop_type in (_PT_STRING8, _PT_UNICODE):
            encoding = "utf-16-le" if prop_type == _PT_UNICODE else codepage
            text = _decode(values[0], encoding).split("\x00", 1)[0].strip()
            found["long_name" if prop_id == _PR_ATTACH_LONG_FILENAME else "mime"] = text
        elif prop_id == _PR_ATTACH_DATA and prop_type == _PT_BINARY:
            found["mapi_content"] = values[0]
        elif prop_id == _PR_ATTACH_DATA and prop_type == _PT_OBJECT:
            defects.append("tnef: embedded Outlook message not unpacked")
    return {key: value for key, value in found.items() if value}


def _mapi_values(block: bytes, offset: int, prop_type: int, multi: bool) -> tuple[list[bytes] | None, int]:
    """(values, next offset); values None for a type whose size we cannot know."""
    count = 1
    variable = prop_type in (_PT_STRING8, _PT_UNICODE, _PT_OBJECT, _PT_BINARY)
    if multi or variable:  # a count of values precedes them (1 for a single variable-size value)
        if offset + 4 > len(block):
            return [], len(block)
        count, offset = struct.unpack_from("<I", block, offset)[0], offset + 4
    if not variable:
        size = _FIXED_SIZES.get(prop_type)
        if size is None:
            return None, offset
        return [], min(len(block), offset + size * min(count, len(block)))
    values = []
    for _ in range(min(count, len(block) // 4)):
        if offset + 4 > len(block):
            break
        length = struct.unpack_from("<I", block, offset)[0]
        values.append(block[offset + 4:offset + 4 + length])
        offset += 4 + _padded(length)
    return values, min(offset, len(block))


def _padded(length: int) -> int:
    return length + (-length % 4)


def _codec(number: int) -> str:
    name = _CODEPAGES.get(number, f"cp{number}")
    try:
        codecs.lookup(name)
    except LookupError:
        return "cp1252"
    return name


def _decode(raw: bytes, codepage: str) -> str:
    try:
        return raw.decode(codepage)
    except UnicodeError:
        return raw.decode("cp1252", errors="replace")
