"""Per-folder sync cursor rules (docs/mail.md, "Cursors: one per folder"), as pure functions.

The whole correctness of the poller lives here:

* UIDVALIDITY governs everything: when the server changes it, stored UIDs mean
  nothing, so the folder is swept again and Message-ID dedup absorbs the repeats.
  Trusting ``last_uid`` across a change loses mail without any error.
* The cursor only moves over messages that are durably stored, and only over
  the unbroken prefix of them: a failed message is fetched again next tick
  instead of being stepped over. A tick that did not work on a folder (it was
  stopped first) leaves its cursor alone, and a sweep's high-water mark is
  stored only once the sweep is done: a sweep cut short is resumed, not skipped.
* The first tick is a policy decision (``new-only``, ``since``, ``full``), never a default.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import date

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
    """How far a folder has been durably read.

    Every message up to ``last_uid`` that the folder's reading selects is stored.
    While a sweep (a first poll in ``since``/``full`` mode, or after a UIDVALIDITY
    change) is unfinished, ``sweep_until`` is the folder's last UID when it began
    and ``sweep_since`` its date, if any: the next tick resumes that sweep rather
    than reading everything after ``last_uid``.
    """

    uidvalidity: int
    last_uid: int
    sweep_until: int | None = None
    sweep_since: date | None = None


@dataclass(frozen=True)
class SyncPlan:
    """What one tick does to one folder.

    ``floor`` is where the contiguous-success walk starts; ``baseline_uid`` is the
    cursor to store once every message the plan selects is stored (all of them, or
    none found). The two differ on a sweep: the baseline is the high-water mark,
    and combining it with a partly done or partly failed sweep would step over
    everything not yet stored. ``sweep_until`` caps a sweep: later mail is read
    incrementally once the sweep is done.
    """

    mode: str
    search: str
    floor: int
    baseline_uid: int
    uidvalidity: int = 0
    start_uid: int | None = None
    since: date | None = None
    uidvalidity_reset: bool = False
    sweep_until: int | None = None


def plan_folder_sync(initial_mode: str, initial_since: date | None, status: FolderStatus,
                     state: CursorState | None) -> SyncPlan:
    high_water = max(status.uidnext - 1, 0)
    uv = status.uidvalidity
    if state is None:
        if initial_mode == "new-only":
            return SyncPlan("initial-new-only", SEARCH_NONE, floor=high_water, baseline_uid=high_water, uidvalidity=uv)
        if initial_mode == "since":
            if initial_since is None:
                raise ValueError("initial mode 'since' needs a date")
            return SyncPlan("initial-since", SEARCH_SINCE, floor=0, baseline_uid=high_water, uidvalidity=uv,
                            since=initial_since, sweep_until=high_water)
        if initial_mode == "full":
            return SyncPlan("initial-full", SEARCH_ALL, floor=0, baseline_uid=high_water, uidvalidity=uv,
                            sweep_until=high_water)
        raise ValueError(f"unknown initial mode {initial_mode!r}")
    if state.uidvalidity != status.uidvalidity:
        return SyncPlan("uidvalidity-reset", SEARCH_ALL, floor=0, baseline_uid=high_water, uidvalidity=uv,
                        uidvalidity_reset=True, sweep_until=high_water)
    if state.sweep_until is not None:
        # An earlier tick stopped mid-sweep: go on with the same search, from where it got to.
        search = SEARCH_SINCE if state.sweep_since else SEARCH_ALL
        return SyncPlan("sweep-resumed", search, floor=state.last_uid, baseline_uid=state.sweep_until,
                        uidvalidity=uv, since=state.sweep_since, sweep_until=state.sweep_until)
    return SyncPlan("incremental", SEARCH_FROM_UID, floor=state.last_uid, baseline_uid=state.last_uid,
                    uidvalidity=uv, start_uid=state.last_uid + 1)


def uids_to_fetch(plan: SyncPlan, found: Iterable[int]) -> list[int]:
    """The UIDs a search returned that this tick must fetch, ascending.

    ``UID n:*`` always returns the folder's last message, even when its UID is
    below n: anything at or below the floor is dropped (on a first sweep the floor
    is 0). A sweep stops at its ``sweep_until``: what arrived since is new mail.
    """
    return sorted({uid for uid in found
                   if uid > plan.floor and (plan.sweep_until is None or uid <= plan.sweep_until)})


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
    error counter rises every tick, and the folder's problem and the log name
    the UID. That is better than stepping over it, which would lose mail while
    reporting success.
    """
    last = floor
    for uid in sorted(attempted):
        if uid not in succeeded:
            break
        last = max(last, uid)
    return last


def next_cursor(plan: SyncPlan, to_fetch: Iterable[int], attempted: Iterable[int],
                succeeded: set[int]) -> CursorState | None:
    """The cursor to store after (part of) a tick, or None to leave the stored one as it is.

    The cursor moves only over messages that were attempted and stored. A tick
    that attempted nothing of what it had to fetch (stopped before its first
    batch) did not work on the folder: it keeps its old cursor, or none, and the
    next tick makes the same plan. The baseline (the high-water mark of a sweep)
    is stored only once everything the plan selected is stored; until then an
    unfinished sweep is stored as such, so the next tick resumes it.

    >>> plan = SyncPlan("initial-full", SEARCH_ALL, floor=0, baseline_uid=9, uidvalidity=7, sweep_until=9)
    >>> next_cursor(plan, [3, 5, 9], [], set()) is None
    True
    >>> next_cursor(plan, [3, 5, 9], [3, 5], {3, 5})
    CursorState(uidvalidity=7, last_uid=5, sweep_until=9, sweep_since=None)
    >>> next_cursor(plan, [3, 5, 9], [3, 5, 9], {3, 5, 9})
    CursorState(uidvalidity=7, last_uid=9, sweep_until=None, sweep_since=None)
    """
    attempted = set(attempted)
    to_fetch = list(to_fetch)
    if to_fetch and not attempted:
        return None
    last = contiguous_last_uid(plan.floor, attempted, succeeded)
    if all(uid in succeeded for uid in to_fetch):
        return CursorState(plan.uidvalidity, max(last, plan.baseline_uid))
    if plan.sweep_until is not None:
        return CursorState(plan.uidvalidity, last, sweep_until=plan.sweep_until,
                           sweep_since=plan.since if plan.search == SEARCH_SINCE else None)
    return CursorState(plan.uidvalidity, last)


def cursor_after_batch(plan: SyncPlan, to_fetch: list[int], start: int, end: int,
                       succeeded: set[int]) -> CursorState:
    """``next_cursor`` once ``to_fetch[start:end]`` is attempted, everything before it being stored.

    The same answer, worked out in the time of the batch rather than of the folder:
    a sweep stores its cursor after every batch, and walking the whole folder each
    time would make a long sweep quadratic. The walk starts at the UID before the
    batch; of what is left to fetch, the batch and the one UID after it (attempted
    by no batch yet, so not stored) decide whether everything is stored.

    >>> plan = SyncPlan("initial-full", SEARCH_ALL, floor=0, baseline_uid=9, uidvalidity=7, sweep_until=9)
    >>> cursor_after_batch(plan, [3, 5, 9], 1, 2, {3, 5})
    CursorState(uidvalidity=7, last_uid=5, sweep_until=9, sweep_since=None)
    >>> cursor_after_batch(plan, [3, 5, 9], 2, 3, {3, 5, 9})
    CursorState(uidvalidity=7, last_uid=9, sweep_until=None, sweep_since=None)
    """
    floor = to_fetch[start - 1] if start else plan.floor
    return next_cursor(replace(plan, floor=floor), to_fetch[start:end + 1], to_fetch[start:end], succeeded)


# -- API folders (Gmail, Graph): an opaque cursor instead of UIDs --------------------------------------------


@dataclass(frozen=True)
class ReadPlan:
    """How an API folder is read this poll: from ``cursor``, or without one in ``mode`` (``changes_sync``)."""

    label: str  # for the logs and FolderResult.mode, like SyncPlan.mode
    cursor: str | None
    mode: str


def plan_changes_read(position: str, resyncing: bool, initial_mode: str) -> ReadPlan:
    """The read of an API folder, from its stored position and whether a resync is unfinished.

    A folder with a position goes on from it (an unfinished resync that got somewhere resumes
    from its own point). One without a position reads per the mailbox's first-poll policy,
    except during a resync, which always reads everything: the provider has forgotten
    where we were, so only a full read (dedup absorbing what was stored) leaves no gap.

    >>> plan_changes_read("4711", False, "new-only")
    ReadPlan(label='incremental', cursor='4711', mode='full')
    >>> plan_changes_read("", False, "since").label, plan_changes_read("", True, "new-only")
    ('initial-since', ReadPlan(label='resync', cursor=None, mode='full'))
    """
    if initial_mode not in ("new-only", "since", "full"):
        raise ValueError(f"unknown initial mode {initial_mode!r}")
    if position:
        return ReadPlan("resync-resumed" if resyncing else "incremental", position, "full")
    if resyncing:
        return ReadPlan("resync", None, "full")
    return ReadPlan(f"initial-{initial_mode}", None, initial_mode)
