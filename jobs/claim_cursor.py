"""Where a worker's next claim starts: the queue's front, or just past the last job it claimed.

A claim reads the queued index from its front. Every row claimed leaves its entry
there until VACUUM removes it or a scan finds its old version dead to everyone, and a
snapshot held open elsewhere (a long report, a console left in a transaction, a
backup) stops both: each claim then walks the entries of every row claimed since that
snapshot was taken, one heap fetch each, and grows from a tenth of a millisecond to
tens (docs/benchmarks.md, "Held snapshot").

So a worker whose exact claims turn slow (against its own fastest, on the server's
clock) starts its claims after the last job it
claimed (``jobs.sql._choice_after``), walking only what was claimed since, and goes
back to the front at least every ``exact_every`` seconds, and whenever the bounded
claim finds nothing. The bounded claim takes only rows the exact one could take, in
claim order; what it cannot see is a job that became claimable behind the mark after
the mark was taken (a run put back, a retry or a scheduled job coming due, an enqueue
committed late): that one waits for the next exact claim, at most ``exact_every``.
Claims are exact whenever they are fast, so a queue whose index is clean keeps strict
order. Whatever makes exact claims slow has the same effect: dead entries piling up
faster than VACUUM clears them (a backlog of tens of thousands of jobs drained at
full speed) count as much as a snapshot held open.

Pure decisions on monotonic times; the queue (``jobs.queue``) runs the statements and
reports back here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

# An exact claim counts as slow when it ran on the server (``sql.SERVER_SECONDS``: neither the network
# nor the client's threads) SLOW_FACTOR times as long as the fastest one this worker made in the last
# BASELINE_WINDOW to 2 x BASELINE_WINDOW seconds, and at least SLOW_FLOOR. A plain claim runs 0.1 ms,
# one under a snapshot held through 25,000 claims 1.3 ms, through 100,000 7 ms (docs/benchmarks.md).
# Relative, so a slower server (or a turn's eight finishes) does not look like a held snapshot; but
# one over SLOW_ALWAYS is slow whatever came before: a worker started while a snapshot was already
# held has never seen a fast claim.
SLOW_FACTOR = 3.0
SLOW_FLOOR = 0.0003
SLOW_ALWAYS = 0.002
BASELINE_WINDOW = 600.0
# Slow exact claims in a row before claims start after the mark: a single slow one is as
# likely a busy machine as a held snapshot.
SLOW_IN_A_ROW = 2
# While bounded, an exact claim at least this often (seconds): the longest a job behind the mark waits.
EXACT_EVERY = 1.0


@dataclass
class ClaimCursor:
    """One worker's mark in the queue, and whether its claims start after it.

    ``after``: the claim-order key (priority, created_at, id) of the last job it
    claimed; ``bounded_until``: the monotonic time until which claims start after
    it (0: claims are exact).
    """

    slow_factor: float = SLOW_FACTOR
    slow_floor: float = SLOW_FLOOR
    slow_always: float = SLOW_ALWAYS
    baseline_window: float = BASELINE_WINDOW
    slow_in_a_row: int = SLOW_IN_A_ROW
    exact_every: float = EXACT_EVERY
    after: tuple[int, datetime, UUID] | None = None
    bounded_until: float = 0.0
    slow: int = 0  # exact claims in a row found slow
    exact_claims: int = 0  # made so far (a figure for benchmarks and logs)
    # The fastest exact claim of the current baseline window and of the one before, and when the current began.
    fastest: float = math.inf
    fastest_before: float = math.inf
    window_began: float | None = None

    def bound(self, now: float) -> tuple[int, datetime, UUID] | None:
        """The key the next claim starts after, or None for an exact claim (from the front)."""
        if self.after is not None and now < self.bounded_until:
            return self.after
        return None

    def claimed(self, last_key: tuple[int, datetime, UUID] | None) -> None:
        """A claim took jobs, the last in claim order with ``last_key`` (None: it took none)."""
        if last_key is not None:
            self.after = last_key

    def exact_claim_took(self, seconds: float, now: float) -> str | None:
        """An exact claim that took jobs ran ``seconds`` on the server: claims stay exact, or start after the mark
        until the next exact claim is due. Returns "bounded" or "exact" when that changes (for the log), else None."""
        self.exact_claims += 1
        if self.window_began is None or now - self.window_began >= self.baseline_window:
            self.fastest_before, self.fastest, self.window_began = self.fastest, math.inf, now
        reference = self.fastest_known  # inf before the first claim: nothing is slow yet
        is_slow = seconds >= self.slow_always or seconds >= max(self.slow_floor, self.slow_factor * reference)
        self.fastest = min(self.fastest, seconds)
        was_bounded = self.slow >= self.slow_in_a_row
        self.slow = self.slow + 1 if is_slow else 0
        bounded = self.slow >= self.slow_in_a_row
        self.bounded_until = now + self.exact_every if bounded else 0.0
        if bounded != was_bounded:
            return "bounded" if bounded else "exact"
        return None

    @property
    def fastest_known(self) -> float:
        """The fastest exact claim the judgement compares with, in seconds (inf: none yet)."""
        return min(self.fastest, self.fastest_before)


def claim_key(job) -> tuple[int, datetime, UUID]:
    """A claimed job's place in claim order (``jobs.sql._choice``)."""
    return (job.priority, job.created_at, job.id)
