"""What is wrong with a file is said at upload, before anything is queued; the report says what was read."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from imports.models import Import, ImportStatus
from jobs.models import Job
from tests.imports import files
from tests.support.processes import run_burst

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]

PAGES_TABLE = b"Top pages,Clicks,Impressions,CTR,Position\nhttps://acme.example/a,3,40,7.5%,4.2\n"


def upload(client, target, name, content, **fields):
    data = {"file": SimpleUploadedFile(name, content), "site_target": target.pk, **fields}
    return client.post("/imports/", data)


def assert_nothing_queued(media):
    assert not Import.objects.exists() and not Job.objects.exists()
    assert not media.exists() or not any(path.is_file() for path in media.rglob("*"))


def test_a_pages_table_without_a_period_is_asked_for_its_period(client, member, target, media):
    response = upload(client, target, "Pages.csv", PAGES_TABLE)
    assert response.status_code == 200
    assert ("The file has no Date column and does not say which period its figures cover "
            "(a Search Console “Pages” table, say): give the period below.") in response.content.decode()
    assert_nothing_queued(media)

    response = upload(client, target, "Pages.csv", PAGES_TABLE, period_start="2026-10-01", period_end="2026-10-31")
    assert response.status_code == 302
    assert Import.objects.get().period_start.isoformat() == "2026-10-01"


def test_a_search_console_export_with_its_period_inside_needs_none(client, member, target, tmp_path):
    path = files.write_search_console_zip(tmp_path)
    assert upload(client, target, "export.zip", path.read_bytes()).status_code == 302


@pytest.mark.parametrize(("name", "content", "message"), [
    ("photo.csv", b"\x89PNG\r\n\x1a\n" + bytes(200), "This is a PNG image"),
    ("dump.csv", bytes(range(256)) * 40, "This is not a text or spreadsheet file (it holds binary data)"),
])
def test_a_file_that_cannot_be_imported_is_refused_at_upload(client, member, target, media, name, content, message):
    response = upload(client, target, name, content, period_start="2026-10-01", period_end="2026-10-31")
    assert response.status_code == 200
    assert message in response.content.decode()
    assert_nothing_queued(media)


def test_a_file_without_a_known_url_column_goes_to_mapping_and_queues_nothing(client, member, target, media):
    response = upload(client, target, "Pages.csv", b"Foo,Bar\n1,2\n", period_start="2026-10-01",
                      period_end="2026-10-31")
    assert response.status_code == 302 and "/imports/map/" in response["Location"]
    assert not Import.objects.exists()


def test_a_password_protected_workbook_is_refused_as_such(client, member, target, media, tmp_path):
    locked = files.write_compound_file(tmp_path, "locked.xlsx", ["EncryptionInfo", "EncryptedPackage"])
    response = upload(client, target, "locked.xlsx", locked.read_bytes())
    assert "This Excel file is password-protected" in response.content.decode()
    assert_nothing_queued(media)


def test_the_sheet_is_checked_and_kept(client, member, target, media, tmp_path):
    book = files.write_xlsx(tmp_path, "book.xlsx", {
        "Summary": [["Total", 3]], "Data": [["Page", "Date", "Clicks"], ["https://acme.example/a", "2026-10-01", 3]]})
    response = upload(client, target, "book.xlsx", book.read_bytes(), sheet="Dtaa")
    assert "The workbook has no sheet &#x27;Dtaa&#x27;: its sheets are &#x27;Summary&#x27;, &#x27;Data&#x27;" in (
        response.content.decode())
    assert_nothing_queued(media)

    assert upload(client, target, "book.xlsx", book.read_bytes(), sheet="Data", date_order="mdy").status_code == 302
    assert Import.objects.values_list("sheet", "date_order").get() == ("Data", "mdy")


def test_a_sheet_for_a_csv_is_refused(client, member, target, media):
    response = upload(client, target, "Pages.csv", b"URL,Date\nhttps://acme.example/a,2026-10-01\n", sheet="Data")
    assert "Only an Excel workbook has sheets" in response.content.decode()
    assert_nothing_queued(media)


def test_the_report_says_what_was_read_and_what_was_kept_without_a_value(client, member, target, tmp_path):
    rows = [["Tags", "URL", "Position", "Traffic", "Date"],
            ["seo", "https://acme.example/a", "-", "12", "1/13/2026"],
            ["crm", "https://acme.example/b", ">100", "3", "1/14/2026"],
            ["erp", "https://acme.example/c", "4", "3", "1/14/2026"]]
    book = files.write_xlsx(tmp_path, "ranks.xlsx", {"Notes": [["made by hand"]], "Ranks": rows})
    assert upload(client, target, "ranks.xlsx", book.read_bytes()).status_code == 302
    run_burst(max_jobs=1)

    imp = Import.objects.get()
    assert imp.status == ImportStatus.DONE, imp.error
    assert (imp.read, imp.inserted, imp.errors) == (3, 3, 0)
    assert list(imp.metrics.order_by("url").values_list("position", flat=True)) == [None, None, 4.0]
    assert imp.metrics.get(url="https://acme.example/a").period_start.isoformat() == "2026-01-13"

    content = client.get(f"/imports/{imp.pk}/").content.decode()
    for line in ["Sheet read: &#x27;Ranks&#x27; (the workbook also has &#x27;Notes&#x27;).",
                 "Columns used: &#x27;URL&#x27; as URL, &#x27;Position&#x27; as position, &#x27;Date&#x27; as date.",
                 "Columns ignored: &#x27;Tags&#x27;, &#x27;Traffic&#x27;.",
                 "Dates read month first (mm/dd/yyyy): &#x27;1/13/2026&#x27; can only be read that way.",
                 "<td>position &#x27;-&#x27; is not a rank: row kept without a position</td><td class=\"num\">1</td>",
                 "<td>position &#x27;&gt;100&#x27; is not a rank: row kept without a position</td>"]:
        assert line in content, content[content.find("What was read"):content.find("What was read") + 1500]


def test_dates_that_fit_both_orders_are_queued_with_a_warning(client, member, target):
    ambiguous = b"URL,Date,Clicks\nhttps://acme.example/a,1/12/2026,3\nhttps://acme.example/b,2/12/2026,4\n"
    response = upload(client, target, "monthly.csv", ambiguous)
    assert response.status_code == 302
    page = client.get("/imports/").content.decode()
    assert ("Every date at the top of “monthly.csv” (such as 1/12/2026) fits both day first and month first: "
            "unless a date further down settles it, it is read day first (dd/mm/yyyy).") in page

    settled = b"URL,Date\nhttps://acme.example/a,1/12/2026\nhttps://acme.example/a,1/13/2026\n"
    upload(client, target, "us.csv", settled)
    chosen = upload(client, target, "chosen.csv", ambiguous, date_order="mdy")
    assert chosen.status_code == 302
    assert "fits both day first and month first" not in client.get("/imports/").content.decode()


def test_a_large_upload_spooled_to_disk_is_checked_the_same_way(client, member, target, media, settings):
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 1000  # spooled to a temporary file, not kept in memory
    big = PAGES_TABLE + b"".join(b"https://acme.example/p%d,1,10,10%%,3.2\n" % i for i in range(2000))
    response = upload(client, target, "Pages.csv", big)
    assert "give the period below" in response.content.decode()
    assert_nothing_queued(media)
    assert upload(client, target, "Pages.csv", big, period_start="2026-10-01",
                  period_end="2026-10-31").status_code == 302
    assert (media / Import.objects.get().file.name).read_bytes() == big
