"""Triage decisions and content sniffing: tables of cases, pure."""

from __future__ import annotations

import codecs

import pytest

from mailpoll.message.parse import ParsedMessage, Part, UnparseableMessage, parse_message
from mailpoll.message.triage import CONTEXT_MAX_CHARS, SMALL_IMAGE_BYTES, sniff_kind, triage
from tests.mailpoll import corpus
from tests.mailpoll.corpus import CSV, UNPARSEABLE, hostile_corpus

PDF = corpus.tiny_pdf()
XLSX = corpus.tiny_xlsx()
PNG = corpus.png(8, 8)
OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
XLS = OLE2 + b"\x00" * 504 + "Workbook".encode("utf-16-le") + b"\x00" * 64
DOC = OLE2 + b"\x00" * 504 + "WordDocument".encode("utf-16-le") + b"\x00" * 64
BARE_OLE2 = OLE2 + bytes(600)  # no stream name found in the bytes read
ENCRYPTED = OLE2 + b"\x00" * 504 + "EncryptedPackage".encode("utf-16-le") + b"\x00" * 64
HTML = b"<!DOCTYPE html><html><body>Session expired</body></html>"
TSV = b"Page\tClicks\tImpressions\nhttps://shop.example/a\t3\t40\n"
PROSE = b"Hello, Anne\nThanks, Bob\n"


@pytest.mark.parametrize("content, filename, mime, kind", [
    (PDF, "report.pdf", "application/pdf", "pdf"),
    (PDF, "scan0001", "application/octet-stream", "pdf"),  # the type lies, the content does not
    (PDF, "report.csv", "text/csv", "pdf"),
    (b"\r\n\xef\xbb\xbf" + PDF, "junk-before.pdf", "application/pdf", "pdf"),
    (HTML, "report.pdf", "application/pdf", "other"),  # an error page saved as .pdf
    (b"", "report.pdf", "application/pdf", "other"),
    (XLSX, "clicks.xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", "xlsx"),
    (XLSX, "download", "application/octet-stream", "xlsx"),
    (corpus._zip({"word/document.xml": b"<w/>"}), "letter.docx", "application/octet-stream", "other"),
    (corpus._zip({"a.txt": b"a"}), "clicks.xlsx", "application/zip", "other"),
    (b"PK\x03\x04 truncated zip", "clicks.xlsx", "application/zip", "other"),
    (XLS, "old.xls", "application/vnd.ms-excel", "xls"),
    (XLS, "noname", "application/octet-stream", "xls"),
    (BARE_OLE2, "old.xls", "application/octet-stream", "xls"),  # named .xls, and OLE2: an old .xls still
    (BARE_OLE2, "clicks", "application/vnd.ms-excel", "xls"),
    (BARE_OLE2, "unknown.bin", "application/octet-stream", "other"),
    (DOC, "letter.doc", "application/msword", "other"),
    (ENCRYPTED, "clicks.xlsx", "application/vnd.ms-excel", "encrypted"),  # password-protected .xlsx
    (DOC, "letter.doc", "application/msword", "other"),
    (PNG, "logo.png", "image/png", "image"),
    (b"\xff\xd8\xff\xe0" + b"\x00" * 20, "photo.jpg", "image/jpeg", "image"),
    (b"GIF89a" + b"\x00" * 20, "anim.gif", "image/gif", "image"),
    (b"RIFF\x10\x00\x00\x00WEBPVP8 ", "pic.webp", "image/webp", "image"),
    (PNG, "report.pdf", "application/pdf", "image"),
    (CSV, "clicks.csv", "text/csv", "csv"),
    (CSV, "clicks.csv", "application/octet-stream", "csv"),
    (CSV, "export.csv", "application/vnd.ms-excel", "csv"),
    (CSV, "noname", "text/csv", "csv"),
    (CSV, "clicks", "application/csv", "csv"),
    (codecs.BOM_UTF8 + "Page;Clics\n/é;3\n".encode(), "fr.csv", "text/csv", "csv"),
    (TSV, "clicks.tsv", "text/tab-separated-values", "csv"),
    (TSV, "clicks.txt", "text/plain", "csv"),
    (TSV, "export.xls", "application/vnd.ms-excel", "csv"),  # web "Excel export" that is really TSV
    (codecs.BOM_UTF16_LE + TSV.decode().encode("utf-16-le"), "unicode.txt", "text/plain", "csv"),
    (CSV, "notes.txt", "text/plain", "csv"),
    (PROSE, "notes.txt", "text/plain", "other"),  # one comma a line is prose
    (b"Page,Clicks\n", "one-line.txt", "text/plain", "other"),
    (CSV, "clicks.dat", "application/x-data", "other"),  # nothing says CSV
    (HTML, "report.csv", "text/csv", "other"),
    (b"<table><tr><td>1</td></tr></table>", "export.xls", "application/vnd.ms-excel", "other"),
    (b"MZ\x90\x00" + b"\x00" * 200, "clicks.csv", "text/csv", "other"),  # binary is not text
    (bytes(range(256)) * 4, "clicks.csv", "text/csv", "other"),
    (b"   \n", "blank.csv", "text/csv", "other"),
])
def test_sniff_kind(content, filename, mime, kind):
    assert sniff_kind(content, filename, mime) == kind


def part(filename="file", content=b"", mime="application/octet-stream", *, disposition="attachment",
         content_id=None, size=None, original=None, skip_reason="") -> Part:
    return Part(filename=filename, original_filename=filename if original is None else original, mime=mime,
                content=content, disposition=disposition, content_id=content_id, depth=0,
                size=len(content) if size is None else size, skip_reason=skip_reason)


def message(*parts: Part, body: str = "See attached.") -> ParsedMessage:
    return ParsedMessage(message_id="m@x", source_ref="m@x", sender="a@x", subject="s", date=None,
                         body_text=body, parts=parts, defects=())


BIG_PNG = corpus.png(160, 120)
assert len(BIG_PNG) > SMALL_IMAGE_BYTES > len(PNG)


@pytest.mark.parametrize("attached, outcome", [
    (part("r.pdf", PDF, "application/pdf"), ("document", "pdf")),
    (part("r.pdf", PDF, "application/pdf", disposition="inline"), ("document", "pdf")),  # Apple Mail
    (part("r.pdf", PDF, "application/pdf", disposition=None, content_id="c1"), ("document", "pdf")),
    (part("scan", PDF), ("document", "pdf")),
    (part("c.xlsx", XLSX), ("document", "xlsx")),
    (part("c.xls", XLS, "application/vnd.ms-excel"), ("document", "xls")),
    (part("old.xls", BARE_OLE2, "application/vnd.ms-excel"), ("document", "xls")),  # fails with the old .xls reason
    (part("c.xlsx", ENCRYPTED, "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
     ("skipped", "password-protected Office file: send it again without a password")),
    # What the parser already knows wins: a CSV too deep to search, an empty winmail.dat.
    (part("deep.csv", b"", "text/csv", size=62, skip_reason="nested too deep (over 32 MIME levels): not searched"),
     ("skipped", "nested too deep (over 32 MIME levels): not searched")),
    (part("winmail.dat", b"", "application/ms-tnef", size=40, skip_reason="empty TNEF: the winmail.dat holds no files"),
     ("skipped", "empty TNEF: the winmail.dat holds no files")),
    (part("logo.png", b"", "image/png", size=900, disposition="inline", skip_reason="nested too deep"),
     ("dropped", None)),
    (part("c.csv", CSV, "text/csv"), ("document", "csv")),
    (part("logo.png", PNG, "image/png"), ("dropped", None)),  # small
    (part("banner.png", BIG_PNG, "image/png", disposition="inline"), ("dropped", None)),
    (part("banner.png", BIG_PNG, "image/png", disposition=None, content_id="logo"), ("dropped", None)),
    (part("vector.svg", b"<svg/>", "image/svg+xml", disposition="inline"), ("dropped", None)),
    (part("icon.png", b"", "image/png"), ("dropped", None)),
    # An explicit attachment wins over a Content-ID (Apple Mail gives one to every attachment).
    (part("photo.png", BIG_PNG, "image/png", content_id="c2"),
     ("skipped", "not a PDF, Excel or CSV file (image/png)")),
    (part("photo.png", BIG_PNG, "image/png"), ("skipped", "not a PDF, Excel or CSV file (image/png)")),
    (part("r.pdf", HTML, "application/pdf"), ("skipped", "not a PDF, Excel or CSV file (application/pdf)")),
    (part("a.zip", corpus._zip({"a": b"a"}), "application/zip"),
     ("skipped", "not a PDF, Excel or CSV file (application/zip)")),
    (part("setup.exe", b"MZ" + b"\x00" * 64, "application/x-msdownload"),
     ("skipped", "not a PDF, Excel or CSV file (application/x-msdownload)")),
    (part("empty.pdf", b"", "application/pdf"), ("skipped", "empty attachment")),
    (part("huge.pdf", b"", "application/pdf", size=30_000_000), ("skipped", "too large to keep (30000000 bytes)")),
    (part("invite.ics", b"BEGIN:VCALENDAR", "text/calendar", disposition=None),
     ("skipped", "not a PDF, Excel or CSV file (text/calendar)")),
])
def test_triage_decision(attached, outcome):
    result = triage(message(attached))
    decision, detail = outcome
    if decision == "document":
        (document,) = result.documents
        assert (document.kind, document.filename, document.content) == (detail, attached.filename, attached.content)
        assert document.context_text == "See attached."
        assert (result.skipped, result.dropped) == ((), 0)
        return
    assert [each.kind for each in result.documents] == ["body"]  # nothing extractable: the body instead
    if decision == "dropped":
        assert (result.skipped, result.dropped) == ((), 1)
    else:
        (skipped,) = result.skipped
        assert (skipped.filename, skipped.mime, skipped.size, skipped.reason) == (
            attached.filename, attached.mime, attached.size, detail)
        assert result.dropped == 0


def test_small_image_threshold_is_a_parameter():
    image = part("photo.png", BIG_PNG, "image/png")
    assert triage(message(image), small_image_bytes=len(BIG_PNG) + 1).dropped == 1


def test_no_attachment_the_body_is_the_document():
    (document,) = triage(message(body="Clicks doubled.\nTop page: /a")).documents
    assert (document.kind, document.filename, document.mime) == ("body", "message.txt", "text/plain")
    assert document.content == b"Clicks doubled.\nTop page: /a"
    assert document.context_text == ""


def test_with_attachments_the_body_travels_as_context():
    result = triage(message(part("a.csv", CSV, "text/csv"), part("b.pdf", PDF), body="Numbers for March."))
    assert [(each.kind, each.context_text) for each in result.documents] == [
        ("csv", "Numbers for March."), ("pdf", "Numbers for March.")]


def test_a_long_body_travels_cut_to_the_context_limit():
    body = "Quoted thread. " * (CONTEXT_MAX_CHARS // 10)
    result = triage(message(part("a.csv", CSV, "text/csv"), part("b.pdf", PDF), body=body))
    assert [len(each.context_text) for each in result.documents] == [CONTEXT_MAX_CHARS] * 2
    assert result.documents[0].context_text == body.strip()[:CONTEXT_MAX_CHARS]


def test_empty_body_and_nothing_extractable_gives_no_document():
    result = triage(message(part("a.zip", b"PK\x05\x06" + b"\x00" * 18, "application/zip"), body="  \n"))
    assert result.documents == ()
    assert [each.reason for each in result.skipped] == ["not a PDF, Excel or CSV file (application/zip)"]


def test_original_file_name_travels_with_documents_and_skips():
    result = triage(message(part("passwd.csv", CSV, "text/csv", original="../../etc/passwd.csv"),
                            part("a.exe", b"MZ", "application/x-msdownload", original="C:\\a.exe")))
    assert [(each.filename, each.original_filename) for each in result.documents] == [
        ("passwd.csv", "../../etc/passwd.csv")]
    assert [(each.filename, each.original_filename) for each in result.skipped] == [("a.exe", "C:\\a.exe")]


# --- the corpus, end to end -------------------------------------------------------------

EXPECTED = {
    # name: ([(kind, filename)] of documents, [(filename, reason)] of skipped, number dropped)
    "plain-csv": ([("csv", "clicks.csv")], [], 0),
    "koi8r-subject": ([("body", "message.txt")], [], 0),
    "rfc2231-continuations": ([("csv", "Rapport été € clics.csv")], [], 0),
    "rfc2047-filename": ([("pdf", "Données clés.pdf")], [], 0),
    "rfc2231-stdlib-crash": ([("csv", "clics.csv")], [], 0),
    "path-names": ([("csv", "passwd.csv"), ("pdf", "report.pdf"), ("xlsx", "data.xlsx")], [], 0),
    "forwarded-3-levels": ([("csv", "deep.csv")], [], 0),
    "forwarded-too-deep": ([("body", "message.txt")],
                           [("lost.csv", "nested too deep (forwarded over 5 times): not searched")], 0),
    "nested-41-levels": ([("body", "message.txt")],
                         [("deep.csv", "nested too deep (over 32 MIME levels): not searched")], 0),
    "tnef-empty": ([("body", "message.txt")], [("winmail.dat", "empty TNEF: the winmail.dat holds no files")], 0),
    "base64-cut-mid-quantum": ([("pdf", "cut.pdf")], [], 0),  # decoded as far as it goes, not "not a PDF"
    "old-xls": ([("xls", "old.xls")], [], 0),  # processing fails it with the old .xls reason
    "forwarded-base64": ([("csv", "inner.csv")], [], 0),
    "tnef-winmail": ([("pdf", "Rapport de référencement.pdf"), ("xlsx", "Clics.xlsx")], [], 0),
    "truncated-mid-base64": ([("pdf", "cut.pdf")], [], 0),  # the pipeline finds it unreadable, visibly
    "zero-byte-attachment": ([("body", "message.txt")], [("empty.pdf", "empty attachment")], 0),
    "inline-image-cid": ([("body", "message.txt")], [], 1),
    "small-logo": ([("body", "message.txt")], [], 1),
    "big-png": ([("body", "message.txt")], [("screenshot.png", "not a PDF, Excel or CSV file (image/png)")], 0),
    "inline-pdf": ([("pdf", "report.pdf")], [], 0),
    "pdf-that-is-html": ([("body", "message.txt")],
                         [("report.pdf", "not a PDF, Excel or CSV file (application/pdf)")], 0),
    "octet-stream-pdf": ([("pdf", "scan0001")], [], 0),
    "html-only-body": ([("body", "message.txt")], [], 0),
    "signed-csv": ([("csv", "signed.csv")], [], 0),
    "empty-message": ([], [], 0),
    "xlsx-attachment": ([("xlsx", "clicks.xlsx")], [], 0),
    "other-attachments": ([("body", "message.txt")], [
        ("bundle.zip", "not a PDF, Excel or CSV file (application/zip)"),
        ("letter.docx", "not a PDF, Excel or CSV file (application/octet-stream)"),
        ("setup.exe", "not a PDF, Excel or CSV file (application/x-msdownload)")], 0),
    "missing-boundary": ([("csv", "found.csv")], [], 0),
    "csv-as-ms-excel": ([("csv", "export.csv")], [], 0),
    "utf16-tsv-txt": ([("csv", "report.txt")], [], 0),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_triage(name):
    result = triage(parse_message(dict(hostile_corpus())[name]))
    documents, skipped, dropped = EXPECTED[name]
    assert [(each.kind, each.filename) for each in result.documents] == documents
    assert [(each.filename, each.reason) for each in result.skipped] == skipped
    assert result.dropped == dropped


def test_every_parseable_corpus_message_is_triaged():
    for name, raw in hostile_corpus():
        try:
            message = parse_message(raw)
        except UnparseableMessage:
            assert name in UNPARSEABLE
            continue
        result = triage(message)
        files = [each for each in result.documents if each.kind != "body"]
        assert len(files) + len(result.skipped) + result.dropped == len(message.parts), name
        assert len(result.documents) == len(files) or (not files and message.body_text), name


def test_extracted_documents_are_real():
    """The PDF from TNEF reads with pypdf; the CSV arrives byte for byte from three forwards down."""
    import io

    from pypdf import PdfReader

    by_name = dict(hostile_corpus())
    pdf = triage(parse_message(by_name["tnef-winmail"])).documents[0]
    assert "Clicks report" in PdfReader(io.BytesIO(pdf.content)).pages[0].extract_text()
    assert triage(parse_message(by_name["forwarded-3-levels"])).documents[0].content == CSV


@pytest.mark.parametrize("filename, kind", [("report.xlsx", "xlsx"), ("bundle.zip", "other")])
def test_a_zip_of_more_members_than_an_import_reads_is_judged_without_listing_them(tmp_path, monkeypatch,
                                                                                 filename, kind):
    """The poller sniffs every attachment: zipfile would read a 200,000-member directory whole first.

    One named .xlsx goes on as a workbook, for its import to say which bound it breaks.
    """
    import zipfile

    from imports import conf as imports_conf
    from tests.imports.files import write_many_members_zip

    content = write_many_members_zip(tmp_path, "many.zip", imports_conf.get("IMPORT_MAX_ZIP_MEMBERS")).read_bytes()
    opened = []
    monkeypatch.setattr(zipfile, "ZipFile", lambda *args, **kwargs: opened.append(args))
    assert sniff_kind(content, filename, "application/octet-stream") == kind
    assert opened == []
