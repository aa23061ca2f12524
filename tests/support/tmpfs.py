"""A real small file system, to fill up: a tmpfs mounted for one test (needs root)."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

import pytest


class Tmpfs:
    def __init__(self, path: Path):
        self.path = path

    def resize(self, size: str) -> None:
        """Grow (or shrink) the file system in place, keeping its files: "the operator freed space"."""
        subprocess.run(["mount", "-o", f"remount,size={size}", str(self.path)], check=True, capture_output=True)

    def files(self) -> list[Path]:
        return sorted(p for p in self.path.rglob("*") if p.is_file())


@contextlib.contextmanager
def mounted_tmpfs(path: Path, size: str = "1m"):
    """Mount a tmpfs of ``size`` at ``path`` for the duration; skips the test when mounting is impossible."""
    path.mkdir(parents=True, exist_ok=True)
    try:
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0777", "tmpfs", str(path)],
                                capture_output=True, text=True)
        problem = result.stderr.strip() if result.returncode else ""
    except FileNotFoundError:
        problem = "no mount command"
    if problem:
        pytest.skip(f"cannot mount a tmpfs to fill up (root and CAP_SYS_ADMIN needed): {problem}")
    try:
        yield Tmpfs(path)
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.fixture
def media_tmpfs(settings, tmp_path):
    """MEDIA_ROOT on a 1 MB tmpfs for the test (a ``Tmpfs``, to fill up and ``resize``); skips without root."""
    with mounted_tmpfs(tmp_path / "media", "1m") as mounted:
        settings.MEDIA_ROOT = mounted.path
        yield mounted
        settings.MEDIA_ROOT = tmp_path / "after"  # nothing more lands on the file system being unmounted
