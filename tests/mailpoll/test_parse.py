"""parse_message over hostile input, the MIME walk and its parts: pure, no database.

Header decoding is tested in test_headers.py, TNEF in test_tnef.py, the text helpers in test_text.py.
"""

from __future__ import annotations

import base64
import random
import re

import pytest

from mailpoll.message.parse import UnparseableMessage, message_ref, parse_message, safe_filename
from tests.mailpoll import corpus
from tests.mailpoll.corpus import (
    CSV,
    UNPARSEABLE,
    attachment,
    headers,
    hostile_corpus,
    message,
    mixed,
    part,
    text,
)

CORPUS = dict(hostile_corpus())


def parsed(name: str, **options):
    return parse_message(CORPUS[name], **options)


def files(message) -> list[tuple[str, int]]:
    return [(each.filename, each.depth) for each in message.parts]


# --- the corpus as a whole --------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(CORPUS))
def test_every_corpus_message_parses_or_is_refused(name):
    if name in UNPARSEABLE:
        with pytest.raises(UnparseableMessage):
            parse_message(CORPUS[name])
        return
    message = parse_message(CORPUS[name])
    texts = [message.source_ref, message.sender, message.subject, message.body_text, *message.defects,
             *message.recipients, *message.auth_results]
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


def test_no_body_at_all():
    message = parsed("empty-message")
    assert message.body_text == "" and message.parts == ()


def test_html_is_converted_within_a_budget():
    html = part(["Content-Type: text/html"], b"<p>" + b"word " * 500_000 + b"</p>")  # 2.5 MB
    message = parse_message(mixed(headers(), [html, html, html]))  # 2 MB of markup converted, not 7.5
    assert message.body_text.startswith("word word") and len(message.body_text) == 1_000_000
    assert "HTML body cut before its text was extracted" in message.defects


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


def test_recipients_and_auth_results_come_with_the_message():
    raw = mixed(headers(extra=["Cc: Anne <Anne@Client.example>", "Delivered-To: seo+acme@agency.example",
                               "Authentication-Results: mx.agency.example;\r\n dmarc=pass header.from=client.example",
                               "Authentication-Results: \x00forged; dmarc=pass"]),
                [text(), attachment("a.csv", CSV)])
    message = parse_message(raw)
    assert message.recipients == ("seo@agency.example", "anne@client.example", "seo+acme@agency.example")
    assert message.auth_results == ("mx.agency.example; dmarc=pass header.from=client.example",
                                    "\ufffdforged; dmarc=pass")
