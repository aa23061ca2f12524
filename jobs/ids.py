"""Job ids made by the enqueuing process: UUIDv7 (RFC 9562), the layout the database's ``uuidv7()`` writes.

48 bits of Unix time in milliseconds, the version (7), 74 random bits from ``os.urandom`` and the
variant: ids sort by creation time, and no one can guess the next one. ``enqueue`` and
``enqueue_many`` send the ids they made instead of leaving the column's default to the server,
because there the default costs most of a bulk insert's time on a PostgreSQL built without
OpenSSL (the embedded one): every ``gen_random_uuid()`` under ``uuidv7()`` opens, reads and closes
``/dev/urandom``, ~4 µs of the server's CPU per row against ~0.6 µs of ours to make the id
(docs/benchmarks.md, issue 22). A row inserted any other way still takes ``uuidv7()``'s.

Within a process the ids only grow (RFC 9562's monotonic random, method 2): an id made in the same
millisecond as the last one, or after the clock stepped back, is the last one plus a random step of
up to 2**32, so the next id is still not guessable. It matters because claims order by
``priority, created_at, id`` and ``created_at`` is the transaction's start: the jobs one transaction
queues (an ``enqueue_many`` batch, or several ``enqueue`` calls) tie on it, and their ids keep them in
the order they were queued.

The clock is the enqueuing host's, not the database's: ids from two hosts interleave by their
clocks, which only orders jobs whose ``created_at`` ties (two transactions begun in the same
microsecond). The prune bounds its walk by the id's time and checks ``finished_at`` too, so a host's
clock running ahead only keeps rows longer (``jobs.retention``).
"""

from __future__ import annotations

import os
import threading
import time
import uuid

_VERSION = 0x7 << 76
_VARIANT = 0b10 << 62
_RAND_B = (1 << 62) - 1
_RANDOM_BITS = 74
_SEED_BYTES = 10  # 80 random bits drawn for a millisecond's first id, 74 of them kept
_STEP_BYTES = 4  # a later id of the same millisecond: the last one's random part plus 1 to 2**32

_lock = threading.Lock()
_last = (0, 0)  # (milliseconds, random part) of the last id this process made


def _seed() -> int:
    """The random part of a millisecond's first id."""
    return int.from_bytes(os.urandom(_SEED_BYTES)) >> (80 - _RANDOM_BITS)


def _values(count: int) -> list[int]:
    """``count`` new ids as integers, each greater than every id this process made before."""
    global _last
    steps = os.urandom(_STEP_BYTES * count)
    with _lock:
        millis, random = _last
        now = time.time_ns() // 1_000_000
        values = []
        for i in range(count):
            step = int.from_bytes(steps[i * _STEP_BYTES:(i + 1) * _STEP_BYTES]) + 1
            if now > millis:
                millis, random = now, _seed()
            elif random + step < 1 << _RANDOM_BITS:
                random += step
            else:  # the millisecond's random part is spent: borrow the next millisecond
                millis, random = millis + 1, _seed()
            values.append(millis << 80 | _VERSION | _VARIANT | (random >> 62) << 64 | random & _RAND_B)
        _last = (millis, random)
    return values


def new_id() -> uuid.UUID:
    return uuid.UUID(int=_values(1)[0])


def new_ids_text(count: int) -> str:
    """``count`` new ids, in increasing order, as one text, one per line, 32 hex digits each (which
    PostgreSQL's uuid input reads)."""
    return "\n".join([f"{value:032x}" for value in _values(count)])
