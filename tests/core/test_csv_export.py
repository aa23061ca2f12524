"""seoinsight.csvexport: OWASP's rule for CSV injection, cell by cell, through a real csv round trip."""

import csv
import io
from datetime import date
from decimal import Decimal

import pytest

from seoinsight import csvexport


@pytest.mark.parametrize(("value", "written"), [
    ('=HYPERLINK("http://127.0.0.1/?leak="&B2,"open")', '\'=HYPERLINK("http://127.0.0.1/?leak="&B2,"open")'),
    ("+1+cmd|' /C calc'!A0", "'+1+cmd|' /C calc'!A0"),
    ("@SUM(1+1)", "'@SUM(1+1)"),
    ("-2+3", "'-2+3"),
    ("\t=1+1", "'\t=1+1"),
    ("\r=1+1", "'\r=1+1"),
    ("-", "'-"),
    ("seo audit", "seo audit"),
    ("a=b", "a=b"),
    ("", ""),
    (-2, "-2"),  # numbers the code writes stay numbers, negative ones too
    (-95.1, "-95.1"),
    (Decimal("-0.5"), "-0.5"),
    (date(2026, 5, 1), "2026-05-01"),
    (None, ""),
])
def test_each_cell_is_written_so_that_no_spreadsheet_runs_it(value, written):
    buffer = io.StringIO(newline="")
    out = csvexport.writer(buffer)
    out.writerow(["before", value])
    out.writerows([[value]])

    rows = list(csv.reader(io.StringIO(buffer.getvalue(), newline="")))

    assert rows == [["before", written], [written]]


def test_the_download_is_utf8_csv_saved_under_its_name():
    response, out = csvexport.download("acme.example-20260501-20260507.csv")
    out.writerow(["Requête", "=1"])

    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="acme.example-20260501-20260507.csv"'
    assert response.content.decode("utf-8") == "Requête,'=1\r\n"
