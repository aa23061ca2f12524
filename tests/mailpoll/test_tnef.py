"""TNEF (winmail.dat) unpacking, alone and inside a message: pure, no database."""

from __future__ import annotations

import struct

from mailpoll.message import tnef
from mailpoll.message.parse import parse_message
from tests.mailpoll import corpus
from tests.mailpoll.corpus import attachment, headers, mixed, text
from tests.support.guards import finishes_within

TNEF_FILES = [("Rapport de référencement.pdf", "application/pdf", corpus.tiny_pdf()),
              ("Clics.xlsx", "application/vnd.ms-excel", corpus.tiny_xlsx())]


def test_generated_tnef_is_read_by_tnefparse_too():
    """tnefparse, the reference decoder, agrees on names and bytes (it strips trailing NULs)."""
    from tnefparse.tnef import TNEF

    reference = TNEF(corpus.tnef_stream(TNEF_FILES))
    assert [each.long_filename() for each in reference.attachments] == [name for name, _, _ in TNEF_FILES]
    assert [each.data for each in reference.attachments] == [data.rstrip(b"\x00") for _, _, data in TNEF_FILES]


def test_tnef_unpack():
    files, defects = tnef.unpack(corpus.tnef_stream(TNEF_FILES))
    assert [(each.name, each.mime, each.content) for each in files] == TNEF_FILES
    assert defects == []


def test_tnef_cut_short_keeps_the_complete_files():
    stream = corpus.tnef_stream(TNEF_FILES)
    files, defects = tnef.unpack(stream[: stream.index(corpus.tiny_xlsx()) + 100])  # inside the second file
    assert [(each.name, each.content) for each in files] == [
        ("Rapport de référencement.pdf", corpus.tiny_pdf()), ("CLICS~1.XLS", b"")]
    assert defects == ["tnef: stream cut short"]


def test_tnef_hostile_counts_cost_nothing():
    """A MAPI block claiming 2**32 - 1 properties (tnefparse loops over them all)."""
    block = b"\xff\xff\xff\xff" + b"\x02\x00\x00\x37" + b"\xff\xff\xff\xff"
    attribute = struct.pack("<BHHI", 2, 0x9005, 6, len(block)) + block + b"\x00\x00"
    rend = struct.pack("<BHHI", 2, 0x9002, 6, 0) + b"\x00\x00"
    with finishes_within(60, "a MAPI block claiming 2**32 - 1 properties"):
        files, _ = tnef.unpack(tnef.TNEF_SIGNATURE + b"\x00\x00" + rend + attribute)
    assert [each.name for each in files] == [""]


def test_tnef_attribute_flood_is_capped():
    flood = (struct.pack("<BHHI", 1, 0x8008, 7, 0) + b"\x00\x00") * (tnef.MAX_ATTRIBUTES + 5)
    _, defects = tnef.unpack(tnef.TNEF_SIGNATURE + b"\x00\x00" + flood)
    assert defects == [f"tnef: over {tnef.MAX_ATTRIBUTES} attributes, the rest ignored"]


def test_tnef_that_is_not_tnef_stays_an_attachment():
    raw = mixed(headers(), [text(), attachment("winmail.dat", b"not tnef at all", "application/ms-tnef")])
    (attached,) = parse_message(raw).parts
    assert (attached.filename, attached.mime) == ("winmail.dat", "application/ms-tnef")
