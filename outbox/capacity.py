"""Is the outbox on, how deep is it, is it full: what intake (mailpoll's gate) and /health/ready ask.

Past ``OUTBOX_CAPACITY`` held documents, intake stops accepting (seed 004: an
outbox that grows without limit is the hidden queue again). In-flight documents
(fetched before the gate closed, still being processed) are still accepted, so
the depth may pass the capacity by those; nothing new is fetched.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection

from . import conf, sql


@dataclass(frozen=True)
class Depth:
    held: int  # entries in the outbox
    capacity: int
    oldest_seconds: float | None  # age of the oldest held entry; None when empty

    @property
    def full(self) -> bool:
        return self.held >= self.capacity


def enabled() -> bool:
    """The outbox is on only with a DOWNSTREAM_URL: without one nothing is queued and nothing is ever full."""
    return bool(str(conf.get("DOWNSTREAM_URL")).strip())


def depth() -> Depth:
    """The outbox's depth now (one statement); read even when it is off (rows left from when it was on)."""
    with connection.cursor() as cursor:
        cursor.execute(sql.DEPTH)
        held, oldest = cursor.fetchone()
    return Depth(int(held), int(conf.get("OUTBOX_CAPACITY")), float(oldest) if oldest is not None else None)


def is_full() -> bool:
    """True when intake must stop: the outbox is on and holds OUTBOX_CAPACITY documents or more."""
    return enabled() and depth().full


def full_reason(current: Depth) -> str:
    """What a mailbox records while the gate is closed (its last error) and the log says."""
    return (f"the downstream outbox is full ({current.held} of {current.capacity} documents waiting for "
            f"DOWNSTREAM_URL): nothing is fetched until it drains; the mail waits on the server")
