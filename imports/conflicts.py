"""Transactions that PostgreSQL rolled back because of another one: run them again, a few times.

A deadlock or a serialization failure is about timing, not about the data:
the transaction was undone whole, so running it again is both safe and the
remedy. Imports write in natural-key order so that deadlocks should not
happen at all (see ingest.UPSERT_METRICS); this is what catches the rest.
"""

from __future__ import annotations

import logging
import random
import time

from django.db import DatabaseError, connection, transaction

from seoinsight.backoff import doubling
from seoinsight.exc_chain import chain

log = logging.getLogger(__name__)

# SQLSTATEs meaning "another transaction got in the way": PostgreSQL rolled the
# whole transaction back, and running it again is the remedy.
TRANSIENT_SQLSTATES = {"40P01": "deadlock", "40001": "serialization failure"}
CONFLICT_TRIES = 5
CONFLICT_BACKOFF_FIRST = 0.1
CONFLICT_BACKOFF_MAX = 3.0
sleep = time.sleep  # the pause between tries; tests replace it


class WriteConflict(Exception):
    """A transaction kept colliding with other writers of the same target; the message is for the operator."""


def transient_conflict(exc: BaseException) -> str | None:
    """"deadlock" or "serialization failure" if that is what ``exc`` (or its cause) is, else None."""
    for seen in chain(exc):
        reason = TRANSIENT_SQLSTATES.get(getattr(seen, "sqlstate", None))
        if reason is not None:
            return reason
    return None


def conflict_delay(attempt: int, draw=random.random) -> float:
    """Seconds to wait after colliding try number ``attempt`` (1-based).

    Doubling from CONFLICT_BACKOFF_FIRST up to CONFLICT_BACKOFF_MAX, and of that
    between half and all, at random: two writers that collided do not try again in step.

    >>> [conflict_delay(n, lambda: 1.0) for n in (1, 2, 3, 4, 9)]
    [0.1, 0.2, 0.4, 0.8, 3.0]
    >>> conflict_delay(2, lambda: 0.0)
    0.1
    """
    ceiling = doubling(attempt, CONFLICT_BACKOFF_FIRST, CONFLICT_BACKOFF_MAX)
    return ceiling * (0.5 + 0.5 * draw())


def retry_conflicts(work, *, what: str, job_id=None, atomic=transaction.atomic, reset=None,
                    tries: int = CONFLICT_TRIES):
    """``work()`` in a transaction of its own, run again after a deadlock or serialization failure.

    Such a failure rolled the whole transaction back, so another try starts
    from the same state: ``reset`` (if given) puts back what ``work`` changed
    in memory. After ``tries`` collisions, WriteConflict says so in words.
    Must be the outermost transaction: inside another one, the caller's work
    is lost with it and only the caller can redo it.
    """
    for attempt in range(1, tries + 1):
        try:
            with atomic():
                return work()
        except DatabaseError as exc:
            reason = transient_conflict(exc)
            if reason is None or connection.in_atomic_block:
                raise
            if reset is not None:
                reset()
            if attempt == tries:
                raise WriteConflict(
                    f"could not write {what}: it collided with other imports or map updates of the same "
                    f"site target ({reason}, {tries} tries); import the file again"
                ) from None
            delay = conflict_delay(attempt)
            log.warning("job=%s %s rolled back by a %s (try %s/%s), again in %.2fs",
                        job_id, what, reason, attempt, tries, delay)
            sleep(delay)
