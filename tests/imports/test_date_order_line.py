"""The date-order line claims a day-first or month-first reading only where an a/b/yyyy date was read that way."""

from datetime import datetime

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from imports.formats import open_source
from imports.formats.values import PLAIN_DATES_SCANNED, DateOrder, decide_date_order
from imports.models import Import
from tests.imports import files
from tests.support.processes import run_burst

ISO_LINE = "Dates written yyyy-mm-dd (ISO): unambiguous, no day-first or month-first reading was needed."


@pytest.mark.parametrize(("cells", "expected"), [
    (["2026-01-13", "2026-01-14 10:00:00"], DateOrder("dmy", "unambiguous", written="iso")),
    ([datetime(2026, 1, 13), 45356], DateOrder("dmy", "unambiguous", written="excel")),
    (["2026-01-13", datetime(2026, 1, 14)], DateOrder("dmy", "unambiguous", written="iso+excel")),
    # An a/b/yyyy date among them is what the order is for.
    (["2026-01-13", "3/4/2026"], DateOrder("dmy", "default", "3/4/2026")),
    (["2026-01-13", "1/13/2026"], DateOrder("mdy", "file", "1/13/2026")),
    # No date at all: nothing written either way, the default is only what would apply.
    (["yesterday", None, ""], DateOrder("dmy", "default", "")),
    ([], DateOrder("dmy", "default", "")),
])
def test_which_dates_need_an_order(cells, expected):
    assert decide_date_order(cells, chosen=None) == expected


@pytest.mark.parametrize(("order", "line"), [
    (DateOrder("dmy", "unambiguous", written="iso"), ISO_LINE),
    (DateOrder("mdy", "unambiguous", written="excel"),
     "Dates stored as Excel dates: unambiguous, no day-first or month-first reading was needed."),
    (DateOrder("dmy", "unambiguous", written="iso+excel"),
     "Dates written yyyy-mm-dd (ISO) or stored as Excel dates: unambiguous, no day-first or month-first reading was "
     "needed."),
    (DateOrder("mdy", "unambiguous", written="iso", whole_column=False),
     f"The first {PLAIN_DATES_SCANNED:,} dates are written yyyy-mm-dd (ISO): unambiguous; a date written dd/mm or "
     "mm/dd further down would be read month first (mm/dd/yyyy), the default."),
    (DateOrder("dmy", "default", ""), "Dates read day first (dd/mm/yyyy), the default (the file's dates are not "
                                      "written dd/mm or mm/dd)."),
])
def test_the_line(order, line):
    assert order.describe() == line


def test_an_iso_file_says_its_dates_were_iso_and_claims_no_order(tmp_path):
    rows = [["Page", "Date", "Clicks"], ["https://a.example/", "2026-01-12", "3"], ["https://a.example/", "2026-01-13", "4"]]
    text = open_source(files.write_csv(tmp_path, "iso.csv", rows), "iso.csv").summary()["date_order"]["text"]
    assert text == ISO_LINE
    assert "day first" not in text and "month first" not in text


def test_a_long_iso_file_says_how_far_it_was_checked(tmp_path):
    rows = [["Page", "Date"], *[["https://a.example/", "2026-01-12"]] * (PLAIN_DATES_SCANNED + 5)]
    source = open_source(files.write_csv(tmp_path, "long.csv", rows), "long.csv")
    assert source.summary()["date_order"]["text"].startswith(f"The first {PLAIN_DATES_SCANNED:,} dates are written "
                                                              "yyyy-mm-dd (ISO): unambiguous;")


def test_a_workbook_of_date_cells_says_so(tmp_path):
    path = files.write_xlsx(tmp_path, "dates.xlsx", {"Data": [["Page", "Date"], ["https://a.example/",
                                                                                  datetime(2026, 1, 12)]]})
    assert open_source(path, "dates.xlsx").summary()["date_order"]["text"] == (
        "Dates stored as Excel dates: unambiguous, no day-first or month-first reading was needed.")


@pytest.mark.django_db
@pytest.mark.usefixtures("media")
def test_the_import_page_and_the_upload_say_it_too(client, member, target):
    content = b"Page,Clicks,Date\nhttps://acme.example/a,1,2026-11-01\nhttps://acme.example/b,2,2026-11-02\n"
    response = client.post("/imports/", {"file": SimpleUploadedFile("iso.csv", content), "site_target": target.pk},
                           follow=True)
    assert "fits both day first and month first" not in response.content.decode()  # no warning at upload
    run_burst()
    page = client.get(f"/imports/{Import.objects.get().pk}/").content.decode()
    assert f"<li>{ISO_LINE}</li>" in page and "Dates read day first" not in page
