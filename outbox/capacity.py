"""Is the outbox on, how deep is it, is it full: what intake (mailpoll's gate) and /health/ready ask.

Past ``OUTBOX_CAPACITY`` documents, intake stops fetching (docs/mail.md, "The downstream outbox": an outbox
that grows without limit is the hidden queue again). Intake counts what is on its
way as well as what is held (``intake_depth``): a document an app above has
accepted but not yet processed becomes an entry soon, so a first sweep of a big
folder cannot fill the outbox past its bound before the first entry exists. The
apps register how they count theirs (``count_on_the_way``), the way they
register what follows a delivery (``outbox.delivered``): the outbox knows no app.
Intake asks before every fetch batch, so the depth passes the capacity by at
most one batch. ``depth()`` (health, metrics, the admin) counts held entries only.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection

from . import conf, sql


# Scalar SQL counts of documents accepted but not held yet, by registering app (``count_on_the_way``).
_ON_THE_WAY: dict[str, str] = {}


@dataclass(frozen=True)
class Depth:
    held: int  # entries in the outbox
    capacity: int
    oldest_seconds: float | None  # age of the oldest held entry; None when empty
    coming: int = 0  # documents on their way to the outbox (``intake_depth`` only)

    @property
    def full(self) -> bool:
        return self.held + self.coming >= self.capacity

    @property
    def room(self) -> int:
        """Documents intake may still take before the gate closes."""
        return max(0, self.capacity - self.held - self.coming)


def count_on_the_way(kind: str, statement: str) -> None:
    """Register ``statement``, one SQL scalar: how many documents of ``kind`` will be entries once processed.

    Registered once, at import, by the app that accepts the documents; ``intake_depth`` adds them up.
    """
    _ON_THE_WAY[kind] = statement


def enabled() -> bool:
    """The outbox is on only with a DOWNSTREAM_URL: without one nothing is queued and nothing is ever full."""
    return bool(str(conf.get("DOWNSTREAM_URL")).strip())


def depth() -> Depth:
    """The outbox's depth now (one statement); read even when it is off (rows left from when it was on)."""
    with connection.cursor() as cursor:
        cursor.execute(sql.DEPTH)
        held, oldest = cursor.fetchone()
    return Depth(int(held), int(conf.get("OUTBOX_CAPACITY")), float(oldest) if oldest is not None else None)


def intake_depth() -> Depth:
    """The depth intake is gated on: held entries plus every registered count on the way, in one statement."""
    coming = " + ".join(f"({statement})" for _, statement in sorted(_ON_THE_WAY.items())) or "0"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT depth.*, {coming} FROM ({sql.DEPTH}) AS depth")
        row = cursor.fetchone()
    held, oldest, on_the_way = row[0], row[1], row[-1]
    return Depth(int(held), int(conf.get("OUTBOX_CAPACITY")), float(oldest) if oldest is not None else None,
                 int(on_the_way))


def intake_gate() -> Depth | None:
    """What bounds intake now: None while the outbox is off (no statement run), else ``intake_depth()``."""
    return intake_depth() if enabled() else None


def is_full() -> bool:
    """True when intake must stop: the outbox is on and holds OUTBOX_CAPACITY documents or more."""
    return enabled() and depth().full


def full_reason(current: Depth) -> str:
    """What a mailbox records while the gate is closed (its last error) and the log says."""
    coming = f", {current.coming} of them still being processed" if current.coming else ""
    return (f"the downstream outbox is full ({current.held + current.coming} of {current.capacity} documents "
            f"waiting for DOWNSTREAM_URL{coming}): nothing more is fetched until it drains; the mail waits on "
            f"the server")
