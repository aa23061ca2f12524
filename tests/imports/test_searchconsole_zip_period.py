"""A Search Console export says which period it was read as, and from which of its tables; a .zip is "ZIP"."""

from datetime import date
from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management.base import OutputWrapper

from imports.cli import print_report
from imports.models import Import, ImportKind, ImportStatus, UrlMetric
from tests.factories import ImportFactory
from tests.imports import files
from tests.support.processes import run_burst

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]


@pytest.fixture
def target_domain():
    return "example.com"  # the URLs of files.search_console_tables


def upload(client, target, path):
    response = client.post("/imports/", {"file": SimpleUploadedFile(path.name, path.read_bytes()),
                                         "site_target": target.pk})
    assert response.status_code == 302, response.content.decode()[:2000]
    run_burst()
    imp = Import.objects.get(original_filename=path.name)
    assert imp.status == ImportStatus.DONE, imp.error
    return imp


@pytest.mark.parametrize(("date_filter", "shown", "read_from"), [
    ("2024-02-01 - 2024-02-29", ("2024-02-01", "2024-02-29"), "Filters.csv"),
    ("Feb 1, 2024 - Feb 29, 2024", ("2024-02-01", "2024-02-29"), "Filters.csv"),
    ("Last 3 months", ("2024-01-01", "2024-03-31"), "the first and last day of Dates.csv"),
])
def test_a_zip_shows_zip_and_the_period_it_was_read_as(client, member, target, tmp_path, date_filter, shown,
                                                       read_from):
    imp = upload(client, target, files.write_search_console_zip(tmp_path, "Performance.zip",
                                                                date_filter=date_filter))
    assert imp.kind == ImportKind.ZIP
    assert set(UrlMetric.objects.values_list("period_start", "period_end")) == {
        (date.fromisoformat(shown[0]), date.fromisoformat(shown[1]))}

    page = client.get(f"/imports/{imp.pk}/").content.decode()
    assert "<dd data-format>ZIP · Search Console export · upload" in page
    assert (f'<dd data-period>{shown[0]} → {shown[1]} <span class="muted small">read from {read_from}</span>'
            in page)
    listing = client.get("/imports/").content.decode()
    assert f"<div class=\"small muted\" data-format>ZIP · Search Console export · {shown[0]} → {shown[1]}</div>" in (
        listing)


def test_a_zip_as_downloaded_names_the_table_its_period_came_from(client, member, target, tmp_path):
    """A folder inside the zip and the newer Chart.csv: the period is Chart.csv's first and last day."""
    tables = files.search_console_tables()
    members = {f"Performance-2024/{name}.csv": files.csv_text(rows) for name, rows in tables.items()
               if name != "Dates"}
    members["Performance-2024/Chart.csv"] = files.csv_text(tables["Dates"])
    imp = upload(client, target, files.write_zip(tmp_path, "export.zip", members))
    page = client.get(f"/imports/{imp.pk}/").content.decode()
    assert "2024-01-01 → 2024-03-31 <span class=\"muted small\">read from the first and last day of Chart.csv" in page


def test_a_workbook_export_names_its_sheet(client, member, target, tmp_path):
    path = files.write_search_console_xlsx(tmp_path, "Performance.xlsx", date_filter="2024-02-01 - 2024-02-29")
    imp = upload(client, target, path)
    assert imp.kind == ImportKind.XLSX
    page = client.get(f"/imports/{imp.pk}/").content.decode()
    assert "<dd data-format>Excel · Search Console export · upload" in page
    assert "2024-02-01 → 2024-02-29 <span class=\"muted small\">read from the sheet &#x27;Filters&#x27;</span>" in page


def test_a_period_given_with_the_import_says_so(client, member, target, tmp_path):
    path = files.write_csv(tmp_path, "pages.csv", [["Page", "Clicks"], ["https://example.com/", "3"]])
    imp = ImportFactory(site_target=target, path=path, period=(date(2024, 5, 1), date(2024, 5, 31)))
    run_burst()
    page = client.get(f"/imports/{imp.pk}/").content.decode()
    assert "<dd data-format>CSV · upload" in page
    assert '2024-05-01 → 2024-05-31 <span class="muted small">given with the import</span>' in page


def test_the_commands_report_says_the_period_and_where_it_was_read(client, member, target, tmp_path):
    """What importfile and importapi print once the import ended (imports.cli.print_report)."""
    imp = upload(client, target, files.write_search_console_zip(tmp_path, "Performance.zip",
                                                                date_filter="2024-02-01 - 2024-02-29"))
    out = StringIO()
    print_report(OutputWrapper(out), imp.job, imp.pk)
    assert "  Period: 2024-02-01 to 2024-02-29, read from Filters.csv.\n" in out.getvalue()
