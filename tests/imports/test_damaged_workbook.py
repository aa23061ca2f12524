"""A damaged .xlsx is named as what the user uploaded, an Excel workbook, never "the zip archive"."""

import html

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from imports.models import Import
from tests.imports import files

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]

ROWS = [["Top pages", "Clicks", "Date"], ["https://acme.example/a", 3, "2026-10-01"]]


def cut_short(data: bytes) -> bytes:
    return data[:len(data) // 2]


def directory_garbled(data: bytes) -> bytes:
    # The end record still points at the directory, whose entries are no longer entries.
    start = data.index(b"PK\x01\x02")
    return data[:start] + b"\x00" * 4 + data[start + 4:]


@pytest.mark.parametrize("damage, why", [
    (cut_short, "it is cut short: its end record is missing"),
    (directory_garbled, "Bad magic number for central directory"),
])
def test_a_damaged_xlsx_upload_is_called_a_damaged_excel_workbook(client, member, target, tmp_path, damage, why):
    workbook = files.write_xlsx(tmp_path, "clicks.xlsx", {"Pages": ROWS}).read_bytes()
    response = client.post("/imports/", {"file": SimpleUploadedFile("clicks.xlsx", damage(workbook)),
                                         "site_target": target.pk})
    page = html.unescape(response.content.decode())
    assert response.status_code == 200
    assert f"The Excel workbook is damaged ({why}): open it in Excel and save it again, or export it again" in page
    assert "zip archive" not in page
    assert not Import.objects.exists()


def test_a_damaged_zip_upload_is_still_a_damaged_zip_archive(client, member, target, tmp_path):
    workbook = files.write_xlsx(tmp_path, "export.zip", {"Pages": ROWS}).read_bytes()
    response = client.post("/imports/", {"file": SimpleUploadedFile("export.zip", cut_short(workbook)),
                                         "site_target": target.pk})
    assert "The zip archive is damaged (it is cut short: its end record is missing): download it again" in (
        html.unescape(response.content.decode()))
