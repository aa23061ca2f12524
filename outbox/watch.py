"""The outbox's periodic duty and its overdue signal: a held document is retried when it comes due, whatever
else happens.

Senders end (their budget, a stop, a kill -9 whose job the sweep fails), and
the wakes that come with new mail or an operator's click may never come. So
every ``runjobs`` worker runs ``wake_if_due`` every OUTBOX_WATCH_SECONDS
(``jobs.duties``, registered by ``OutboxConfig.ready``): one statement asks
whether an entry is claimable (due, or its lease expired) while no sender is
queued or running, and if so a sender is woken (deduplicated: however many
workers ask, one job waits). After an outage or a kill the entries are sent
once due — a lease-expired one once its lease ends — without new mail.

``overdue()`` is what health and metrics report: entries claimable for longer
than OUTBOX_OVERDUE_SECONDS, which the duty should have made impossible (no
worker running, all of them busy, or a stall to investigate).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import connection

from . import capacity, conf, sql
from .wake import DEDUP_KEY, JOB_TYPE, wake

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Overdue:
    count: int  # entries claimable for longer than OUTBOX_OVERDUE_SECONDS
    oldest_seconds: float  # how long the longest of them has been claimable; 0 if none


def wake_if_due() -> bool:
    """Wake a sender if an entry is claimable and none is queued or running; True if one was woken."""
    if not capacity.enabled():
        return False
    with connection.cursor() as cursor:
        cursor.execute(sql.SENDER_WANTED, {"dedup_key": DEDUP_KEY, "job_type": JOB_TYPE})
        (wanted,) = cursor.fetchone()
    if not wanted:
        return False
    wake()
    log.info("outbox: documents are due and no sender is queued or running; one queued")
    return True


def overdue() -> Overdue:
    with connection.cursor() as cursor:
        cursor.execute(sql.OVERDUE, {"after": float(conf.get("OUTBOX_OVERDUE_SECONDS"))})
        count, oldest = cursor.fetchone()
    return Overdue(int(count), float(oldest or 0.0))


def readiness() -> list[str]:
    """The overdue signal of /health/ready: a fixed text and a count, nothing of any org."""
    found = overdue()
    if not found.count:
        return []
    return [f"{found.count} held document(s) due for over {float(conf.get('OUTBOX_OVERDUE_SECONDS')):.0f} s "
            "with no sender taking them (is a runjobs worker running and free?)"]
