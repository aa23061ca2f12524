"""A bounded look at a file: what the upload's check may read of it, counted as it is read.

Within ``bounded(max_bytes)``, every stream a format reads (a text file's bytes, a zip member's
inflated bytes) goes through ``counted``; past the bound it raises ``LookExhausted``. Outside a
look (the import's job) nothing is counted: the job reads the file whole, within the archive bounds.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import BinaryIO

# The most one read asks of the stream under a look: a look overruns its bound by this at most.
CHUNK_BYTES = 64 * 1024


class LookExhausted(Exception):
    """The look read its bound before it could tell what the file is: the import's job will read it whole."""


class Look:
    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.read = 0

    def take(self, size: int) -> None:
        self.read += size
        if self.read > self.max_bytes:
            raise LookExhausted(f"read {self.read:,} bytes, more than the {self.max_bytes:,} of a look")


_current: ContextVar[Look | None] = ContextVar("imports_look", default=None)


@contextmanager
def bounded(max_bytes: int):
    """Within the block, the formats read at most ``max_bytes`` (then ``LookExhausted``); yields the ``Look``."""
    look = Look(max_bytes)
    token = _current.set(look)
    try:
        yield look
    finally:
        _current.reset(token)


def counted(stream: BinaryIO) -> BinaryIO:
    """``stream``, counted against the current look if there is one."""
    look = _current.get()
    return stream if look is None else _Counted(stream, look)


def counted_opener(opener: Callable[[], AbstractContextManager[BinaryIO]]):
    """An opener whose files are counted against the look current when they are opened."""

    @contextmanager
    def opened():
        with opener() as stream:
            yield counted(stream)

    return opened


class _Counted(io.RawIOBase):
    """A binary stream that charges every byte it hands out to a look, and never asks for more than a chunk."""

    def __init__(self, stream: BinaryIO, look: Look):
        super().__init__()
        self._stream = stream
        self._look = look

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        if not self.closed:
            self._stream.close()
        super().close()

    def seekable(self) -> bool:
        return self._stream.seekable()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._stream.seek(offset, whence)

    def tell(self) -> int:
        return self._stream.tell()

    def readinto(self, buffer) -> int:
        data = self._stream.read(min(len(buffer), CHUNK_BYTES))
        self._look.take(len(data))
        buffer[: len(data)] = data
        return len(data)

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            return self.readall()
        data = self._stream.read(min(size, CHUNK_BYTES))
        self._look.take(len(data))
        return data

    def read1(self, size: int = -1) -> bytes:
        return self.read(size if size is not None and size >= 0 else CHUNK_BYTES)

    def readall(self) -> bytes:
        chunks = []
        while chunk := self.read(CHUNK_BYTES):
            chunks.append(chunk)
        return b"".join(chunks)
