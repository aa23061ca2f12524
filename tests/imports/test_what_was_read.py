"""What a source says it read: the date order per file, columns used and ignored, the sheet, kept notes."""

from datetime import date

import pytest

from imports.formats import ParsedRow, RowError, open_source
from imports.formats.values import DateOrder, decide_date_order
from tests.imports import files


def _source(path, **options):
    return open_source(path, path.name, **options)


# -- the date order ------------------------------------------------------------------------

@pytest.mark.parametrize(("cells", "chosen", "default", "expected"), [
    # One cell that fits one order only decides, wherever it is.
    (["1/2/2026", "1/12/2026", "1/13/2026"], None, "dmy", DateOrder("mdy", "file", "1/13/2026")),
    (["1/2/2026", "13/1/2026", "2/1/2026"], None, "mdy", DateOrder("dmy", "file", "13/1/2026")),
    ([" 12/31/2025 "], None, "dmy", DateOrder("mdy", "file", "12/31/2025")),
    # Only cells that fit both: the default, and the first of them as the example.
    (["1/2/2026", "3/4/2026"], None, "dmy", DateOrder("dmy", "default", "1/2/2026")),
    (["1/2/2026", "3/4/2026"], None, "mdy", DateOrder("mdy", "default", "1/2/2026")),
    # yyyy-mm-dd, Excel dates, empty cells and impossible days decide nothing.
    (["2026-01-13", None, "", 45356, "31/31/2026", "5/6/2026"], None, "dmy", DateOrder("dmy", "default", "5/6/2026")),
    # Without any a/b/yyyy date there is nothing to decide (tests/imports/test_date_order_line.py).
    (["2026-01-13", "2026-01-14"], None, "dmy", DateOrder("dmy", "unambiguous", written="iso")),
    # Repeats of cells that decided nothing (remembered, not checked again) still decide nothing.
    (["3/4/2026", "31/31/2026", "3/4/2026", "31/31/2026", "1/13/2026"], None, "dmy",
     DateOrder("mdy", "file", "1/13/2026")),
    (["3/4/2026", "1/2/2026", "3/4/2026"], None, "mdy", DateOrder("mdy", "default", "3/4/2026")),
    # The import's choice wins over the file.
    (["1/13/2026"], "dmy", "mdy", DateOrder("dmy", "choice", "")),
])
def test_decide_date_order(cells, chosen, default, expected):
    assert decide_date_order(cells, chosen=chosen, default=default) == expected


def test_a_column_of_plain_dates_is_not_read_to_its_end():
    def cells():
        yield from ["2026-01-01"] * 1000
        raise AssertionError("read past the plain dates")

    assert decide_date_order(cells(), chosen=None) == DateOrder("dmy", "unambiguous", written="iso",
                                                                whole_column=False)


US_ROWS = [
    ["Page", "Date", "Clicks"],
    ["https://a.example/", "1/12/2026", "3"],  # January 12
    ["https://a.example/", "1/13/2026", "4"],  # only month first
    ["https://a.example/", "2/1/2026", "5"],   # February 1
]


def test_a_us_file_is_read_month_first_and_says_so(tmp_path):
    source = _source(files.write_csv(tmp_path, "us.csv", US_ROWS))
    assert [row.date for row in source.rows()] == [date(2026, 1, 12), date(2026, 1, 13), date(2026, 2, 1)]
    assert source.summary()["date_order"] == {
        "order": "mdy", "decided_by": "file", "example": "1/13/2026", "written": "", "whole_column": True,
        "text": "Dates read month first (mm/dd/yyyy): '1/13/2026' can only be read that way.",
    }


def test_a_us_workbook_of_text_dates_is_read_month_first(tmp_path):
    source = _source(files.write_xlsx(tmp_path, "us.xlsx", {"Sheet1": US_ROWS}))
    assert [row.date for row in source.rows()] == [date(2026, 1, 12), date(2026, 1, 13), date(2026, 2, 1)]


def test_a_date_against_the_files_order_is_a_bad_row(tmp_path):
    rows = [["Page", "Date"], ["https://a.example/", "1/13/2026"], ["https://a.example/", "13/1/2026"]]
    source = _source(files.write_csv(tmp_path, "mixed.csv", rows))
    assert list(source.rows())[1] == RowError(
        2, "date '13/1/2026' is not a date read month first (mm/dd/yyyy), the order of this import")


def test_an_ambiguous_file_is_read_in_the_default_or_the_chosen_order(tmp_path):
    path = files.write_csv(tmp_path, "either.csv", [["Page", "Date"], ["https://a.example/", "1/12/2026"]])
    default = _source(path)
    assert [row.date for row in default.rows()] == [date(2026, 12, 1)]
    assert default.summary()["date_order"]["text"] == (
        "Dates read day first (dd/mm/yyyy), the default: every date like '1/12/2026' fits either order "
        "(choose the order when importing if that is wrong).")
    assert [row.date for row in _source(path, default_date_order="mdy").rows()] == [date(2026, 1, 12)]
    chosen = _source(path, date_order="mdy")
    assert [row.date for row in chosen.rows()] == [date(2026, 1, 12)]
    assert chosen.summary()["date_order"]["text"] == "Dates read month first (mm/dd/yyyy), as chosen for this import."


def test_resuming_reads_dates_as_the_first_run_did(tmp_path):
    source = _source(files.write_csv(tmp_path, "us.csv", US_ROWS))
    assert [row.date for row in source.rows(skip=2)] == [date(2026, 2, 1)]


# -- columns, sheets, notes ------------------------------------------------------------------

def test_the_summary_lists_the_columns_used_and_ignored(tmp_path):
    rows = [["URL", "Traffic", "Clicks", "Keywords", "", "clicks"], ["https://a.example/", "9", "1", "seo", "", "2"]]
    summary = _source(files.write_csv(tmp_path, "x.csv", rows)).summary()
    assert summary["columns_used"] == [["url", "URL"], ["clicks", "Clicks"]]
    assert summary["columns_ignored"] == ["Traffic", "Keywords", "clicks"]
    assert "sheet" not in summary and "date_order" not in summary


def test_a_workbook_is_read_from_its_first_sheet_with_urls_and_names_it(tmp_path):
    path = files.write_xlsx(tmp_path, "book.xlsx", {
        "Summary": [["Report for ACME"], ["Total clicks", 10]],
        "Data": [["Page", "Clicks"], ["https://a.example/", 3]],
        "Archive": [["URL", "Clicks"], ["https://old.example/", 1]],
    })
    source = _source(path)
    assert [row.url for row in source.rows()] == ["https://a.example/"]
    assert (source.summary()["sheet"], source.summary()["other_sheets"]) == ("Data", ["Summary", "Archive"])
    chosen = _source(path, sheet="archive")  # whatever the case
    assert [row.url for row in chosen.rows()] == ["https://old.example/"]
    assert chosen.summary()["sheet"] == "Archive"


def test_a_search_console_workbook_reads_another_sheet_when_asked(tmp_path):
    tables = files.search_console_tables()
    tables["Extra"] = [["URL", "Clicks"], ["https://example.com/extra", 1]]
    path = files.write_xlsx(tmp_path, "sc.xlsx", tables)
    assert _source(path).summary()["sheet"] == "Pages"
    assert [row.url for row in _source(path, sheet="Extra").rows()] == ["https://example.com/extra"]


@pytest.mark.parametrize("raw", ["-", "–", "n/a", "N/A", ">100", "> 50", "100+", "not ranked"])
def test_a_not_ranked_position_keeps_the_row_with_a_note(tmp_path, raw):
    rows = [["Keyword URL", "URL", "Position", "Clicks"], ["seo", "https://a.example/", raw, "4"]]
    (row,) = _source(files.write_csv(tmp_path, "rank.csv", rows)).rows()
    assert row == ParsedRow(1, "https://a.example/", None, 4, None, None, None,
                            (f"position '{raw}' is not a rank: row kept without a position",))


def test_a_bad_position_is_still_a_bad_row(tmp_path):
    rows = [["URL", "Position"], ["https://a.example/", "first"]]
    assert list(_source(files.write_csv(tmp_path, "rank.csv", rows)).rows()) == [
        RowError(1, "position 'first' is not a number")]


@pytest.mark.parametrize(("value", "ids"), [
    ("dmy", []), ("mdy", []), ("ymd", ["imports.E001"]), ("", ["imports.E001"]),
])
def test_the_date_order_setting_is_checked(value, ids):
    from imports.checks import date_order_errors

    assert [error.id for error in date_order_errors(value)] == ids
