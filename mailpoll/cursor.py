"""Per-folder sync cursor rules (seed 002), as pure functions.

The whole correctness of the poller lives here:

* UIDVALIDITY governs everything: when the server changes it, stored UIDs mean
  nothing, so the folder is swept again and Message-ID dedup absorbs the repeats.
  Trusting ``last_uid`` across a change loses mail without any error.
* The cursor only moves over messages that are durably stored, and only over
  the unbroken prefix of them: a failed message is fetched again next tick
  instead of being stepped over.
* The first tick is a policy decision (``new-only``, ``since``, ``full``), never a default.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Iterable

SEARCH_NONE = "none"  # fetch nothing; just record the high-water mark
SEARCH_ALL = "all"  # UID SEARCH ALL: a full sweep, dedup does the rest
SEARCH_SINCE = "since"  # UID SEARCH SINCE <date>
SEARCH_FROM_UID = "from-uid"  # UID SEARCH UID <n>:*


@dataclass(frozen=True)
class FolderStatus:
    name: str
    uidvalidity: int
    uidnext: int


@dataclass(frozen=True)
class CursorState:
    uidvalidity: int
    last_uid: int


@dataclass(frozen=True)
class SyncPlan:
    """What one tick does to one folder.

    ``floor`` is where the contiguous-success walk starts; ``baseline_uid`` is the
    cursor to store when the search finds nothing. The two differ on a full
    sweep: the baseline is the high-water mark, but combining it with a partly
    failed batch would step over every failure.
    """

    mode: str
    search: str
    floor: int
    baseline_uid: int
    start_uid: int | None = None
    since: date | None = None
    uidvalidity_reset: bool = False


def plan_folder_sync(initial_mode: str, initial_since: date | None, status: FolderStatus,
                     state: CursorState | None) -> SyncPlan:
    high_water = max(status.uidnext - 1, 0)
    if state is None:
        if initial_mode == "new-only":
            return SyncPlan("initial-new-only", SEARCH_NONE, floor=high_water, baseline_uid=high_water)
        if initial_mode == "since":
            if initial_since is None:
                raise ValueError("initial mode 'since' needs a date")
            return SyncPlan("initial-since", SEARCH_SINCE, floor=0, baseline_uid=high_water, since=initial_since)
        if initial_mode == "full":
            return SyncPlan("initial-full", SEARCH_ALL, floor=0, baseline_uid=high_water)
        raise ValueError(f"unknown initial mode {initial_mode!r}")
    if state.uidvalidity != status.uidvalidity:
        return SyncPlan("uidvalidity-reset", SEARCH_ALL, floor=0, baseline_uid=high_water, uidvalidity_reset=True)
    return SyncPlan("incremental", SEARCH_FROM_UID, floor=state.last_uid, baseline_uid=state.last_uid,
                    start_uid=state.last_uid + 1)


def uids_to_fetch(plan: SyncPlan, found: Iterable[int]) -> list[int]:
    """The UIDs a search returned that this tick must fetch, ascending.

    ``UID n:*`` always returns the folder's last message, even when its UID is
    below n: anything at or below the floor of an incremental plan is dropped.
    """
    uids = sorted(set(found))
    if plan.search == SEARCH_FROM_UID:
        uids = [uid for uid in uids if uid > plan.floor]
    return uids


def fetch_groups(uids: list[int], sizes: dict[int, int], max_bytes: int) -> list[list[int]]:
    """The UIDs in order, in runs whose messages add up to at most ``max_bytes``.

    What a FETCH brings is held in memory until stored, so a batch of large
    messages is fetched a few at a time. A message larger than ``max_bytes``
    (still under the size limit) is a run of its own.

    >>> fetch_groups([1, 2, 3, 4], {1: 10, 2: 10, 3: 25, 4: 5}, 30)
    [[1, 2], [3, 4]]
    >>> fetch_groups([1, 2], {1: 50, 2: 1}, 30)
    [[1], [2]]
    """
    groups, group, total = [], [], 0
    for uid in uids:
        size = sizes.get(uid, 0)
        if group and total + size > max_bytes:
            groups.append(group)
            group, total = [], 0
        group.append(uid)
        total += size
    if group:
        groups.append(group)
    return groups


def contiguous_last_uid(floor: int, attempted: Iterable[int], succeeded: set[int]) -> int:
    """How far the cursor may move: the last UID of the unbroken run of successes from ``floor``.

    >>> contiguous_last_uid(10, [11, 12, 13], {11, 12, 13})
    13
    >>> contiguous_last_uid(10, [11, 12, 13], {11, 13})
    11
    >>> contiguous_last_uid(10, [11, 12], set())
    10

    A message that fails for good stalls its folder — visibly: the mailbox's
    error counter rises every tick and the log names the UID. That is better
    than stepping over it, which would lose mail while reporting success.
    """
    last = floor
    for uid in sorted(attempted):
        if uid not in succeeded:
            break
        last = max(last, uid)
    return last


def next_cursor(plan: SyncPlan, attempted: list[int], succeeded: set[int]) -> int:
    """The ``last_uid`` to store after a tick."""
    if not attempted:
        return plan.baseline_uid
    return contiguous_last_uid(plan.floor, attempted, succeeded)
