"""Releases attachments stuck in ``processing`` — run at the end of every poll cycle.

Their worker died and no re-run of their job took them over (a re-run does so at once:
``mailpoll.attachments.start``), e.g. the job itself was lost or failed.

Once an hour it also deletes what writers killed mid-file left under ``mail/``
(``.partial-*`` files a day old): never read, only taking space.
"""

from __future__ import annotations

import logging
import time

from seoinsight import storage

from .. import attachments

log = logging.getLogger("mailpoll.watchdog")  # its name before the move: operators grep it

MAX_ATTEMPTS = attachments.MAX_RUNS  # runs an attachment may die in before the watchdog gives up on it
PARTIAL_MAX_AGE = 24 * 3600  # a write in progress is never that old
PARTIAL_SWEEP_EVERY = 3600  # listing every stored file's directory is not free
_next_partial_sweep = 0.0  # monotonic time; per process


def run_once() -> dict:
    """Stuck attachments go back to ``pending`` with a new job, or ``failed`` once out of attempts."""
    global _next_partial_sweep
    if time.monotonic() >= _next_partial_sweep:
        _next_partial_sweep = time.monotonic() + PARTIAL_SWEEP_EVERY
        removed = storage.remove_stale_partials("mail", PARTIAL_MAX_AGE)
        if removed:
            log.warning("removed %s partial file(s) left by writers killed mid-file", removed)
    outcome = attachments.release_stuck(max_attempts=MAX_ATTEMPTS)
    return {"released": len(outcome.released), "failed": len(outcome.failed)}
