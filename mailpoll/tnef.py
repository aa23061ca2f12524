"""Files out of a TNEF stream (Outlook's ``winmail.dat``), without trusting it.

TNEF is a flat list of attributes — ``level (u8), id (u16), type (u16),
length (u32), data, checksum (u16)``, little-endian. An attachment starts with
``attAttachRendData``; its bytes are in ``attAttachData``, its 8.3 name in
``attAttachTitle``, its long name and MIME type among the MAPI properties of
``attAttachment``.

We walk the attribute list ourselves, in one bounded pass, and hand only the
MAPI blocks to tnefparse's ``decode_mapi``: its ``TNEF`` class copies the rest
of the stream for every attribute (quadratic on a hostile stream of tiny
attributes) and strips trailing NULs from MAPI binaries, which corrupts files
that end in zeros.
"""

from __future__ import annotations

import codecs
import mimetypes
import struct
from dataclasses import dataclass

from tnefparse import properties
from tnefparse.codepage import Codepage
from tnefparse.mapi import IMESSAGE_SIG, decode_mapi

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
        # attAttachData is exact; the MAPI copy is padded to 4 bytes, so only a fallback.
        content = found.get("content") or found.get("mapi_content") or b""
        mime = found.get("mime") or mimetypes.guess_type(name)[0] or "application/octet-stream"
        files.append(TnefFile(name=name, mime=mime.strip().lower(), content=content))
    return files, defects


def _mapi(value: bytes, codepage: str, defects: list[str]) -> dict:
    """Long name, MIME tag and (fallback) content from one attAttachment MAPI block."""
    if len(value) < 4:
        return {}
    try:
        attributes = decode_mapi(value, codepage)
    except (struct.error, ValueError, LookupError) as exc:
        # decode_mapi guards its loop itself; only the count read or a codec can escape it.
        defects.append(f"tnef: MAPI properties unreadable ({type(exc).__name__})")
        return {}
    found = {}
    for attribute in attributes:
        if attribute.name == properties.MAPI_ATTACH_LONG_FILENAME:
            found["long_name"] = _text(attribute.data)
        elif attribute.name == properties.MAPI_ATTACH_MIME_TAG:
            found["mime"] = _text(attribute.data)
        elif attribute.name == properties.MAPI_ATTACH_DATA_OBJ:
            raw = b"".join(chunk for chunk in attribute.raw_data if isinstance(chunk, bytes))
            if raw.startswith(IMESSAGE_SIG):
                defects.append("tnef: embedded Outlook message not unpacked")
            found["mapi_content"] = raw
    return {key: value for key, value in found.items() if value}


def _text(value) -> str:
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    return value.strip("\x00 ") if isinstance(value, str) else ""


def _codec(number: int) -> str:
    name = Codepage(number).codepage()
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
