"""Hostile uploads cost a bounded amount: an XLSX bomb, a zip of thousands of files, a header of 100,000 columns.

The upload's check reads a bounded look at the file (IMPORT_UPLOAD_CHECK_BYTES); the job reads it whole,
within the archive's bounds (members, ratio, size) and the shared strings' count. Assertions are on what
was read and what was said, never on time.
"""

import io
import struct
from contextlib import contextmanager

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from imports.formats import UnreadableFile, look, open_source
from imports.models import Import, ImportStatus
from imports.services import create_import
from jobs.models import Job
from tests.imports import files
from tests.support.processes import run_burst

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]

ROWS = [["Top pages", "Clicks", "Date"], ["https://acme.example/a", 3, "2026-10-01"]]


def upload(client, target, name, content, **fields):
    data = {"file": SimpleUploadedFile(name, content), "site_target": target.pk, **fields}
    return client.post("/imports/", data)


def nothing_queued():
    return not Import.objects.exists() and not Job.objects.exists()


class CountingFile(io.BytesIO):
    """The upload's bytes, counting what is read of them."""

    def __init__(self, data: bytes, counter: list[int]):
        super().__init__(data)
        self._counter = counter

    def read(self, size=-1):
        data = super().read(size)
        self._counter[0] += len(data)
        return data

    def readinto(self, buffer):
        read = super().readinto(buffer)
        self._counter[0] += read
        return read


def counting_opener(data: bytes):
    counter = [0]

    @contextmanager
    def opener():
        with CountingFile(data, counter) as file:
            yield file

    return opener, counter


# --- 1. the XLSX bomb ---------------------------------------------------------------------------------------------

def test_an_xlsx_bomb_is_refused_at_upload_before_anything_is_inflated(client, member, target, tmp_path):
    # 34 MB of shared strings in 88 KB: before the fix the request inflated and parsed all 2,000,000 of them.
    bomb = files.write_shared_strings_bomb(tmp_path, "bomb.xlsx", ROWS, filler=2_000_000)
    response = upload(client, target, "bomb.xlsx", bomb.read_bytes())
    assert response.status_code == 200
    page = response.content.decode()
    assert "The workbook unpacks to 34.0 MB from" in page
    assert "more than 100 times its size" in page
    assert nothing_queued()


def test_the_ratio_is_checked_from_the_directory_alone(tmp_path):
    bomb = files.write_shared_strings_bomb(tmp_path, "bomb.xlsx", ROWS, filler=2_000_000)
    with look.bounded(1_000_000) as seen, pytest.raises(UnreadableFile, match="more than 100 times its size"):
        open_source(bomb, "bomb.xlsx")
    assert seen.read == 0  # not one byte inflated


def test_a_workbook_too_big_to_check_at_upload_is_queued_and_its_job_says_why(client, member, target, tmp_path,
                                                                               settings):
    # Within the ratio, but more shared strings than the check may read: the request stops at its look,
    # queues the file, and the job reads it whole, counting the strings.
    settings.IMPORT_MAX_ZIP_RATIO = 1000
    settings.IMPORT_UPLOAD_CHECK_BYTES = 1_000_000
    settings.IMPORT_MAX_SHARED_STRINGS = 100_000
    bomb = files.write_shared_strings_bomb(tmp_path, "big.xlsx", ROWS, filler=200_000)
    response = upload(client, target, "big.xlsx", bomb.read_bytes())
    assert response.status_code == 302
    notice = client.get("/imports/").content.decode()
    assert "is too large to check at upload (its first 1.0 MB were read)" in notice
    run_burst(max_jobs=1)
    imp = Import.objects.get()
    assert imp.status == ImportStatus.FAILED
    assert imp.error == ("ImportRejected: the workbook holds more than 100,000 distinct texts (shared strings), "
                         "the most an import reads")


def test_the_look_reads_no_more_than_its_bound(tmp_path, settings):
    settings.IMPORT_MAX_ZIP_RATIO = 1000
    bomb = files.write_shared_strings_bomb(tmp_path, "big.xlsx", ROWS, filler=200_000)
    with look.bounded(1_000_000) as seen, pytest.raises(look.LookExhausted):
        open_source(bomb, "big.xlsx")
    assert 1_000_000 <= seen.read <= 1_000_000 + look.CHUNK_BYTES


def test_shared_strings_are_counted_as_they_are_read(tmp_path, settings):
    settings.IMPORT_MAX_ZIP_RATIO = 1000
    settings.IMPORT_MAX_SHARED_STRINGS = 20_000
    ok = files.write_shared_strings_bomb(tmp_path, "ok.xlsx", ROWS, filler=20_000)
    assert [row.url for row in open_source(ok, "ok.xlsx", date_order="dmy").rows()] == ["https://acme.example/a"]
    over = files.write_shared_strings_bomb(tmp_path, "over.xlsx", ROWS, filler=30_000)
    with pytest.raises(UnreadableFile, match=r"more than 20,000 distinct texts \(shared strings\)"):
        open_source(over, "over.xlsx")


def test_all_members_together_are_bounded_too(tmp_path, settings):
    settings.IMPORT_MAX_ZIP_RATIO = 1000
    table = "Top pages,Clicks\n" + "https://acme.example/a,1\n" * 60_000  # 1.5 MB each, under the 2 MB limit
    path = files.write_zip(tmp_path, "two.zip", {"Pages.csv": table, "Queries.csv": table})
    with pytest.raises(UnreadableFile, match=r"^the zip unpacks to 3\.0 MB, over the 2\.0 MB limit$"):
        open_source(path, "two.zip", max_unzipped_bytes=2_000_000)


def test_a_row_of_more_cells_than_excel_holds_is_refused_before_it_is_built(tmp_path):
    path = files.write_wide_row_xlsx(tmp_path, "wide.xlsx", ROWS, cells=40_000)
    with pytest.raises(UnreadableFile, match="^a row of 'xl/worksheets/sheet1.xml' in the workbook holds more than "
                                             "16,384 cells, Excel's widest: it was not written by a spreadsheet$"):
        open_source(path, "wide.xlsx", date_order="dmy")  # its first rows are read for the header


def test_rows_as_wide_as_excel_s_and_empty_rows_are_read(tmp_path):
    path = files.write_wide_row_xlsx(tmp_path, "wide.xlsx", ROWS + [[None]] * 3, cells=16_384)
    source = open_source(path, "wide.xlsx", date_order="dmy")
    assert [row.number for row in source.rows()] == [1, 2]  # the wide row's URL cell is 1: a row error


# --- 2. a zip of thousands of members -----------------------------------------------------------------------------

def test_a_zip_of_thousands_of_files_is_refused_at_upload(client, member, target, tmp_path):
    path = files.write_many_members_zip(tmp_path, "export.zip", 5000)
    response = upload(client, target, "export.zip", path.read_bytes())
    assert response.status_code == 200
    assert "The zip holds 5,001 files; an import reads at most 1,000." in response.content.decode()
    assert nothing_queued()


def test_the_member_count_is_read_from_the_end_record_before_the_directory(tmp_path):
    data = files.write_many_members_zip(tmp_path, "export.zip", 5000).read_bytes()
    directory = len(data) - data.index(b"PK\x01\x02")
    opener, read = counting_opener(data)
    with pytest.raises(UnreadableFile, match="holds 5,001 files"):
        open_source(opener, "export.zip")
    assert directory > 250_000 and read[0] < 70_000  # the end record's tail, never the directory


def test_past_65_535_members_the_zip64_end_record_is_read(tmp_path):
    data = files.write_many_members_zip(tmp_path, "export.zip", 70_000).read_bytes()
    assert b"PK\x06\x06" in data[-200:]  # the count is in the ZIP64 record, the classic one says 0xFFFF
    opener, read = counting_opener(data)
    with pytest.raises(UnreadableFile, match="^the zip holds 70,001 files; an import reads at most 1,000$"):
        open_source(opener, "export.zip")
    assert read[0] < 70_000


def test_a_directory_larger_than_its_declared_count_is_refused(tmp_path):
    # zipfile reads the directory by its size, whatever count the end record gives: both are bounded.
    data = bytearray(files.write_many_members_zip(tmp_path, "export.zip", 5000).read_bytes())
    end = data.rindex(b"PK\x05\x06")
    struct.pack_into("<HH", data, end + 8, 1, 1)
    opener, read = counting_opener(bytes(data))
    with pytest.raises(UnreadableFile, match=r"^the zip archive is damaged \(its directory is \d+\.\d KB, too large for 1 file\)"):
        open_source(opener, "export.zip")
    assert read[0] < 70_000


def test_a_zip_within_the_cap_is_read(tmp_path, settings):
    settings.IMPORT_MAX_ZIP_MEMBERS = 5001
    path = files.write_many_members_zip(tmp_path, "export.zip", 5000)
    source = open_source(path, "export.zip", date_order="dmy")
    assert [row.url for row in source.rows()] == ["https://example.com/", "https://example.com/blog/é"]


# --- 3. a header of 100,000 columns -------------------------------------------------------------------------------

def wide_csv(columns: int) -> bytes:
    return (",".join(f"c{n}" for n in range(columns)) + "\n" + ",".join("1" * columns) + "\n").encode()


def test_a_header_past_the_column_cap_is_refused_in_plain_words(client, member, target):
    response = upload(client, target, "wide.csv", wide_csv(1000), period_start="2026-10-01",
                      period_end="2026-10-31")
    assert response.status_code == 200  # not sent on to a mapping page of 1,000 columns
    assert ("The header row has 1,000 columns; an import considers at most 500 (no export has more)."
            in response.content.decode())
    assert nothing_queued()


def test_a_header_line_of_110_000_columns_is_not_parsed(client, member, target):
    response = upload(client, target, "wide.csv", wide_csv(110_000), period_start="2026-10-01",
                      period_end="2026-10-31")
    assert response.status_code == 200
    assert ("A line near the top is longer than 131,072 characters: no export&#x27;s header is that long."
            in response.content.decode())
    assert nothing_queued()


def test_the_job_records_the_column_cap(target, tmp_path):
    # As mail intake does: stored and queued without the form's check.
    path = files.write_bytes(tmp_path, "wide.csv", wide_csv(1000))
    with path.open("rb") as content:
        from django.core.files import File
        create_import(site_target=target, content=File(content, name="wide.csv"), filename="wide.csv",
                      size=path.stat().st_size, period_start="2026-10-01", period_end="2026-10-31")
    run_burst(max_jobs=1)
    imp = Import.objects.get()
    assert imp.status == ImportStatus.FAILED
    assert imp.error == "ImportRejected: the header row has 1,000 columns; an import considers at most 500 (no export has more)"


def test_trailing_empty_headers_do_not_count(tmp_path):
    data = b"Top pages,Clicks" + b"," * 2000 + b"\nhttps://acme.example/a,3\n"
    source = open_source(files.write_bytes(tmp_path, "x.csv", data), "x.csv")
    assert source.columns == {"url": "Top pages", "clicks": "Clicks"}


def test_the_upload_form_states_the_column_cap(client, member, target):
    assert "at most 500 columns" in client.get("/imports/").content.decode()
