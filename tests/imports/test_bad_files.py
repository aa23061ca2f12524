"""Files that cannot be imports, and hostile ones: each gets a clear message, never a crash."""

import io
import random
import re
import zipfile

import pytest

from imports.formats import ParsedRow, RowError, UnreadableFile, open_source
from imports.formats.csvfile import HEADER_LINE_CHARS
from imports.formats.text import BoundedLines, RecordTooLong
from tests.imports import files


def _refused(path, filename=None, **kwargs) -> str:
    with pytest.raises(UnreadableFile) as caught:
        source = open_source(path, filename or path.name, **kwargs)
        list(source.rows())
    return str(caught.value)


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("empty.csv", b"", "empty.csv is empty"),
        ("blank.csv", b"\r\n  \r\n\t\n", "the file has no header row (it is blank)"),
        ("bom.csv", b"\xef\xbb\xbf", "the file has no header row (it is blank)"),
        ("garbage.csv", bytes(range(256)) * 64,
         "this is not a text or spreadsheet file (it holds binary data): upload a CSV, an Excel .xlsx or a "
         "Search Console .zip export"),
        ("random.bin", b"rnd" + random.Random(7).randbytes(4096), "this is not a text or spreadsheet file"),
        # Bytes that all decode to Windows-1252 letters: no control character, still no text.
        ("latin.csv", bytes(random.Random(3).randint(0xA0, 0xFF) for _ in range(5000)),
         "this is not a text or spreadsheet file"),
        ("report.pdf", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj", "this is a PDF document"),
        ("old.xls", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600),
         "an old Office 97-2003 file (.xls?): save it as .xlsx or CSV"),
        ("data.csv.gz", b"\x1f\x8b\x08\x00" + bytes(100), "this is a gzip archive: decompress it first"),
        ("fake.xlsx", b"\x00\x01\x02\x03" * 100,
         "fake.xlsx is not a valid .xlsx file: this is not a text or spreadsheet file"),
        ("damaged.zip", b"PK\x03\x04" + b"\x00garbage" * 20, "the zip archive is damaged"),
        ("empty.zip", b"PK\x05\x06" + bytes(18), "the zip has no Pages.csv (found no files)"),
        ("huge-line.csv", b"URL," + b"x" * (HEADER_LINE_CHARS + 10) + b"\nhttps://a.example/,1\n",
         "a line near the top is longer than 131,072 characters: no export's header is that long"),
    ],
)
def test_unreadable_files(tmp_path, name, data, message):
    assert message in _refused(files.write_bytes(tmp_path, name, data))


def test_no_url_column_lists_the_headers_found(tmp_path):
    path = files.write_csv(tmp_path, "x.csv", [["Foo", "Bar", "Clicks"], ["a", "b", "1"]])
    assert _refused(path) == (
        "no URL column: found headers 'Foo', 'Bar', 'Clicks'; "
        "expected one of: Top pages, Pages les plus populaires, Page, Pages, URL, Landing page, Address"
    )


def test_no_url_column_in_a_workbook_names_the_sheet_read_and_the_others(tmp_path):
    path = files.write_xlsx(tmp_path, "x.xlsx", {"Queries": [["Top queries", "Clicks"], ["seo", 1]],
                                                 "Notes": [["Written by", "ana"]]})
    message = _refused(path)
    assert message.startswith("no URL column in the sheet 'Queries': found headers 'Top queries', 'Clicks'; "
                              "expected one of: Top pages")
    assert message.endswith("(the workbook also has 'Notes': choose the sheet to read)")


def test_a_sheet_that_does_not_exist_is_refused_with_the_sheets_there_are(tmp_path):
    path = files.write_xlsx(tmp_path, "x.xlsx", {"Data": [["URL"], ["https://a.example/"]], "Notes": [["x"]]})
    assert _refused(path, sheet="Summary") == "the workbook has no sheet 'Summary': its sheets are 'Data', 'Notes'"


def test_zip_without_pages_says_what_it_holds(tmp_path):
    path = files.write_zip(tmp_path, "x.zip", {"Queries.csv": "Top queries,Clicks\n", "notes/readme.txt": "hi"})
    message = _refused(path)
    assert message.startswith("the zip has no Pages.csv (found 'Queries.csv', 'notes/readme.txt')")


def test_comparison_export_is_refused(tmp_path):
    tables = files.search_console_tables()
    tables["Pages"] = [
        ["Top pages", "Last 28 days Clicks", "Previous period Clicks"],
        ["https://example.com/", 1, 2],
    ]
    path = files.write_tables_zip(tmp_path, "sc.zip", tables)
    assert "(a comparison export?): export a single date range" in _refused(path)


def test_damaged_workbook(tmp_path):
    path = files.write_zip(tmp_path, "x.xlsx", {"[Content_Types].xml": "<nope", "xl/workbook.xml": "<not xml"})
    assert _refused(path).startswith("the Excel workbook is damaged or not an .xlsx file")


def test_zip_bomb_is_refused_without_inflating(tmp_path):
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("Pages.csv", "w", force_zip64=True) as member:
            member.write(b"Top pages,Clicks\n")
            for _ in range(5):
                member.write(bytes(1_000_000))
    assert path.stat().st_size < 50_000
    message = _refused(path, max_unzipped_bytes=2_000_000)
    assert message == "'Pages.csv' in the zip unpacks to 5.0 MB, over the 2.0 MB limit"


def test_huge_workbook_part_is_refused(tmp_path):
    rows = [["URL", "Notes"]] + [[f"https://a.example/{i}", "x" * 100] for i in range(2000)]
    path = files.write_xlsx(tmp_path, "big.xlsx", {"S": rows})
    message = _refused(path, max_unzipped_bytes=100_000)
    part = r"'xl/(worksheets/sheet1|sharedStrings)\.xml'"
    expected = part + r" in the zip unpacks to \d+\.\d KB, over the 100\.0 KB limit"
    assert re.fullmatch(expected, message), message


def test_password_protected_member(tmp_path):
    path = files.write_zip(tmp_path, "locked.zip", {"Pages.csv": "Top pages,Clicks\n"})
    # zipfile cannot encrypt: set the "encrypted" flag an encrypting tool would,
    # in the local header (offset 6) and the central directory (offset 8).
    data = bytearray(path.read_bytes())
    data[6] |= 0x1
    data[data.index(b"PK\x01\x02") + 8] |= 0x1
    path.write_bytes(data)
    assert _refused(path) == "'Pages.csv' in the zip is password-protected"


def test_path_traversal_names_are_read_never_extracted(tmp_path):
    inner = tmp_path / "inner"
    inner.mkdir()
    path = files.write_zip(inner, "evil.zip", {"../../Pages.csv": "Top pages,Clicks\nhttps://a.example/,3\n"})
    before = sorted(p.name for p in tmp_path.rglob("*"))
    rows = list(open_source(path, "evil.zip").rows())
    assert rows == [ParsedRow(1, "https://a.example/", None, 3, None, None, None)]
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_nul_byte_is_a_row_error(tmp_path):
    data = b"URL,Clicks\nhttps://a.example/1,1\nhttps://a.exa\x00mple/2,2\nhttps://a.example/3,3\n"
    rows = list(open_source(files.write_bytes(tmp_path, "x.csv", data), "x.csv").rows())
    assert rows[1] == RowError(2, "row contains a NUL byte")
    assert [row.number for row in rows if isinstance(row, ParsedRow)] == [1, 3]


def test_ten_megabyte_line_is_a_row_error_and_reading_goes_on(tmp_path):
    huge = b"https://a.example/" + b"x" * 10_000_000
    data = b"URL,Clicks\nhttps://a.example/1,1\n" + huge + b",2\nhttps://a.example/3,3\n"
    rows = list(open_source(files.write_bytes(tmp_path, "x.csv", data), "x.csv").rows())
    assert rows == [
        ParsedRow(1, "https://a.example/1", None, 1, None, None, None),
        RowError(2, "row is longer than 1,000,000 characters (an unclosed quote?)"),
        ParsedRow(3, "https://a.example/3", None, 3, None, None, None),
    ]


def test_field_over_the_csv_limit_is_a_row_error(tmp_path):
    data = b'URL,Clicks\n"https://a.example/' + b"x" * 200_000 + b'",1\nhttps://a.example/3,3\n'
    rows = list(open_source(files.write_bytes(tmp_path, "x.csv", data), "x.csv").rows())
    assert rows[0].reason.startswith("row could not be read: field larger than field limit")
    assert rows[1] == ParsedRow(2, "https://a.example/3", None, 3, None, None, None)


def test_unclosed_quote_swallowing_the_file_is_bounded(tmp_path):
    lines = b"".join(b"https://a.example/%d,%d\n" % (i, i) for i in range(60_000))  # ~1.5 MB
    data = b'URL,Clicks\nhttps://a.example/first,1\n"https://a.example/open,2\n' + lines
    rows = list(open_source(files.write_bytes(tmp_path, "x.csv", data), "x.csv").rows())
    assert rows[0] == ParsedRow(1, "https://a.example/first", None, 1, None, None, None)
    assert isinstance(rows[1], RowError)
    # Reading resumed after the bounded record: the tail of the file is rows again.
    assert rows[-1] == ParsedRow(len(rows), "https://a.example/59999", None, 59999, None, None, None)


def test_invalid_utf8_after_the_sniffed_head_is_a_row_error(tmp_path):
    head = b"URL,Clicks\n" + b"".join(b"https://a.example/%06d,1\n" % i for i in range(4000))  # > 64 KB
    data = head + b"https://a.example/caf\xe9,2\nhttps://a.example/last,3\n"
    rows = list(open_source(files.write_bytes(tmp_path, "x.csv", data), "x.csv").rows())
    assert rows[-2] == RowError(4001, "row has bytes that are not valid UTF-8")
    assert rows[-1] == ParsedRow(4002, "https://a.example/last", None, 3, None, None, None)


class _RecordingStream(io.StringIO):
    """A text stream that remembers how much each readline asked for."""

    def __init__(self, text):
        super().__init__(text)
        self.asked = []

    def readline(self, size=-1):
        self.asked.append(size)
        return super().readline(size)


def test_a_long_line_is_never_read_whole():
    stream = _RecordingStream("a" * 5000 + "\nnext\n")
    lines = BoundedLines(stream, limit=100)
    with pytest.raises(RecordTooLong):
        next(lines)
    assert next(lines) == "next\n"
    assert stream.asked and all(0 < size <= 101 for size in stream.asked), stream.asked


@pytest.mark.parametrize(("streams", "message"), [
    (["EncryptionInfo", "EncryptedPackage", "\x06DataSpaces"], "this Excel file is password-protected: remove"),
    (["Workbook", "\x05SummaryInformation", "\x05DocumentSummaryInformation", "CompObj", "Ctls"],
     "this is an old Excel .xls (Office 97-2003) file: save it as .xlsx or CSV"),
    (["WordDocument", "1Table"], "this is a Word document, not a text or spreadsheet file"),
])
def test_compound_files_are_told_apart_by_their_streams(tmp_path, streams, message):
    # A password-protected .xlsx starts like an old .xls: only its directory tells them apart.
    path = files.write_compound_file(tmp_path, "report.xlsx", streams)
    assert _refused(path).startswith(message)


def test_opendocument_and_word_zips_say_what_they_are(tmp_path):
    ods = files.write_zip(tmp_path, "sheet.ods", {"mimetype": "application/vnd.oasis.opendocument.spreadsheet",
                                                  "content.xml": "<office:document-content/>"})
    assert _refused(ods) == "this is an OpenDocument spreadsheet (.ods), not an Excel .xlsx: save it as .xlsx or CSV"
    docx = files.write_zip(tmp_path, "notes.zip", {"[Content_Types].xml": "<Types/>", "word/document.xml": "<w/>"})
    assert _refused(docx) == "this is a Word document, not a text or spreadsheet file"
