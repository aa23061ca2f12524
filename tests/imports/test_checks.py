"""The imports app's system checks, each both ways."""

import pytest

from imports import conf
from imports.checks import check_date_order, check_former_names, check_media_root_writable, check_values


def ids(messages) -> list[str]:
    return [m.id for m in messages]


@pytest.mark.parametrize(("value", "expected"), [("dmy", []), ("mdy", []), ("ymd", ["imports.E001"])])
def test_the_date_order_must_be_one_the_reader_knows(value, expected, settings):
    settings.IMPORT_DATE_ORDER = value
    assert ids(check_date_order()) == expected


def test_a_media_root_that_exists_or_can_be_created_passes(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    assert check_media_root_writable() == []
    settings.MEDIA_ROOT = tmp_path / "not" / "yet"
    assert check_media_root_writable() == []
    assert not (tmp_path / "not").exists()  # a check only looks


def test_a_media_root_under_a_file_or_a_file_itself_cannot_be_written(settings, tmp_path):
    (tmp_path / "plain").write_text("a file, not a directory")
    for where in (tmp_path / "plain", tmp_path / "plain" / "media"):
        settings.MEDIA_ROOT = where
        (error,) = check_media_root_writable()
        assert error.id == "imports.E002" and "plain is not a directory" in error.msg


def test_a_media_root_on_a_read_only_file_system_cannot_be_written(settings, tmp_path):
    """As root, mode bits do not stop a write; a read-only mount does."""
    import subprocess

    readonly = tmp_path / "ro"
    readonly.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(readonly)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        settings.MEDIA_ROOT = readonly / "media"
        assert ids(check_media_root_writable()) == ["imports.E002"]
    finally:
        subprocess.run(["umount", str(readonly)], check=True)


@pytest.mark.parametrize("name", ["IMPORT_MAX_UPLOAD_BYTES", "IMPORT_MAX_UNZIPPED_BYTES", "IMPORT_BATCH_SIZE"])
def test_a_limit_or_batch_size_must_be_above_zero(name, settings):
    assert check_values() == []
    setattr(settings, name, 0)
    (error,) = check_values()
    assert error.id == "imports.E003" and error.msg.startswith(f"{name} is 0")


def test_an_environment_text_that_is_not_a_number_is_reported_not_raised(monkeypatch):
    monkeypatch.setenv("IMPORT_MAX_UPLOAD_BYTES", "200MB")
    (error,) = check_values()
    assert error.id == "imports.E003" and "'200MB'" in error.msg


def test_the_former_batch_size_name_is_still_read_and_asked_to_be_renamed(monkeypatch, settings):
    assert check_former_names() == []
    monkeypatch.setenv("IMPORTS_BATCH_SIZE", "500")
    assert conf.get("IMPORT_BATCH_SIZE") == 500
    (warning,) = check_former_names()
    assert warning.id == "imports.W001" and "Rename IMPORTS_BATCH_SIZE to IMPORT_BATCH_SIZE" in warning.hint
    settings.IMPORT_BATCH_SIZE = 700  # the current name wins
    assert conf.get("IMPORT_BATCH_SIZE") == 700
