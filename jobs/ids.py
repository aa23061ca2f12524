"""Job ids made by the enqueuing process: UUIDv7 (RFC 9562), the layout the database's ``uuidv7()`` writes.

48 bits of Unix time in milliseconds, the version (7), 74 random bits from ``os.urandom`` and the
variant: ids sort by creation time, and no one can guess the next one. ``enqueue`` and
``enqueue_many`` send the ids they made instead of leaving the column's default to the server,
because there the default costs most of a bulk insert's time on a PostgreSQL built without
OpenSSL (the embedded one): every ``gen_random_uuid()`` under ``uuidv7()`` opens, reads and closes
``/dev/urandom``, ~4 µs of the server's CPU per row against ~0.6 µs of ours to make the id
(docs/benchmarks.md, issue 22). A row inserted any other way still takes ``uuidv7()``'s.

The clock is the enqueuing host's, not the database's: ids from two hosts interleave by their
clocks. No claim orders by id (priority, then ``created_at``); the prune bounds its walk by the
id's time and checks ``finished_at`` too, so a host's clock running ahead only keeps rows longer
(``jobs.retention``).
"""

from __future__ import annotations

import os
import time
import uuid

_VERSION = 0x7 << 76
_VARIANT = 0b10 << 62
_RAND_B = (1 << 62) - 1
_BYTES = 10  # 80 random bits drawn per id, 74 of them kept


def _head() -> int:
    return (time.time_ns() // 1_000_000) << 80 | _VERSION | _VARIANT


def _value(head: int, random: int) -> int:
    random >>= 6
    return head | (random >> 62) << 64 | random & _RAND_B


def new_id() -> uuid.UUID:
    return uuid.UUID(int=_value(_head(), int.from_bytes(os.urandom(_BYTES))))


def new_ids_text(count: int) -> str:
    """``count`` new ids as one text, one per line, 32 hex digits each (which PostgreSQL's uuid input reads)."""
    head = _head()
    drawn = os.urandom(_BYTES * count)
    return "\n".join([
        f"{_value(head, int.from_bytes(drawn[i:i + _BYTES])):032x}" for i in range(0, _BYTES * count, _BYTES)
    ])
