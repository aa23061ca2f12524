"""parse_message and safe_filename over hostile input: pure, no database."""

from __future__ import annotations

import base64
import hashlib
import random
import struct
import re
import time
import unicodedata
from datetime import datetime, timezone

import pytest

from mailpoll import tnef
from mailpoll.parse import (
    UnparseableMessage, decode_bytes, html_to_text, message_ref, normalize_message_id, parse_headers, parse_message,
    safe_filename,
)
from tests.mailpoll import corpus
from tests.mailpoll.corpus import (
    CSV, UNPARSEABLE, attachment, headers, hostile_corpus, message, mixed, part, text,
)

CORPUS = dict(hostile_corpus())


def parsed(name: str, **options):
    return parse_message(CORPUS[name], **options)


def files(message) -> list[tuple[str, int]]:
    return [(each.filename, each.depth) for each in message.parts]


# --- safe_filename ----------------------------------------------------------------------

@pytest.mark.parametrize("name, expected", [
    ("report.pdf", "report.pdf"),
    ("../../etc/passwd", "passwd"),
    ("C:\\evil\\a.pdf", "a.pdf"),
    ("C:a.pdf", "a.pdf"),
    ("/abs/dir/data.xlsx", "data.xlsx"),
    ("\x00a.pdf", "a.pdf"),
    ("a\x07b\x1b.csv", "ab.csv"),
    (".htaccess", "htaccess"),
    ("...pdf", "pdf"),
    ("..", "attachment"),
    ("", "attachment"),
    ("  \t ", "attachment"),
    ("/", "attachment"),
    ("invoice\u202efdp.exe", "invoicefdp.exe"),  # RTL override: would display as "invoiceexe.pdf"
    ("\u200bzero\u200dwidth\u2066.pdf", "zerowidth.pdf"),
    ("report \t  final\n.csv", "report final.csv"),
    ("rapport:2025?*.csv", "rapport_2025__.csv"),
    ("trailing dots... ", "trailing dots"),
    ("CON", "_CON"),
    ("nul.txt", "_nul.txt"),
    ("com1.csv", "_com1.csv"),
    ("console.csv", "console.csv"),
    ("e\u0301te\u0301.csv", "été.csv"),  # NFC
    ("résumé \udce9.csv", "résumé \ufffd.csv"),  # lone surrogate from undecodable bytes
    ("a" * 500 + ".pdf", "a" * 146 + ".pdf"),
    ("a" * 500, "a" * 150),
    ("x." + "b" * 40, "x." + "b" * 40),  # not an extension: too long to be one, capped as a stem
])
def test_safe_filename(name, expected):
    assert safe_filename(name) == expected


def test_safe_filename_caps_utf8_bytes_and_keeps_the_extension():
    name = safe_filename("é" * 200 + ".xlsx")
    assert name.endswith(".xlsx") and len(name.encode()) <= 240


def test_safe_filename_default():
    assert safe_filename("../", default="message.txt") == "message.txt"


@pytest.mark.parametrize("name", [
    "../../etc/passwd", "..\\..\\windows\\system32", "\x00", ".", "..\x00/..", "a/\u202e/..",
    "\\\\server\\share\\x",
    "x" * 5000, "." * 300, "\r\n", "%2e%2e%2fetc", "ﾠ", "\U000e0041tag.pdf",
])
def test_safe_filename_invariants(name):
    safe = safe_filename(name)
    assert safe and len(safe) <= 150 and len(safe.encode()) <= 240
    assert "/" not in safe and "\\" not in safe and not safe.startswith(".")
    assert not any(unicodedata.category(char) in ("Cc", "Cf", "Cs") for char in safe)


# --- the corpus as a whole --------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(CORPUS))
def test_every_corpus_message_parses_or_is_refused(name):
    if name in UNPARSEABLE:
        with pytest.raises(UnparseableMessage):
            parse_message(CORPUS[name])
        return
    message = parse_message(CORPUS[name])
    texts = [message.source_ref, message.sender, message.subject, message.body_text, *message.defects]
    for each in message.parts:
        texts += [each.filename, each.original_filename, each.mime, each.content_id or ""]
        assert each.filename == safe_filename(each.original_filename)
    for value in texts:  # what PostgreSQL text columns accept
        assert "\x00" not in value and not re.search("[\ud800-\udfff]", value), value
    assert message.source_ref == (message_ref(message.message_id) or message.source_ref)
    assert message.date is None or message.date.tzinfo is not None


def test_unparseable_reasons():
    reasons = {name: _reason(CORPUS[name]) for name in UNPARSEABLE}
    assert reasons == {
        "not-a-mail": "no mail header block",
        "empty-bytes": "empty message",
        "multipart-bomb": "MIME structure nested too deeply",
    }


def _reason(raw: bytes) -> str:
    with pytest.raises(UnparseableMessage) as refused:
        parse_message(raw)
    return refused.value.reason


def test_mutated_corpus_never_raises_anything_else():
    """A seeded mutation fuzz: flipped bytes, cut lines, injected MIME syntax."""
    rng = random.Random(20250106)
    sources = [raw for name, raw in CORPUS.items() if name not in ("multipart-bomb", "many-parts")]
    tokens = [b"\r\n", b"--", b"=?", b"?=", b'"', b";", b"*0*=", b"%", b"\x00", b"<", b"\r\n--b1\r\n",
              b"charset=zlib", b"filename*=x''%ff", b"Content-Transfer-Encoding: base64\r\n"]
    for _ in range(400):
        raw = bytearray(rng.choice(sources))
        for _ in range(rng.randint(1, 12)):
            if not raw:
                break
            at = rng.randrange(len(raw))
            choice = rng.random()
            if choice < 0.4:
                raw[at] = rng.randrange(256)
            elif choice < 0.7:
                raw[at:at] = rng.choice(tokens)
            else:
                del raw[at:at + rng.randint(1, 40)]
        try:
            parse_message(bytes(raw))
        except UnparseableMessage:
            pass


# --- headers ----------------------------------------------------------------------------

def test_subject_in_koi8r_rfc2047():
    assert parsed("koi8r-subject").subject == "Отчёт о кликах"


def test_unknown_charset_in_subject_and_body():
    message = parsed("unknown-charset")
    assert message.subject == "Rapport mensuel"
    assert message.body_text == "Monthly report, plain ASCII really."
    assert "unknown charset 'x-foo' in the body" in message.defects


def test_raw_8bit_headers_encoded_names_and_a_bad_date():
    message = parsed("header-8bit-and-bad-date")
    assert message.subject == "Données du mois"
    assert message.sender == "renee@client.example"
    assert message.date is None


def test_nul_bytes_and_overlong_header_lines():
    message = parsed("nul-and-long-headers")
    assert message.subject.startswith("Weekly report x") and len(message.subject) == 1000
    assert message.message_id == "nul@client.example"
    assert message.body_text == "Body with a NUL."


def test_date_is_aware():
    assert parsed("plain-csv").date == datetime(2025, 1, 6, 9, 15, tzinfo=timezone.utc)


@pytest.mark.parametrize("value, expected", [
    ("<abc@x>", "abc@x"),
    ("  <abc@x>  ", "abc@x"),
    ("abc@x", "abc@x"),
    ("<abc@x> (added by a gateway)", "abc@x"),
    ("<ab\r\n c@x>", "abc@x"),
    ("<>", None),
    ("", None),
    (None, None),
    ("<" + "a" * 300 + "@x>", "a" * 300 + "@x"),  # whatever its length: message_ref names it
])
def test_normalize_message_id(value, expected):
    assert normalize_message_id(value) == expected


LONG_ID = "a" * 300 + "@x"


@pytest.mark.parametrize("message_id, expected", [
    ("abc@x", "abc@x"),
    ("a" * 250, "a" * 250),
    (LONG_ID, "message-id-sha256:" + hashlib.sha256(LONG_ID.encode()).hexdigest()),
    ("sha256:" + "0" * 64, "message-id-sha256:" + hashlib.sha256(("sha256:" + "0" * 64).encode()).hexdigest()),
    (None, None),
])
def test_message_ref(message_id, expected):
    assert message_ref(message_id) == expected


def test_a_long_message_id_names_every_copy_of_the_message_alike():
    """A resend has one more Received: line: other raw bytes, the same normalized Message-ID."""
    first = corpus.mixed(corpus.headers(message_id=LONG_ID), [corpus.text(), corpus.attachment("a.csv", corpus.CSV)])
    resent = b"Received: from relay.example by mx.example; Mon, 06 Jan 2025 10:16:00 +0100\r\n" + first
    refs = {parse_message(first).source_ref, parse_message(resent).source_ref}
    assert refs == {message_ref(LONG_ID)}
    assert parse_message(first).message_id == LONG_ID


@pytest.mark.parametrize("raw, expected", [
    (b"From: =?utf-8?q?Ren=C3=A9e?= <renee@client.example>\r\nSubject: =?UTF-8?Q?Donn=C3=A9es_d=E2=80=99octobre?=\r\n"
     b"Message-ID: <big@client.example>\r\n\r\n",
     ("big@client.example", "renee@client.example", "Données d’octobre")),
    (b"From: Ren\xc3\xa9e <ren\xc3\xa9e@client.example>\r\nSubject: Donn\xe9es\r\n\r\n",  # raw 8-bit: UTF-8, cp1252
     (None, "renée@client.example", "Données")),
    (b"Subject: =?koi8-r?B?" + base64.b64encode("Отчёт".encode("koi8-r")) + b"?=\r\n\r\n", (None, "", "Отчёт")),
    (b"", (None, "", "")),
])
def test_parse_headers_decodes_like_parse_message(raw, expected):
    head = parse_headers(raw)
    assert (head.message_id, head.sender, head.subject) == expected
    if raw:
        message = parse_message(raw + b"body")
        assert (message.message_id, message.sender, message.subject) == expected


def test_missing_message_id_names_the_message_by_its_hash():
    message = parsed("no-message-id")
    assert message.message_id is None
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", message.source_ref)


def test_same_message_id_different_content_share_the_source_ref():
    first, second = parsed("duplicate-id-a"), parsed("duplicate-id-b")
    assert first.source_ref == second.source_ref == corpus.DUPLICATE_ID
    assert first.body_text != second.body_text


# --- bodies -----------------------------------------------------------------------------

def test_latin1_body_declared_utf8_is_read_anyway():
    message = parsed("latin1-body-declared-utf8")
    assert message.body_text == "Résumé des clics : 42 €, l’équipe"
    assert "text not in its declared charset 'utf-8' in the body" in message.defects


def test_html_only_body_is_text_without_scripts_or_styles():
    assert parsed("html-only-body").body_text == "Clicks doubled this week.\n\nTop page: /a"


def test_plain_alternative_is_preferred_to_html():
    raw = mixed(headers(), [text("Plain version."), part(["Content-Type: text/html"], b"<p>HTML version</p>")],
                subtype="alternative")
    assert parse_message(raw).body_text == "Plain version."


@pytest.mark.parametrize("html, expected", [
    ("<p>a</p><p>b</p>", "a\n\nb"),
    ("<head><title>x</title><body>kept", "kept"),  # unclosed head ends at <body>
    ("<table><tr><td>1</td><td>2</td></tr></table>", "1 2"),
    ("a&nbsp;&amp;&#233;", "a &é"),
    ("<style>p{}</style><script>if (a<b) x()</script>text", "text"),
    ("1 < 2 and <a <b", "1 < 2 and <a <b"),
])
def test_html_to_text(html, expected):
    assert html_to_text(html) == expected


def test_html_that_stalls_html_parser_is_defused():
    started = time.monotonic()
    html_to_text("<a " * 200_000)  # quadratic in html.parser: about 16 s for 10,000 of these unescaped
    assert time.monotonic() - started < 5


def test_no_body_at_all():
    message = parsed("empty-message")
    assert message.body_text == "" and message.parts == ()


# --- attachments: names, nesting, TNEF, truncation, caps ---------------------------------

@pytest.mark.parametrize("name, originals", [
    ("rfc2231-continuations", ["Rapport été € clics.csv"]),
    ("rfc2231-latin1", ["données.csv"]),
    ("rfc2047-filename", ["Données clés.pdf"]),
    ("8bit-filenames", ["résumé.csv", "Clés.csv"]),  # no charset: UTF-8, else Windows-1252
    ("path-names", ["../../etc/passwd.csv", "C:\\evil\\report.pdf", "/abs/dir/data.xlsx"]),
])
def test_file_names_are_decoded(name, originals):
    assert [each.original_filename for each in parsed(name).parts] == originals


def test_path_names_are_made_safe():
    assert [each.filename for each in parsed("path-names").parts] == ["passwd.csv", "report.pdf", "data.xlsx"]


@pytest.mark.parametrize("disposition", [
    "attachment; filename*=utf-8''a.csv; FILENAME*0*=utf-8''b; filename*1=.csv",
    "attachment; filename*0=b; filename*1=.csv; filename*",  # a name alone, no '='
    "attachment; filename*0=b; filename*1=.csv; filename* = a.csv",
])
def test_mixed_rfc2231_sections_do_not_crash_the_stdlib(disposition):
    """The stdlib sorts sections by number and raises TypeError on None (unnumbered) beside 0."""
    raw = message(headers() + ["Content-Type: multipart/mixed; boundary*=x; boundary*0=b"], (
        f"--b\r\nContent-Type: text/csv\r\nContent-Disposition: {disposition}\r\n\r\nx,y\r\n--b--\r\n".encode()))
    assert [each.original_filename for each in parse_message(raw).parts] == ["b.csv"]


def test_forwarded_three_levels_deep():
    message = parsed("forwarded-3-levels")
    assert files(message) == [("deep.csv", 3)]
    assert message.parts[0].content == CSV
    assert message.body_text == "Forwarding, level 1."


def test_forwarded_deeper_than_max_depth_is_recorded_not_searched():
    message = parsed("forwarded-too-deep")
    (lost,) = message.parts
    assert (lost.filename, lost.depth, lost.size, lost.content) == ("lost.csv", 7, len(CSV), b"")
    assert lost.skip_reason == "nested too deep (forwarded over 5 times): not searched"
    assert "forwarded message nested over 5 levels: its files recorded, not searched" in message.defects
    (found,) = parsed("forwarded-too-deep", max_depth=8).parts
    assert (found.filename, found.depth, found.content, found.skip_reason) == ("lost.csv", 7, CSV, "")


def test_a_part_nested_past_the_multipart_cap_is_recorded_with_its_reason():
    message = parsed("nested-41-levels")
    (deep,) = message.parts
    assert (deep.filename, deep.size, deep.content) == ("deep.csv", len(CSV), b"")
    assert deep.skip_reason.startswith("nested too deep (over 32 MIME levels)")
    assert message.body_text.startswith("Top.") and "level 41" in message.body_text  # text is text, at any depth
    (within,) = parse_message(corpus.nested_multipart(20, attachment("deep.csv", CSV))).parts
    assert (within.content, within.skip_reason) == (CSV, "")


def test_empty_winmail_dat_is_a_part_with_its_reason():
    empty = corpus.tnef_stream([])
    message = parse_message(mixed(headers(), [text(), attachment("winmail.dat", empty, "application/ms-tnef")]))
    (winmail,) = message.parts
    assert (winmail.filename, winmail.mime, winmail.size) == ("winmail.dat", "application/ms-tnef", len(empty))
    assert winmail.skip_reason == "empty TNEF: the winmail.dat holds no files"


def test_base64_of_a_wrong_length_is_decoded_leniently():
    """Cut mid-quantum, the stdlib hands back the base64 text itself: that was "not a PDF" with the text as content."""
    pdf = corpus.tiny_pdf()
    encoded = base64.b64encode(pdf)[:-3]
    raw = mixed(headers(), [text(), part(["Content-Type: application/pdf; name=r.pdf",
                                          "Content-Transfer-Encoding: base64"], encoded)])
    message = parse_message(raw)
    (found,) = message.parts
    assert found.content.startswith(b"%PDF-1.") and len(found.content) >= len(pdf) - 3
    assert any(d.startswith("invalid-base64-length") for d in message.defects)


def test_base64_encoded_forward_is_decoded():
    assert files(parsed("forwarded-base64")) == [("inner.csv", 1)]


def test_tnef_winmail_yields_its_files():
    message = parsed("tnef-winmail")
    assert files(message) == [("Rapport de référencement.pdf", 1), ("Clics.xlsx", 1)]
    pdf, xlsx = message.parts
    assert pdf.content == corpus.tiny_pdf() and pdf.mime == "application/pdf"
    assert xlsx.content == corpus.tiny_xlsx()  # ends in NUL bytes: kept whole


def test_signature_part_of_signed_mail_is_not_an_attachment():
    message = parsed("signed-csv")
    assert files(message) == [("signed.csv", 0)]
    assert message.body_text == "Signed numbers."


def test_truncated_base64_keeps_what_arrived_with_defects():
    message = parsed("truncated-mid-base64")
    assert [each.filename for each in message.parts] == ["cut.pdf"]
    assert 0 < message.parts[0].size < len(corpus.tiny_pdf())
    assert "close-boundary-not-found (multipart/mixed)" in message.defects
    assert "invalid-base64-padding (cut.pdf)" in message.defects


def test_truncated_boundary_keeps_the_whole_part():
    message = parsed("truncated-mid-boundary")
    assert message.parts[0].content == CSV
    assert "close-boundary-not-found (multipart/mixed)" in message.defects


def test_missing_boundary_is_guessed():
    message = parsed("missing-boundary")
    assert files(message) == [("found.csv", 0)]
    assert "multipart without a usable boundary: boundary guessed" in message.defects


def test_inline_image_keeps_its_content_id():
    (image,) = parsed("inline-image-cid").parts
    assert (image.disposition, image.content_id, image.mime) == ("inline", "logo@x", "image/png")


def test_part_count_is_capped_and_the_rest_is_counted_on_a_row():
    message = parsed("many-parts")
    assert len(message.parts) == 501 and message.parts[499].filename == "note499.txt"
    rest = message.parts[500]
    assert (rest.filename, rest.skip_reason) == ("100 more parts", "over 500 parts in the message: 100 more not read")
    assert "over 500 parts: the rest ignored" in message.defects


def test_part_over_max_bytes_keeps_its_size_not_its_content():
    (big,) = parse_message(mixed(headers(), [attachment("big.csv", CSV * 100)]), max_part_bytes=1000).parts
    assert (big.size, big.content) == (len(CSV) * 100, b"")


def test_malformed_content_type_falls_back():
    raw = mixed(headers(), [part(['Content-Type: "pdf', 'Content-Disposition: attachment; filename="x.pdf"'],
                                 corpus.tiny_pdf())])
    (attached,) = parse_message(raw).parts
    assert attached.filename == "x.pdf" and attached.content == corpus.tiny_pdf()


def test_oversized_message_generator():
    raw = corpus.oversized_message(3 * 1024 * 1024)  # the real one is 30 MB; same builder
    assert 3 * 1024 * 1024 < len(raw) < 4.2 * 1024 * 1024
    assert parse_message(raw).parts[0].size > 2 * 1024 * 1024


# --- TNEF -------------------------------------------------------------------------------

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
    started = time.monotonic()
    files, _ = tnef.unpack(tnef.TNEF_SIGNATURE + b"\x00\x00" + rend + attribute)
    assert time.monotonic() - started < 1
    assert [each.name for each in files] == [""]


def test_tnef_attribute_flood_is_capped():
    flood = (struct.pack("<BHHI", 1, 0x8008, 7, 0) + b"\x00\x00") * (tnef.MAX_ATTRIBUTES + 5)
    _, defects = tnef.unpack(tnef.TNEF_SIGNATURE + b"\x00\x00" + flood)
    assert defects == [f"tnef: over {tnef.MAX_ATTRIBUTES} attributes, the rest ignored"]


def test_tnef_that_is_not_tnef_stays_an_attachment():
    raw = mixed(headers(), [text(), attachment("winmail.dat", b"not tnef at all", "application/ms-tnef")])
    (attached,) = parse_message(raw).parts
    assert (attached.filename, attached.mime) == ("winmail.dat", "application/ms-tnef")


@pytest.mark.parametrize("data, charset, expected, lied", [
    ("été".encode(), "utf-8", "été", False),
    ("été".encode("cp1252"), "utf-8", "été", True),
    ("l’été €".encode("cp1252"), "iso-8859-1", "l’été €", False),  # read as Windows-1252, like browsers
    ("été".encode(), "iso-8859-1", "été", True),  # UTF-8 declared Latin-1
    ("été".encode(), "us-ascii", "été", True),
    ("Отчёт".encode("koi8-r"), "KOI8-R", "Отчёт", False),
    (b"plain", "x-foo", "plain", True),
    (b"plain", "zlib", "plain", True),  # a codec, but not a text one
    (b"plain", "utf-8\x00", "plain", False),  # control characters are dropped from the label
    ("été".encode("utf-16"), "utf-16", "été", False),
    ("été".encode("cp1252"), None, "été", False),
    ("été".encode(), "unknown-8bit", "été", False),
])
def test_decode_bytes(data, charset, expected, lied):
    text, defects = decode_bytes(data, charset)
    assert (text, bool(defects)) == (expected, lied)


def test_html_is_converted_within_a_budget():
    html = part(["Content-Type: text/html"], b"<p>" + b"word " * 500_000 + b"</p>")  # 2.5 MB
    started = time.monotonic()
    message = parse_message(mixed(headers(), [html, html, html]))
    assert time.monotonic() - started < 10  # 2 MB of markup converted, not 7.5
    assert message.body_text.startswith("word word") and len(message.body_text) == 1_000_000
    assert "HTML body cut before its text was extracted" in message.defects
