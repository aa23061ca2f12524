"""A hostile corpus of raw RFC 5322 messages, generated: no binary fixtures.

Every message is built here byte by byte (CRLF line ends), because the email
package refuses to write most of what hostile senders do: 8-bit header bytes,
lying charsets, cut base64, missing boundaries. The documents inside are real:
a PDF pypdf can read, an .xlsx from openpyxl, a TNEF stream tnefparse decodes.

``hostile_corpus()`` is what the parse and triage tests (and the poller's
intake test) run over; ``oversized_message()`` stays out of it, being 30 MB.
"""

from __future__ import annotations

import base64
import functools
import io
import random
import struct
import zlib

from openpyxl import Workbook

XLSX_MIME = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
CSV = b"Page,Clicks\nhttps://shop.example/a,3\nhttps://shop.example/b,5\n"
DUPLICATE_ID = "dup-42@client.example"
UNPARSEABLE = ("not-a-mail", "empty-bytes", "multipart-bomb")


# --- documents ------------------------------------------------------------------------

def tiny_pdf(text: str = "Clicks report for shop.example") -> bytes:
    """A one-page PDF with extractable text, written by hand (offsets computed)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = b"%PDF-1.4\n", []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    return out + b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)


@functools.cache  # openpyxl stamps the time into the archive: one workbook per run keeps bytes comparable
def tiny_xlsx() -> bytes:
    workbook = Workbook()
    sheet = workbook.active
    sheet.title = "Pages"
    for row in [["Page", "Clicks"], ["https://shop.example/a", 3], ["https://shop.example/b", 5]]:
        sheet.append(row)
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def png(width: int, height: int, *, seed: int = 0) -> bytes:
    """A valid RGB PNG of noise: noise does not compress, so the size follows width × height."""
    noise = random.Random(seed)
    rows = b"".join(b"\x00" + noise.randbytes(width * 3) for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))


def tnef_stream(files: list[tuple[str, str, bytes]], *, codepage: int = 1252) -> bytes:
    """A winmail.dat as Outlook writes one: per file its 8.3 title, attAttachData and MAPI properties.

    ``files`` is [(long name, MIME type, content)]. The MAPI block repeats the
    content (PR_ATTACH_DATA_BIN), as Outlook does.
    """
    def attribute(level: int, attr_id: int, attr_type: int, data: bytes) -> bytes:
        return (struct.pack("<BHHI", level, attr_id, attr_type, len(data)) + data
                + struct.pack("<H", sum(data) & 0xFFFF))

    def mapi(properties: list[tuple[int, int, bytes]]) -> bytes:
        out = struct.pack("<I", len(properties))
        for prop_type, prop_id, value in properties:
            out += struct.pack("<HHII", prop_type, prop_id, 1, len(value)) + value + b"\x00" * (-len(value) % 4)
        return out

    out = b"\x78\x9f\x3e\x22" + struct.pack("<H", 0x0501)
    out += attribute(1, 0x9006, 0x0008, struct.pack("<I", 0x00010000))  # attTnefVersion
    out += attribute(1, 0x9007, 0x0006, struct.pack("<II", codepage, 0))  # attOemCodepage
    out += attribute(1, 0x8008, 0x0007, b"IPM.Microsoft Mail.Note\x00")  # attMessageClass
    for long_name, mime, content in files:
        stem, _, extension = long_name.rpartition(".")
        short = (stem[:6].upper() + "~1." + extension[:3].upper()).encode("ascii", "replace") + b"\x00"
        encoded_name = long_name.encode(f"cp{codepage}") + b"\x00"
        out += attribute(2, 0x9002, 0x0006, struct.pack("<HIHHI", 1, 0xFFFFFFFF, 0, 0, 0))  # attAttachRendData
        out += attribute(2, 0x8010, 0x0001, short)  # attAttachTitle
        out += attribute(2, 0x800F, 0x0006, content)  # attAttachData
        out += attribute(2, 0x9005, 0x0006, mapi([  # attAttachment
            (0x001E, 0x3707, encoded_name),  # PR_ATTACH_LONG_FILENAME
            (0x001E, 0x370E, mime.encode("ascii") + b"\x00"),  # PR_ATTACH_MIME_TAG
            (0x0102, 0x3701, content),  # PR_ATTACH_DATA_BIN
        ]))
    return out


# --- MIME by hand ---------------------------------------------------------------------

def b64(data: bytes) -> bytes:
    encoded = base64.b64encode(data)
    return b"\r\n".join(encoded[i:i + 76] for i in range(0, len(encoded), 76))


def headers(subject: str | bytes = "Weekly report", *, message_id: str | None = "msg@client.example",
            extra: list = ()) -> list:
    """A header block; a bytes ``subject`` is the whole raw Subject line."""
    lines = ["From: Anne Martin <anne@client.example>", "To: seo@agency.example",
             "Date: Mon, 06 Jan 2025 10:15:00 +0100", "MIME-Version: 1.0",
             subject if isinstance(subject, bytes) else f"Subject: {subject}"]
    if message_id is not None:
        lines.append(f"Message-ID: <{message_id}>")
    return lines + list(extra)


def message(head: list, body: bytes) -> bytes:
    return b"\r\n".join(line if isinstance(line, bytes) else line.encode() for line in head) + b"\r\n\r\n" + body


def part(head: list, payload: bytes) -> bytes:
    return message(head, payload)


def multipart(boundary: str, parts: list[bytes], *, close: bool = True) -> bytes:
    body = b"".join(b"--%s\r\n%s\r\n" % (boundary.encode(), each) for each in parts)
    return body + (b"--%s--\r\n" % boundary.encode() if close else b"")


def mixed(head: list, parts: list[bytes], *, boundary: str = "b1", subtype: str = "mixed",
          params: str = "") -> bytes:
    ctype = f'Content-Type: multipart/{subtype}; boundary="{boundary}"{params}'
    return message(head + [ctype], multipart(boundary, parts))


def text(body: str = "Hello, the numbers are attached.", *, charset: str = "utf-8") -> bytes:
    return part([f"Content-Type: text/plain; charset={charset}", "Content-Transfer-Encoding: 8bit"],
                body.encode(charset))


def attachment(filename: str | bytes, data: bytes, mime: str = "text/csv", *, disposition: str = "attachment",
               extra: list = ()) -> bytes:
    """A base64 part. A ``filename`` in bytes starting with "*" is raw RFC 2231 parameter text."""
    name = filename if isinstance(filename, bytes) else filename.encode()
    if not name.startswith(b"*"):  # "*=utf-8''…", "*0*=…": RFC 2231 parameters, given raw
        name = b'="' + name + b'"'
    dispo = b"Content-Disposition: " + disposition.encode() + b"; filename" + name
    return part([f"Content-Type: {mime}", dispo, "Content-Transfer-Encoding: base64", *extra], b64(data))


def forwarded(inner: bytes) -> bytes:
    return part(["Content-Type: message/rfc822", "Content-Disposition: inline"], inner)


def forward_chain(levels: int, bottom: bytes, *, tag: str) -> bytes:
    """``bottom`` wrapped in ``levels`` forwards, each with its own short body and Message-ID."""
    current = bottom
    for level in range(levels, 0, -1):
        current = mixed(headers(f"Fwd level {level}", message_id=f"{tag}-{level}@client.example"),
                        [text(f"Forwarding, level {level}."), forwarded(current)], boundary=f"fwd{level}")
    return current


def nested_multipart(levels: int, leaf: bytes, *, message_id: str = "nested@client.example") -> bytes:
    """``leaf`` inside ``levels`` multiparts, each with a short text part beside it."""
    current = leaf
    for level in range(levels, 0, -1):
        current = part([f'Content-Type: multipart/mixed; boundary="n{level}"'],
                       multipart(f"n{level}", [text(f"level {level}"), current]))
    return mixed(headers(message_id=message_id), [text("Top."), current])


OLD_XLS = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600)  # OLE2, no stream name in reach: as in imports' tests


# --- the corpus -----------------------------------------------------------------------

def hostile_corpus() -> list[tuple[str, bytes]]:
    """(name, raw bytes) for every case; UNPARSEABLE names the ones parse_message must refuse."""
    pdf, xlsx = tiny_pdf(), tiny_xlsx()
    koi8_subject = base64.b64encode("Отчёт о кликах".encode("koi8-r")).decode()
    cases = {
        "plain-csv": mixed(headers(message_id="plain@client.example"), [text(), attachment("clicks.csv", CSV)]),
        "koi8r-subject": message(
            headers(f"Subject: =?koi8-r?B?{koi8_subject}?=".encode(), message_id="koi8@client.example")
            + ["Content-Type: text/plain; charset=koi8-r", "Content-Transfer-Encoding: 8bit"],
            "Привет, отчёт в приложении.".encode("koi8-r")),
        "latin1-body-declared-utf8": message(
            headers(message_id="latin1@client.example")
            + ["Content-Type: text/plain; charset=utf-8", "Content-Transfer-Encoding: 8bit"],
            "Résumé des clics : 42 €, l’équipe".encode("cp1252")),
        "unknown-charset": message(
            headers(b"Subject: =?x-foo?Q?Rapport_mensuel?=", message_id="xfoo@client.example")
            + ['Content-Type: text/plain; charset="x-foo"'], b"Monthly report, plain ASCII really."),
        "rfc2231-continuations": mixed(headers(message_id="2231@client.example"), [text(), attachment(
            b"*0*=utf-8''Rapport%20%C3%A9t%C3%A9;\r\n filename*1*=%20%E2%82%AC%20clics;\r\n filename*2=\".csv\"",
            CSV)]),
        "rfc2231-latin1": mixed(headers(message_id="2231-latin1@client.example"),
                                [text(), attachment(b"*=iso-8859-1''donn%E9es.csv", CSV)]),
        "rfc2231-stdlib-crash": message(  # "name*" beside "name*0": TypeError in the stdlib parser itself
            headers(message_id="2231-crash@client.example")
            + ["Content-Type: multipart/mixed; boundary*=x; boundary*0=b"],
            multipart("b", [text(), attachment(b"*0*=utf-8''clics; filename*1=.csv; filename*", CSV)])),
        "rfc2047-filename": mixed(headers(message_id="2047@client.example"), [text(), attachment(
            "=?utf-8?Q?Donn=C3=A9es_cl=C3=A9s.pdf?=", pdf, 'application/pdf; name="=?utf-8?B?RG9ubsOpZXM=?="')]),
        "8bit-filenames": mixed(headers(message_id="8bit@client.example"), [
            text(), attachment("résumé.csv".encode("latin-1"), CSV), attachment("Clés.csv".encode(), CSV)]),
        "path-names": mixed(headers(message_id="paths@client.example"), [
            text(), attachment("../../etc/passwd.csv", CSV),
            attachment("C:\\evil\\report.pdf", pdf, "application/pdf"),
            attachment("/abs/dir/data.xlsx", xlsx, XLSX_MIME)]),
        "no-message-id": mixed(headers(message_id=None), [text(), attachment("clicks.csv", CSV)]),
        "duplicate-id-a": mixed(headers("First", message_id=DUPLICATE_ID), [text("First version.")]),
        "duplicate-id-b": mixed(headers("Second", message_id=DUPLICATE_ID), [text("Second, different.")]),
        "forwarded-3-levels": forward_chain(3, mixed(headers("Original", message_id="orig@client.example"),
                                                     [text("Original data."), attachment("deep.csv", CSV)]),
                                            tag="fwd3"),
        "forwarded-too-deep": forward_chain(7, mixed(headers("Original", message_id="orig7@client.example"),
                                                     [text("Very deep."), attachment("lost.csv", CSV)]),
                                            tag="fwd7"),
        "forwarded-base64": mixed(headers(message_id="fwd-b64@client.example"), [text("See forwarded."), part(
            ["Content-Type: message/rfc822", "Content-Transfer-Encoding: base64"],
            b64(mixed(headers("Inner", message_id="inner-b64@client.example"),
                      [text("Inner."), attachment("inner.csv", CSV)])))]),
        "tnef-winmail": mixed(headers(message_id="tnef@client.example"), [text("From Outlook."), attachment(
            "winmail.dat", tnef_stream([("Rapport de référencement.pdf", "application/pdf", pdf),
                                        ("Clics.xlsx", "application/vnd.ms-excel", xlsx)]),
            "application/ms-tnef")]),
        "truncated-mid-base64": mixed(headers(message_id="cut-b64@client.example"), [
            text(), attachment("cut.pdf", pdf, "application/pdf")])[:-300],
        "tnef-empty": mixed(headers(message_id="tnef-empty@client.example"), [text("From Outlook, nothing in it."),
                            attachment("winmail.dat", tnef_stream([]), "application/ms-tnef")]),
        "nested-41-levels": nested_multipart(41, attachment("deep.csv", CSV), message_id="nested41@client.example"),
        "base64-cut-mid-quantum": mixed(headers(message_id="b64-length@client.example"), [text(), part(
            ["Content-Type: application/pdf; name=cut.pdf", "Content-Transfer-Encoding: base64"],
            base64.b64encode(pdf)[:-3])]),
        "old-xls": mixed(headers(message_id="old-xls@client.example"), [
            text(), attachment("old.xls", OLD_XLS, "application/vnd.ms-excel")]),
        "truncated-mid-boundary": mixed(headers(message_id="cut-boundary@client.example"), [
            text(), attachment("whole.csv", CSV)]).rstrip(b"\r\n-")[:-1],
        "zero-byte-attachment": mixed(headers(message_id="zero@client.example"), [
            text(), attachment("empty.pdf", b"", "application/pdf")]),
        "inline-image-cid": mixed(headers(message_id="cid@client.example"), [
            part(["Content-Type: text/html; charset=utf-8"], b'<p>Logo below</p><img src="cid:logo@x">'),
            attachment("banner.png", png(160, 120, seed=1), "image/png", disposition="inline",
                       extra=["Content-ID: <logo@x>"])], subtype="related"),
        "small-logo": mixed(headers(message_id="logo@client.example"), [
            text(), attachment("logo.png", png(16, 16, seed=2), "image/png")]),
        "big-png": mixed(headers(message_id="bigpng@client.example"), [
            text(), attachment("screenshot.png", png(160, 120, seed=3), "image/png")]),
        "inline-pdf": mixed(headers(message_id="inline-pdf@client.example"), [
            text(), attachment("report.pdf", pdf, "application/pdf", disposition="inline")]),
        "pdf-that-is-html": mixed(headers(message_id="fake-pdf@client.example"), [
            text(), attachment("report.pdf", b"<!DOCTYPE html><html><body>Session expired</body></html>",
                               "application/pdf")]),
        "octet-stream-pdf": mixed(headers(message_id="octet@client.example"), [
            text(), attachment("scan0001", pdf, "application/octet-stream")]),
        "html-only-body": message(headers(message_id="html@client.example") + ["Content-Type: text/html"],
                                  b"<html><head><title>T</title><style>p{color:red}</style></head><body>"
                                  b"<script>alert(1)</script><p>Clicks  doubled&nbsp;this week.</p>"
                                  b"<p>Top page: /a</p></body></html>"),
        "signed-csv": mixed(headers(message_id="signed@client.example"), [
            part(['Content-Type: multipart/mixed; boundary="inner"'],
                 multipart("inner", [text("Signed numbers."), attachment("signed.csv", CSV)])),
            part(['Content-Type: application/pgp-signature; name="signature.asc"'],
                 b"-----BEGIN PGP SIGNATURE-----\r\nxx\r\n-----END PGP SIGNATURE-----")],
            subtype="signed", params='; protocol="application/pgp-signature"; micalg=pgp-sha256'),
        "empty-message": message(headers("Nothing", message_id="empty@client.example"), b""),
        "nul-and-long-headers": message(
            headers(b"Subject: Weekly\x00 report\x07 " + b"x" * 3000, message_id="nul\x00@client.example",
                    extra=[b"X-Long: " + b"a" * 20000, b"X-Nul: \x00\x00"]), b"Body\x00 with a NUL."),
        "xlsx-attachment": mixed(headers(message_id="xlsx@client.example"), [text(), attachment(
            "clicks.xlsx", xlsx, XLSX_MIME)]),
        "other-attachments": mixed(headers(message_id="others@client.example"), [
            text(), attachment("bundle.zip", _zip({"a.txt": b"a"}), "application/zip"),
            attachment("letter.docx", _zip({"word/document.xml": b"<w/>"}), "application/octet-stream"),
            attachment("setup.exe", b"MZ\x90\x00" + b"\x00" * 100, "application/x-msdownload")]),
        "missing-boundary": message(
            headers(message_id="noboundary@client.example") + ["Content-Type: multipart/mixed"],
            multipart("guessme", [text("Boundary lost."), attachment("found.csv", CSV)])),
        "csv-as-ms-excel": mixed(headers(message_id="msexcel@client.example"), [
            text(), attachment("export.csv", CSV, "application/vnd.ms-excel")]),
        "utf16-tsv-txt": mixed(headers(message_id="utf16@client.example"), [text(), attachment(
            "report.txt", b"\xff\xfe" + CSV.decode().replace(",", "\t").encode("utf-16-le"), "text/plain")]),
        "header-8bit-and-bad-date": message(
            [b"From: =?utf-8?q?Ren=C3=A9e?= <renee@client.example>", b"Subject: Donn\xc3\xa9es du mois",
             b"Date: not a date", b"Message-ID: <8bit-headers@client.example>", b"Content-Type: text/plain"],
            b"Voir les donn\xc3\xa9es."),
        "mbox-from-line": b"From anne@client.example Mon Jan  6 10:15:00 2025\r\n"
                          + message(headers(message_id="mbox@client.example"), b"Body after an mbox line."),
        "many-parts": mixed(headers(message_id="many@client.example"),
                            [attachment(f"note{i}.txt", b"hi", "text/plain") for i in range(600)]),
        "not-a-mail": pdf,
        "empty-bytes": b"",
        "multipart-bomb": message(
            headers(message_id="bomb@client.example") + ['Content-Type: multipart/mixed; boundary="b0"'],
            b"".join(b'--b%d\r\nContent-Type: multipart/mixed; boundary="b%d"\r\n\r\n' % (i, i + 1)
                     for i in range(3000))),
    }
    return list(cases.items())


def oversized_message(size: int = 30 * 1024 * 1024) -> bytes:
    """A message of about ``size`` bytes (one big attachment); the caller's size limit must reject it."""
    data = random.Random(7).randbytes(size * 3 // 4)
    return mixed(headers("Huge", message_id="huge@client.example"),
                 [text(), attachment("huge.bin", data, "application/octet-stream")])


def _zip(members: dict[str, bytes]) -> bytes:
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()
