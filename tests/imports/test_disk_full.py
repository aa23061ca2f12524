"""A full disk under MEDIA_ROOT during an upload: a clear answer, nothing left behind, the next upload works.

The disk is a real 1 MB tmpfs mounted for the test; "freeing space" is the
partial file not being there, or the tmpfs grown in place.
"""

import hashlib

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from imports.models import Import, ImportStatus
from imports.services import OUT_OF_SPACE
from tests.factories import UserFactory
from tests.support.processes import ManagedProcess, process_env, run_burst
from tests.support.tmpfs import mounted_tmpfs


def export(size: int) -> bytes:
    rows, total = [b"Page,Clicks,Impressions,CTR,Position,Date"], 0
    while total < size:
        rows.append(b"https://acme.example/p%d,1,10,10%%,3.2,2024-05-01" % len(rows))
        total += len(rows[-1]) + 1
    return b"\n".join(rows) + b"\n"


def upload(client, target, name: str, content: bytes):
    return client.post("/imports/", {"file": SimpleUploadedFile(name, content, content_type="text/csv"),
                                     "site_target": target.pk})


def test_a_full_disk_answers_507_and_keeps_nothing_then_the_next_upload_is_imported(client, member, target,
                                                                                     media_tmpfs):
    disk = media_tmpfs

    response = upload(client, target, "Big.csv", export(1_500_000))
    assert response.status_code == 507
    assert "The server is out of disk space; nothing was imported." in response.content.decode()
    assert not Import.objects.exists() and disk.files() == []

    small = export(40_000)
    response = upload(client, target, "Small.csv", small)
    assert response.status_code == 302
    imp = Import.objects.get()
    assert (imp.original_filename, imp.size) == ("Small.csv", len(small))
    assert disk.files() == [disk.path / imp.file.name] and (disk.path / imp.file.name).read_bytes() == small
    run_burst()
    imp.refresh_from_db()
    assert (imp.status, imp.inserted) == (ImportStatus.DONE, small.count(b"\n") - 1)


def test_a_full_spool_disk_answers_507_even_when_csrf_reads_the_body_first(target, media, settings, tmp_path):
    """A large upload is spooled to FILE_UPLOAD_TEMP_DIR while the CSRF middleware reads the form, before any view."""
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 64 * 1024
    client = Client(enforce_csrf_checks=True)
    client.force_login(UserFactory(username="ana", org=target.site.org))
    client.get("/imports/")
    token = client.cookies["csrftoken"].value
    with mounted_tmpfs(tmp_path / "spool", "1m") as spool:
        settings.FILE_UPLOAD_TEMP_DIR = str(spool.path)
        response = client.post("/imports/", {
            "site_target": target.pk, "file": SimpleUploadedFile("Big.csv", export(1_500_000), "text/csv"),
        }, headers={"X-CSRFToken": token})
        assert response.status_code == 507
        assert "The server is out of disk space; nothing was imported." in response.content.decode()
        assert spool.files() == [] and not Import.objects.exists()

        small = export(200_000)  # spooled too, and it fits
        response = client.post("/imports/", {
            "site_target": target.pk, "file": SimpleUploadedFile("Small.csv", small, "text/csv"),
        }, headers={"X-CSRFToken": token})
        assert response.status_code == 302
        assert (settings.MEDIA_ROOT / Import.objects.get().file.name).read_bytes() == small
        settings.FILE_UPLOAD_TEMP_DIR = None


def test_importfile_on_a_full_disk_says_so_in_one_line_and_exits_non_zero(transactional_db, target, tmp_path,
                                                                          media_tmpfs):
    disk = media_tmpfs
    big, small = tmp_path / "Big.csv", tmp_path / "Small.csv"
    big.write_bytes(export(1_500_000))
    small.write_bytes(export(40_000))
    env = process_env(MEDIA_ROOT=str(disk.path), LOG_LEVEL="WARNING")

    command = ManagedProcess("importfile", str(big), "--target", str(target.pk), env=env)
    assert command.wait(timeout=60) != 0
    assert command.output().strip().splitlines() == [f"CommandError: {OUT_OF_SPACE}"]
    assert not Import.objects.exists() and disk.files() == []

    command = ManagedProcess("importfile", str(small), "--target", str(target.pk), env=env)
    assert command.wait(timeout=60) == 0, command.output()
    imp = Import.objects.get()
    assert (disk.path / imp.file.name).read_bytes() == small.read_bytes()


def test_an_import_whose_stored_file_was_cut_short_is_refused_not_read(client, member, target, media):
    content = export(20_000)
    assert upload(client, target, "Pages.csv", content).status_code == 302
    imp = Import.objects.get()
    (media / imp.file.name).write_bytes(content[:8192])  # as a pre-fix full disk left it

    run_burst()

    imp.refresh_from_db()
    assert imp.status == ImportStatus.FAILED and imp.inserted == 0
    assert f"8,192 bytes instead of {len(content):,}" in imp.error and "upload the file again" in imp.error


@pytest.mark.parametrize("spooled", [False, True], ids=["in-memory", "spooled"])
def test_an_import_whose_stored_file_was_altered_at_its_size_is_refused_not_read(client, member, target, media,
                                                                                 settings, spooled):
    """Same length, other bytes (a torn write the size cannot see): the recorded SHA-256 refuses it."""
    if spooled:
        settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 64 * 1024
    content = export(20_000)
    assert upload(client, target, "Pages.csv", content).status_code == 302
    imp = Import.objects.get()
    assert imp.sha256 == hashlib.sha256(content).hexdigest()
    stored = media / imp.file.name
    stored.write_bytes(content[:-8192] + b"\0" * 8192)

    run_burst()

    imp.refresh_from_db()
    assert imp.status == ImportStatus.FAILED and imp.inserted == 0
    assert "SHA-256 is not the recorded one" in imp.error and "upload the file again" in imp.error


def test_a_spooled_upload_is_stored_whole_and_leaves_nothing_in_the_spool(client, member, target, media, settings,
                                                                           tmp_path):
    """A large upload is moved from the spool (storage.move_atomic: renamed on one file system, no second copy)."""
    spool = tmp_path / "spool"
    spool.mkdir()
    settings.FILE_UPLOAD_TEMP_DIR, settings.FILE_UPLOAD_MAX_MEMORY_SIZE = str(spool), 64 * 1024
    content = export(300_000)
    assert upload(client, target, "Pages.csv", content).status_code == 302
    stored = settings.MEDIA_ROOT / Import.objects.get().file.name
    assert stored.read_bytes() == content and list(spool.iterdir()) == []
    assert oct(stored.stat().st_mode & 0o777) == oct(settings.FILE_UPLOAD_PERMISSIONS)
