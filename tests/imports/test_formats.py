"""The format matrix: every delimiter, encoding and language, Excel, Search Console bundles."""

import zipfile
from datetime import date, datetime

import pytest

from imports.formats import ParsedRow, RowError, open_source
from tests.imports import files

NBSP = "\u00a0"
VALUES = {
    # clicks, impressions, ctr, position as each language's export writes them
    "en": [
        ["https://example.com/café", "1,234", "56,789", "12.3%", "4.5"],
        ["https://example.com/b", "7", "100", "7%", "11"],
    ],
    "fr": [
        ["https://example.com/café", f"1{NBSP}234", "56 789", "12,3 %", "4,5"],
        ["https://example.com/b", "7", "100", "7 %", "11"],
    ],
}
EXPECTED = [
    ParsedRow(1, "https://example.com/café", None, 1234, 56789, pytest.approx(0.123), 4.5),
    ParsedRow(2, "https://example.com/b", None, 7, 100, pytest.approx(0.07), 11.0),
]


@pytest.mark.parametrize("lang", ["en", "fr"])
@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-bom", "utf-16", "utf-16-be", "utf-16-le-nobom", "cp1252"])
@pytest.mark.parametrize("delimiter", [",", ";", "\t"], ids=["comma", "semicolon", "tab"])
def test_csv_matrix(tmp_path, delimiter, encoding, lang):
    rows = [files.HEADERS[lang], *VALUES[lang]]
    path = files.write_csv(tmp_path, "export.csv", rows, encoding=encoding, delimiter=delimiter)

    source = open_source(path, "export.csv")

    assert source.kind == "csv"
    assert source.headers == tuple(files.HEADERS[lang])
    assert source.columns == dict(zip(["url", "clicks", "impressions", "ctr", "position"], files.HEADERS[lang],
                                      strict=True))
    assert source.period is None
    assert source.total_rows() == 2
    assert list(source.rows()) == EXPECTED


@pytest.mark.parametrize("newline", ["\r\n", "\n", "\r"], ids=["crlf", "lf", "cr"])
def test_line_endings(tmp_path, newline):
    rows = [["URL", "Clicks"], ["https://a.example/", "1"], ["https://b.example/", "2"]]
    source = open_source(files.write_csv(tmp_path, "x.csv", rows, newline=newline), "x.csv")
    assert [(row.url, row.clicks) for row in source.rows()] == [(rows[1][0], 1), (rows[2][0], 2)]
    assert source.total_rows() == 2


def test_quoted_fields_with_newlines_and_delimiters(tmp_path):
    rows = [
        ["Page", "Note", "Clicks"],
        ["https://example.com/a", "two\nlines; with, delimiters", "1"],
        ["https://example.com/b", 'a "quoted"\r\nword', "2"],
        ["https://example.com/c", "", "3"],
    ]
    source = open_source(files.write_csv(tmp_path, "x.csv", rows, delimiter=";"), "x.csv")
    assert [(row.number, row.url, row.clicks) for row in source.rows()] == [
        (1, "https://example.com/a", 1), (2, "https://example.com/b", 2), (3, "https://example.com/c", 3)]


def test_excel_sep_line_and_blank_lines_above_header(tmp_path):
    text = "\r\nsep=;\r\n\r\nURL;Clicks\r\nhttps://a.example/x,y;1\r\n"
    source = open_source(files.write_bytes(tmp_path, "x.csv", text.encode()), "x.csv")
    assert source.columns == {"url": "URL", "clicks": "Clicks"}
    assert [(row.url, row.clicks) for row in source.rows()] == [("https://a.example/x,y", 1)]
    assert source.total_rows() == 1


def test_delimiter_counted_outside_quotes(tmp_path):
    text = '"Page","Notes; a; b; c",Clicks\n"https://a.example/","x",1\n'
    source = open_source(files.write_bytes(tmp_path, "x.csv", text.encode()), "x.csv")
    assert source.headers == ("Page", "Notes; a; b; c", "Clicks")
    assert [(row.url, row.clicks) for row in source.rows()] == [("https://a.example/", 1)]


def test_url_only_file_and_extra_columns(tmp_path):
    rows = [["Address", "Title", "Status"], ["https://a.example/", "Home", "200"]]
    source = open_source(files.write_csv(tmp_path, "crawl.txt", rows, delimiter="\t"), "crawl.txt")
    assert source.columns == {"url": "Address"}
    assert list(source.rows()) == [ParsedRow(1, "https://a.example/", None, None, None, None, None)]


@pytest.mark.parametrize(
    ("header", "field"),
    [("Avg. position", "position"), ("Average Position", "position"), ("POSITION MOYENNE", "position"),
     ("Landing page", "url"), ("landing_page", "url"), ("  Jour ", "date"), ("Clics", "clicks"), ("Pages", "url")],
)
def test_header_aliases_in_files(tmp_path, header, field):
    other = "URL" if field != "url" else "Clicks"
    source = open_source(files.write_csv(tmp_path, "x.csv", [[other, header]]), "x.csv")
    assert source.columns[field] == header.strip()


def test_daily_rows_and_empty_metrics(tmp_path):
    rows = [
        ["Date", "Page", "Clicks", "Impressions", "CTR", "Position"],
        ["2024-03-01", "https://a.example/", "3", "", "", ""],
        ["02/03/2024", "https://a.example/", "", "10", "0.5", "2"],
    ]
    source = open_source(files.write_csv(tmp_path, "daily.csv", rows), "daily.csv")
    assert list(source.rows()) == [
        ParsedRow(1, "https://a.example/", date(2024, 3, 1), 3, None, None, None),
        ParsedRow(2, "https://a.example/", date(2024, 3, 2), None, 10, 0.5, 2.0),
    ]


def test_bad_rows_are_reported_and_blank_rows_skipped(tmp_path):
    rows = [
        ["URL", "Clicks", "Impressions", "CTR", "Position", "Date"],
        ["https://a.example/1", "abc", "1", "", "", ""],
        [],
        ["", "", "", "", "", ""],
        ["  ", "5", "", "", "", ""],
        ["https://a.example/2", "1", "-4", "", "", ""],
        ["https://a.example/3", "1", "1", "250%", "", ""],
        ["https://a.example/4", "1", "1", "", "x", ""],
        ["https://a.example/5", "1", "1", "", "", "31/02/2024"],
        ["https://a.example/7", "1", "99999999999999999999", "", "", ""],
        ["https://a.example/6", "1", "1", "", "", ""],
    ]
    source = open_source(files.write_csv(tmp_path, "x.csv", rows), "x.csv")
    assert list(source.rows()) == [
        RowError(1, "clicks 'abc' is not a number"),
        RowError(2, "missing URL"),
        RowError(3, "impressions '-4' is negative"),
        RowError(4, "ctr '250%' is not between 0 and 100 %"),
        RowError(5, "position 'x' is not a number"),
        RowError(6, "date '31/02/2024' is not a date (no such day)"),
        RowError(7, "impressions '99999999999999999999' is too large"),
        ParsedRow(8, "https://a.example/6", None, 1, 1, None, None),
    ]


def _rows_of(path):
    return list(open_source(path, path.name).rows())


def _xlsx(tmp_path):
    return files.write_xlsx(tmp_path, "plain.xlsx", {
        "Report": [
            ["Landing page", "Date", "Clicks", "Impressions", "CTR", "Position"],
            ["https://a.example/1", datetime(2024, 3, 1), 10, 200, 0.05, 3.25],
            [None, None, None, None, None, None],
            ["https://a.example/2", "2024-03-02", "1 234", 5000, "12,3 %", "4,5"],
            [None, None, 7, None, None, None],
            ["https://a.example/3", date(2024, 3, 3), "x", None, None, None],
        ],
        "Other": [["URL"], ["https://ignored.example/"]],
    })


def test_plain_xlsx_reads_first_sheet_with_native_cells(tmp_path):
    source = open_source(_xlsx(tmp_path), "plain.xlsx")
    assert source.kind == "xlsx"
    assert source.columns["url"] == "Landing page"
    assert source.period is None
    assert source.total_rows() == 5  # from the sheet's dimensions, blank row included
    assert list(source.rows()) == [
        ParsedRow(1, "https://a.example/1", date(2024, 3, 1), 10, 200, 0.05, 3.25),
        ParsedRow(2, "https://a.example/2", date(2024, 3, 2), 1234, 5000, pytest.approx(0.123), 4.5),
        RowError(3, "missing URL"),
        RowError(4, "clicks 'x' is not a number"),
    ]


def test_xlsx_stored_under_any_name(tmp_path):
    stored = _xlsx(tmp_path).rename(tmp_path / "upload-7f3a")
    assert len(list(open_source(stored, "plain.xlsx").rows())) == 4


def test_xlsx_header_below_a_title_and_a_wrong_dimension(tmp_path):
    path = files.write_xlsx(tmp_path, "t.xlsx", {"S": [["Exported by SomeTool"], [None], ["URL", "Clicks"],
                                                         ["https://a.example/", 1], ["https://b.example/", 2]]})
    _set_dimension(path, "A1")  # some writers declare just "A1": read everything anyway
    source = open_source(path, "t.xlsx")
    assert source.headers == ("URL", "Clicks")
    assert [(row.number, row.url, row.clicks) for row in source.rows()] == [
        (1, "https://a.example/", 1), (2, "https://b.example/", 2)]


def _set_dimension(path, ref):
    with zipfile.ZipFile(path) as archive:
        parts = {info.filename: archive.read(info) for info in archive.infolist()}
    sheet = parts["xl/worksheets/sheet1.xml"].decode()
    start = sheet.index("<dimension ")
    end = sheet.index("/>", start) + 2
    parts["xl/worksheets/sheet1.xml"] = (sheet[:start] + f'<dimension ref="{ref}"/>' + sheet[end:]).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in parts.items():
            archive.writestr(name, data)


SC_ROWS = [
    ParsedRow(1, "https://example.com/", None, 120, 3400, pytest.approx(0.0353), 4.2),
    ParsedRow(2, "https://example.com/blog/é", None, 7, 90, pytest.approx(0.0778), 11.5),
]


@pytest.mark.parametrize(
    "writer", [files.write_search_console_xlsx, files.write_search_console_zip], ids=["xlsx", "zip"]
)
@pytest.mark.parametrize(
    ("lang", "date_filter", "period"),
    [
        ("en", "2024-02-01 - 2024-02-29", (date(2024, 2, 1), date(2024, 2, 29))),
        ("en", "Feb 1, 2024 - Feb 29, 2024", (date(2024, 2, 1), date(2024, 2, 29))),
        ("fr", "1 févr. 2024 - 29 févr. 2024", (date(2024, 2, 1), date(2024, 2, 29))),
        ("en", "Last 3 months", (date(2024, 1, 1), date(2024, 3, 31))),  # from the Dates table
        ("fr", "3 derniers mois", (date(2024, 1, 1), date(2024, 3, 31))),
    ],
)
def test_search_console_exports(tmp_path, writer, lang, date_filter, period):
    path = writer(tmp_path, lang=lang, date_filter=date_filter)
    source = open_source(path, path.name)
    assert source.kind == "searchconsole"
    assert source.columns["url"] == files.HEADERS[lang][0]
    assert source.period == period
    assert source.total_rows() == 2
    assert list(source.rows()) == SC_ROWS


def test_search_console_zip_as_downloaded(tmp_path):
    """A folder inside the zip, the newer Chart.csv name, macOS junk: still recognised."""
    tables = files.search_console_tables()
    members = {
        f"Performance-2024/{name}.csv": files.csv_text(rows) for name, rows in tables.items() if name != "Dates"
    }
    members["Performance-2024/Chart.csv"] = files.csv_text(tables["Dates"])
    members["__MACOSX/Performance-2024/._Pages.csv"] = b"\x00\x05\x16\x07junk"
    source = open_source(files.write_zip(tmp_path, "export.zip", members), "export.zip")
    assert source.period == (date(2024, 1, 1), date(2024, 3, 31))
    assert list(source.rows()) == SC_ROWS


def test_search_console_period_unknown_without_dates(tmp_path):
    tables = files.search_console_tables()
    del tables["Dates"]
    path = files.write_xlsx(tmp_path, "sc.xlsx", tables)
    source = open_source(path, "sc.xlsx")
    assert (source.kind, source.period) == ("searchconsole", None)


def test_xlsx_with_a_pages_sheet_alone_is_a_plain_workbook(tmp_path):
    sheets = {"Summary": [["URL"], ["https://a.example/"]], "Pages": [["Page"], ["x"]]}
    path = files.write_xlsx(tmp_path, "p.xlsx", sheets)
    source = open_source(path, "p.xlsx")
    assert (source.kind, source.headers) == ("xlsx", ("URL",))


@pytest.mark.parametrize("make", ["csv", "xlsx", "searchconsole"])
def test_skip_resumes_after_the_committed_rows(tmp_path, make):
    rows = [["URL", "Clicks"]]
    for index in range(1, 13):
        rows.append([f"https://a.example/{index}", "oops" if index % 5 == 0 else str(index)])
        if index % 4 == 0:
            rows.append(["", ""])  # blank rows are not numbered
    if make == "csv":
        path = files.write_csv(tmp_path, "x.csv", rows)
    elif make == "xlsx":
        path = files.write_xlsx(tmp_path, "x.xlsx", {"S": rows})
    else:
        tables = files.search_console_tables()
        tables["Pages"] = [["Top pages", "Clicks"], *rows[1:]]
        path = files.write_tables_zip(tmp_path, "sc.zip", tables)
    source = open_source(path, path.name)
    everything = list(source.rows())
    assert [row.number for row in everything] == list(range(1, 13))
    assert everything[4] == RowError(5, "clicks 'oops' is not a number")
    for skip in range(0, 14):
        assert list(source.rows(skip=skip)) == everything[skip:]
