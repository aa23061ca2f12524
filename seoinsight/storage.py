"""Files under MEDIA_ROOT written whole or not at all, and checked before they are trusted.

A write goes to a temporary name in the destination's own directory, is
fsynced, and only then renamed into place (``os.replace`` is atomic within a
file system). Whatever cuts a write short — a full disk, SIGKILL, a power cut —
the final name holds either nothing or every byte; what is left is a
``.partial-*`` file that no reader ever opens. A failed write removes its
temporary file itself when it can (not after SIGKILL: see ``TEMP_PREFIX``).

A content-addressed file (``save_content``) is reused only when its size and
SHA-256 match its name; anything else found at that name (a truncated file
from before this module) is treated as absent and replaced. Readers that know
the hash check it again before trusting the bytes (``read_verified``).
Uploads spooled to disk go through ``SpoolUploadHandler``, so a full spool
disk is an answer to the user, not a crash of the request parser.

Core module: it knows nothing of mail or imports.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import secrets
import time
from collections.abc import Iterable
from pathlib import Path

from django.conf import settings
from django.core.files.uploadhandler import StopUpload, TemporaryFileUploadHandler

CHUNK_BYTES = 1024 * 1024
# A write in progress, or one cut short by a kill: never read, safe to delete once a day old.
TEMP_PREFIX = ".partial-"
_OUT_OF_SPACE = (errno.ENOSPC, errno.EDQUOT)
_ABSENT = (FileNotFoundError, NotADirectoryError, IsADirectoryError)  # nothing (readable) at that name

log = logging.getLogger(__name__)


class OutOfSpace(OSError):
    """The file system under MEDIA_ROOT is full (or over quota); the write left nothing behind."""


class DamagedFile(Exception):
    """A stored file whose bytes are not the ones recorded for it (missing, truncated or changed)."""


class SpoolUploadHandler(TemporaryFileUploadHandler):
    """Django's spooling of large uploads, except that a full spool disk ends the upload quietly.

    Django's own handler lets ENOSPC escape from the request parser, wherever
    the body is first read (the CSRF middleware, before any view): a bare 500.
    Here the spooled file is dropped, the upload stops, and the request is
    marked, so the view can say "out of disk space" (``upload_hit_full_disk``).
    """

    def receive_data_chunk(self, raw_data, start):
        try:
            return super().receive_data_chunk(raw_data, start)
        except OSError as exc:
            self._stop_if_full(exc)

    def file_complete(self, file_size):
        try:
            return super().file_complete(file_size)
        except OSError as exc:
            self._stop_if_full(exc)

    def _stop_if_full(self, exc: OSError):
        if not is_out_of_space(exc):
            raise exc
        self.request._upload_hit_full_disk = True
        raise StopUpload(connection_reset=False)  # the parser closes (and so deletes) the spooled file


def upload_hit_full_disk(request) -> bool:
    """Whether this request's upload was dropped by SpoolUploadHandler for want of disk space."""
    return getattr(request, "_upload_hit_full_disk", False)


def is_out_of_space(exc: BaseException) -> bool:
    return isinstance(exc, OutOfSpace) or (isinstance(exc, OSError) and exc.errno in _OUT_OF_SPACE)


def media_path(name: str) -> Path:
    return Path(settings.MEDIA_ROOT) / name


def write_atomic(path: Path | str, chunks: Iterable[bytes]) -> tuple[int, str]:
    """Write ``chunks`` to ``path`` whole or not at all; returns (size, sha256 hex) of what was written.

    Replaces a file already there. Raises OutOfSpace when the disk is full.
    """
    digest = hashlib.sha256()

    def hashed():
        for chunk in chunks:
            digest.update(chunk)
            yield chunk

    return _write_atomic(Path(path), hashed()), digest.hexdigest()


def _write_atomic(path: Path, chunks: Iterable[bytes]) -> int:
    """``write_atomic`` without hashing (the caller knows the hash or needs none); returns the size written."""
    try:
        _make_directories(path.parent)
    except OSError as exc:
        if is_out_of_space(exc):
            raise _out_of_space(exc, path) from exc
        raise
    temp = path.with_name(f"{TEMP_PREFIX}{path.name}.{secrets.token_hex(6)}")
    size = 0
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                out.write(chunk)
                size += len(chunk)
            out.flush()
            # Durable before it has its name: after a crash the name never points at missing blocks.
            os.fsync(out.fileno())
        if settings.FILE_UPLOAD_PERMISSIONS is not None:
            os.chmod(temp, settings.FILE_UPLOAD_PERMISSIONS)
        os.replace(temp, path)
    except BaseException as exc:
        _unlink(temp)
        if is_out_of_space(exc) and not isinstance(exc, OutOfSpace):
            raise _out_of_space(exc, path) from exc
        raise
    _fsync_directory(path.parent)
    return size


def move_atomic(source: Path | str, path: Path | str) -> int:
    """Move a finished file (an upload spooled to disk) to ``path``, whole or not at all; returns its size.

    On the same file system it is fsynced and renamed, without a copy (no second
    copy on a disk that is filling up); across file systems it is copied with
    ``write_atomic`` and the source is left to its owner.
    """
    source, path = Path(source), Path(path)
    try:
        _make_directories(path.parent)
        with open(source, "rb") as handle:
            os.fsync(handle.fileno())
        if settings.FILE_UPLOAD_PERMISSIONS is not None:
            os.chmod(source, settings.FILE_UPLOAD_PERMISSIONS)
        size = source.stat().st_size
        os.replace(source, path)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            if is_out_of_space(exc):
                raise _out_of_space(exc, path) from exc
            raise
        with open(source, "rb") as handle:
            return _write_atomic(path, iter(lambda: handle.read(CHUNK_BYTES), b""))
    _fsync_directory(path.parent)
    return size


def save_content(prefix: str, content: bytes) -> tuple[str, str]:
    """Store bytes as ``<prefix>/<2 hex>/<sha256>`` under MEDIA_ROOT; returns (name, sha256). Idempotent.

    A file already at that name is kept only if it is intact; otherwise it is rewritten.
    Two writers of the same content at once each rename identical bytes into place: harmless.
    """
    digest = hashlib.sha256(content).hexdigest()
    name = f"{prefix}/{digest[:2]}/{digest}"
    path = media_path(name)
    try:
        problem = _file_problem(path, len(content), digest)
    except _ABSENT:
        problem = None  # not there yet: written without a word
    if problem != "":
        if problem:
            log.warning("%s was not intact (%s): written again", name, problem)
        _write_atomic(path, _slices(content))
    return name, digest


def remove_stale_partials(prefix: str, older_than: float) -> int:
    """Delete the temporary files of writes killed mid-way (``TEMP_PREFIX``) under ``prefix``; returns how many.

    Only files older than ``older_than`` seconds: a younger one may be a write still in progress.
    """
    cutoff, removed = time.time() - older_than, 0
    for directory, _dirs, names in os.walk(media_path(prefix)):
        for name in names:
            if not name.startswith(TEMP_PREFIX):
                continue
            path = Path(directory) / name
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
            except FileNotFoundError:
                pass  # another process's sweep, or the write finished
    return removed


def is_intact(path: Path | str, size: int, sha256: str) -> bool:
    """True when the file exists with exactly this size and SHA-256."""
    try:
        return not _file_problem(path, size, sha256)
    except _ABSENT:
        return False


def file_sha256(path: Path | str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def read_verified(name: str, size: int, sha256: str) -> bytes:
    """The bytes of a stored file, only if they are the recorded ones; DamagedFile says what is wrong."""
    try:
        data = media_path(name).read_bytes()
    except FileNotFoundError:
        raise DamagedFile(f"the stored file {name} is missing") from None
    _refuse_damaged(name, _problem(len(data), size, lambda: hashlib.sha256(data).hexdigest(), sha256))
    return data


def check_stored(name: str, size: int, sha256: str | None = None) -> None:
    """Raise DamagedFile unless the stored file has this size (and this SHA-256, when given).

    A missing file raises FileNotFoundError, for the caller to word.
    """
    _refuse_damaged(name, _file_problem(media_path(name), size, sha256 or None))


def _file_problem(path: Path | str, size: int, sha256: str | None) -> str:
    """``_problem`` of the file at ``path``, read only when its size is right; raises FileNotFoundError."""
    return _problem(os.stat(path).st_size, size, lambda: file_sha256(path), sha256)


def _problem(actual_size: int, size: int, actual_sha256, sha256: str | None) -> str:
    """What is wrong with stored bytes as the recorded (size, sha256); "" when nothing is.

    ``actual_sha256()`` is called only when the size is right; with no ``sha256`` the size alone is checked.
    """
    if actual_size != size:
        return f"{actual_size:,} bytes instead of {size:,}"
    if sha256 is not None and actual_sha256() != sha256:
        return "its SHA-256 is not the recorded one"
    return ""


def _refuse_damaged(name: str, problem: str) -> None:
    if problem:
        raise DamagedFile(f"the stored file {name} is damaged: {problem}")


def _slices(content: bytes):
    view = memoryview(content)
    for start in range(0, len(content), CHUNK_BYTES):
        yield view[start:start + CHUNK_BYTES]
    if not content:
        yield b""


def _out_of_space(exc: OSError, path: Path) -> OutOfSpace:
    return OutOfSpace(exc.errno, f"out of disk space writing {path.name}", str(path.parent))


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _make_directories(directory: Path) -> None:
    """``mkdir -p``, each directory it creates made durable in its parent (else a crash could lose the
    new directory, and every file renamed into it with it)."""
    if directory.is_dir():
        return
    _make_directories(directory.parent)
    try:
        directory.mkdir()
    except FileExistsError:
        return  # a concurrent writer made it (and syncs its parent)
    _fsync_directory(directory.parent)


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
