"""seoinsight.storage: files written whole or not at all, reused and read only when intact."""

import hashlib
import os

import pytest

from seoinsight import storage
from tests.support.tmpfs import mounted_tmpfs

DATA = b"Page,Clicks\nhttps://shop.example/a,3\n"
DIGEST = hashlib.sha256(DATA).hexdigest()


pytestmark = pytest.mark.usefixtures("media")


def leftovers(directory):
    return [p.name for p in directory.rglob("*") if p.is_file() and p.name.startswith(storage.TEMP_PREFIX)]


def test_write_atomic_returns_what_it_wrote_and_replaces_a_file_already_there(tmp_path):
    path = tmp_path / "a" / "b" / "file"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"old and longer than the new content")
    assert storage.write_atomic(path, [DATA[:5], DATA[5:]]) == (len(DATA), DIGEST)
    assert path.read_bytes() == DATA and leftovers(tmp_path) == []


def test_a_write_that_fails_midway_leaves_neither_the_name_nor_a_temporary_file(tmp_path):
    def chunks():
        yield DATA
        raise ConnectionResetError("the upload's client went away")

    path = tmp_path / "file"
    with pytest.raises(ConnectionResetError):
        storage.write_atomic(path, chunks())
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_is_out_of_space_and_leaves_nothing(tmp_path):
    with mounted_tmpfs(tmp_path / "small", "64k") as disk:
        with pytest.raises(storage.OutOfSpace) as raised:
            storage.write_atomic(disk.path / "big", [os.urandom(32 * 1024)] * 4)
        assert storage.is_out_of_space(raised.value) and "out of disk space writing big" in str(raised.value)
        assert disk.files() == []
        storage.write_atomic(disk.path / "small", [DATA])  # the space it took is back
        assert disk.files() == [disk.path / "small"]


@pytest.mark.parametrize("on_disk, intact", [
    (DATA, True),
    (DATA[:-1], False),  # truncated
    (b"", False),  # what a full disk left
    (DATA.replace(b"3", b"4"), False),  # same size, other bytes
    (None, False),  # missing
])
def test_is_intact(tmp_path, on_disk, intact):
    path = tmp_path / "file"
    if on_disk is not None:
        path.write_bytes(on_disk)
    assert storage.is_intact(path, len(DATA), DIGEST) is intact


def test_save_content_names_by_hash_and_rewrites_what_is_not_intact(media):
    name, digest = storage.save_content("mail", DATA)
    assert (name, digest) == (f"mail/{DIGEST[:2]}/{DIGEST}", DIGEST)
    path = media / name
    path.write_bytes(DATA[:3])
    storage.save_content("mail", DATA)
    assert path.read_bytes() == DATA
    inode = path.stat().st_ino
    storage.save_content("mail", DATA)  # intact: kept as it is
    assert path.stat().st_ino == inode


@pytest.mark.parametrize("on_disk, problem", [
    (DATA, None),
    (DATA[:10], f"damaged: 10 bytes instead of {len(DATA)}"),
    (DATA.replace(b"3", b"4"), "damaged: its SHA-256 is not the recorded one"),
    (None, "missing"),
])
def test_read_verified(media, on_disk, problem):
    name = storage.save_content("mail", DATA)[0]
    if on_disk is None:
        (media / name).unlink()
    else:
        (media / name).write_bytes(on_disk)
    if problem is None:
        assert storage.read_verified(name, len(DATA), DIGEST) == DATA
    else:
        with pytest.raises(storage.DamagedFile, match=problem):
            storage.read_verified(name, len(DATA), DIGEST)


def test_move_atomic_renames_on_one_file_system_and_copies_across(tmp_path):
    source = tmp_path / "spooled"
    source.write_bytes(DATA)
    inode = source.stat().st_ino
    assert storage.move_atomic(source, tmp_path / "stored" / "file") == len(DATA)
    moved = tmp_path / "stored" / "file"
    assert moved.read_bytes() == DATA and moved.stat().st_ino == inode and not source.exists()  # no copy

    source.write_bytes(DATA)
    with mounted_tmpfs(tmp_path / "other", "1m") as other:
        assert storage.move_atomic(source, other.path / "file") == len(DATA)  # EXDEV: copied whole
        assert (other.path / "file").read_bytes() == DATA and leftovers(other.path) == []


@pytest.mark.parametrize("write", ["write_atomic", "move_atomic"])
def test_each_directory_a_write_creates_is_synced_into_its_parent(tmp_path, monkeypatch, write):
    """A new directory is durable before the file renamed into it counts as stored."""
    synced = []
    real = storage._fsync_directory
    monkeypatch.setattr(storage, "_fsync_directory", lambda d: (synced.append(d), real(d)))
    (tmp_path / "media").mkdir()
    target = tmp_path / "media" / "mail" / "ab" / "file"
    if write == "write_atomic":
        storage.write_atomic(target, [b"bytes"])
    else:
        source = tmp_path / "spooled"
        source.write_bytes(b"bytes")
        storage.move_atomic(source, target)
    assert target.read_bytes() == b"bytes"
    # mail/ in media/, ab/ in mail/, then the file's rename in ab/; media/ existed already
    assert synced == [tmp_path / "media", tmp_path / "media" / "mail", tmp_path / "media" / "mail" / "ab"]
