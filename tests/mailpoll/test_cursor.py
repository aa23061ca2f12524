"""The cursor rules (mailpoll.cursor; docs/mail.md, "Cursors: one per folder"), as tables."""

from datetime import date

import pytest

from mailpoll.cursor import (
    SEARCH_ALL,
    SEARCH_FROM_UID,
    SEARCH_NONE,
    SEARCH_SINCE,
    CursorState,
    FolderStatus,
    contiguous_last_uid,
    cursor_after_batch,
    fetch_groups,
    next_cursor,
    plan_folder_sync,
    uids_to_fetch,
)

STATUS = FolderStatus("INBOX", uidvalidity=100, uidnext=51)


@pytest.mark.parametrize(
    "mode, since, state, search, floor, baseline, start, reset",
    [
        ("new-only", None, None, SEARCH_NONE, 50, 50, None, False),
        ("since", date(2026, 6, 19), None, SEARCH_SINCE, 0, 50, None, False),
        ("full", None, None, SEARCH_ALL, 0, 50, None, False),
        # a stored cursor wins over the initial mode
        ("new-only", None, CursorState(100, 42), SEARCH_FROM_UID, 42, 42, 43, False),
        ("full", None, CursorState(100, 50), SEARCH_FROM_UID, 50, 50, 51, False),
        # UIDVALIDITY changed: stored UIDs mean nothing; sweep everything
        ("new-only", None, CursorState(99, 42), SEARCH_ALL, 0, 50, None, True),
    ],
)
def test_plan_folder_sync(mode, since, state, search, floor, baseline, start, reset):
    plan = plan_folder_sync(mode, since, STATUS, state)
    assert (plan.search, plan.floor, plan.baseline_uid, plan.start_uid, plan.uidvalidity_reset) == (
        search, floor, baseline, start, reset)
    assert plan.since == since


def test_an_empty_folder_plans_a_zero_high_water_mark():
    plan = plan_folder_sync("new-only", None, FolderStatus("INBOX", 7, 1), None)
    assert plan.baseline_uid == 0


@pytest.mark.parametrize("mode, since", [("since", None), ("sometimes", None), ("", None)])
def test_bad_initial_modes_are_refused(mode, since):
    with pytest.raises(ValueError):
        plan_folder_sync(mode, since, STATUS, None)


@pytest.mark.parametrize(
    "floor, attempted, succeeded, expected",
    [
        (10, [11, 12, 13], {11, 12, 13}, 13),  # all stored
        (10, [11, 12, 13], {11, 13}, 11),  # stops before the failure; 13 is not stepped over
        (10, [11, 12, 13], {12, 13}, 10),  # first one failed: no move at all
        (10, [], set(), 10),
        (0, [3, 7, 9], {3, 7, 9}, 9),  # gaps in UIDs are normal (expunged mail)
        (0, [9, 3, 7], {3, 7}, 7),  # order of attempts does not matter
    ],
)
def test_contiguous_last_uid(floor, attempted, succeeded, expected):
    assert contiguous_last_uid(floor, attempted, succeeded) == expected


def test_uid_range_search_drops_the_last_message_imap_always_returns():
    plan = plan_folder_sync("full", None, STATUS, CursorState(100, 50))
    assert uids_to_fetch(plan, [50]) == []  # "UID 51:*" on a folder whose last UID is 50
    assert uids_to_fetch(plan, [52, 51, 51]) == [51, 52]


SINCE = date(2026, 6, 19)
RESET = CursorState(99, 42)  # stored under another UIDVALIDITY than STATUS's 100
AT_42 = CursorState(100, 42)
SWEEPING = CursorState(100, 20, sweep_until=40)
SWEEPING_SINCE = CursorState(100, 20, sweep_until=40, sweep_since=SINCE)


@pytest.mark.parametrize(
    "mode, state, to_fetch, attempted, succeeded, expected",
    [
        # new-only: nothing to fetch, the high-water mark is the whole point
        ("new-only", None, [], [], set(), CursorState(100, 50)),
        # full: stopped before the first batch, the folder keeps no cursor (it used to get the high-water mark)
        ("full", None, [3, 4, 9], [], set(), None),
        ("full", None, [3, 4, 9], [3, 4], {3, 4}, CursorState(100, 4, sweep_until=50)),  # stopped midway: resumable
        ("full", None, [3, 4, 9], [3, 4], {4}, CursorState(100, 0, sweep_until=50)),  # the first one failed
        ("full", None, [3, 4, 9], [3, 4, 9], {3, 4, 9}, CursorState(100, 50)),  # done: the high-water mark
        ("full", None, [3, 4, 9], [3, 4, 9], {3, 9}, CursorState(100, 3, sweep_until=50)),
        ("full", None, [], [], set(), CursorState(100, 50)),  # an empty folder is done at once
        # since: the same, and an unfinished sweep remembers its date
        ("since", None, [7, 8], [], set(), None),
        ("since", None, [7, 8], [7], {7}, CursorState(100, 7, sweep_until=50, sweep_since=SINCE)),
        ("since", None, [7, 8], [7, 8], {7, 8}, CursorState(100, 50)),
        # UIDVALIDITY reset: untouched, the stored (stale) cursor stays and the next tick sweeps again
        ("new-only", RESET, [1, 2], [], set(), None),
        ("new-only", RESET, [1, 2], [1], {1}, CursorState(100, 1, sweep_until=50)),
        ("new-only", RESET, [1, 2], [1, 2], {1, 2}, CursorState(100, 50)),
        # incremental
        ("full", AT_42, [43, 44], [], set(), None),
        ("full", AT_42, [43, 44], [43], {43}, CursorState(100, 43)),
        ("full", AT_42, [43, 44], [43, 44], {44}, CursorState(100, 42)),
        ("full", AT_42, [43, 44], [43, 44], {43, 44}, CursorState(100, 44)),
        ("full", AT_42, [], [], set(), CursorState(100, 42)),  # nothing new: the same cursor, stamped again
        # a resumed sweep ends at the UID it began with, not at today's high-water mark
        ("new-only", SWEEPING, [25, 30], [25], {25}, CursorState(100, 25, sweep_until=40)),
        ("new-only", SWEEPING, [25, 30], [25, 30], {25, 30}, CursorState(100, 40)),
        ("new-only", SWEEPING, [25, 30], [], set(), None),
        ("new-only", SWEEPING_SINCE, [25, 30], [25], {25}, CursorState(100, 25, sweep_until=40, sweep_since=SINCE)),
    ],
)
def test_next_cursor(mode, state, to_fetch, attempted, succeeded, expected):
    plan = plan_folder_sync(mode, SINCE if mode == "since" else None, STATUS, state)
    assert next_cursor(plan, to_fetch, attempted, succeeded) == expected


@pytest.mark.parametrize("mode, state", [("full", None), ("since", None), ("new-only", RESET), ("full", AT_42),
                                         ("new-only", SWEEPING), ("new-only", SWEEPING_SINCE)])
@pytest.mark.parametrize("failed", [None, 0, 3, 4, 6])  # the position in to_fetch of a message not stored
def test_cursor_after_batch_is_next_cursor_over_everything_attempted(mode, state, failed):
    plan = plan_folder_sync(mode, SINCE if mode == "since" else None, STATUS, state)
    to_fetch = uids_to_fetch(plan, range(plan.floor + 1, plan.floor + 8))
    succeeded: set[int] = set()
    for start in range(0, len(to_fetch), 2):  # batches of two, stopping after the one that failed, as the poller
        end = min(start + 2, len(to_fetch))
        succeeded.update(uid for n, uid in enumerate(to_fetch[start:end], start) if n != failed)
        expected = next_cursor(plan, to_fetch, to_fetch[:end], succeeded)
        assert cursor_after_batch(plan, to_fetch, start, end, succeeded) == expected
        if failed is not None and start <= failed < end:
            break


@pytest.mark.parametrize(
    "state, search, since, floor, baseline",
    [
        (SWEEPING, SEARCH_ALL, None, 20, 40),
        (SWEEPING_SINCE, SEARCH_SINCE, SINCE, 20, 40),
    ],
)
def test_an_unfinished_sweep_is_resumed_whatever_the_initial_mode(state, search, since, floor, baseline):
    for mode in ("new-only", "full"):
        plan = plan_folder_sync(mode, None, STATUS, state)
        assert (plan.mode, plan.search, plan.since, plan.floor, plan.baseline_uid, plan.sweep_until) == (
            "sweep-resumed", search, since, floor, baseline, 40)
        # the sweep's own range only: later mail waits for the incremental reading that follows
        assert uids_to_fetch(plan, [12, 20, 21, 40, 41, 45]) == [21, 40]


def test_a_first_sweep_is_capped_at_the_high_water_mark_it_planned_with():
    plan = plan_folder_sync("full", None, STATUS, None)
    assert uids_to_fetch(plan, [1, 50, 51]) == [1, 50]  # 51 arrived after SELECT: the next tick reads it


# A folder of 12 messages, UIDs 1..12; the odd ones arrived before SINCE (the dates are not monotonic in UID,
# as after moving old mail into a folder).
FOLDER = {uid: date(2026, 6, 10) if uid % 2 else date(2026, 6, 25) for uid in range(1, 13)}


def simulate(mode, state, stops):
    """Ticks of the cursor rules over FOLDER, one message per batch; tick i stops after ``stops[i]`` messages.

    After the stops, ticks run uninterrupted until the cursor no longer moves. Returns (fetched, state).
    """
    status = FolderStatus("INBOX", uidvalidity=100, uidnext=13)
    fetched = []
    for stop in [*stops, None, None, None]:
        plan = plan_folder_sync(mode, SINCE, status, state)
        if plan.search == SEARCH_ALL:
            found = list(FOLDER)
        elif plan.search == SEARCH_SINCE:
            found = [uid for uid, day in FOLDER.items() if day >= plan.since]
        elif plan.search == SEARCH_FROM_UID:
            found = [uid for uid in FOLDER if uid >= plan.start_uid] or [max(FOLDER)]
        else:
            found = []
        to_fetch = uids_to_fetch(plan, found)
        attempted = to_fetch[:stop]
        fetched.extend(attempted)
        state = next_cursor(plan, to_fetch, attempted, set(attempted)) or state
    return fetched, state


@pytest.mark.parametrize(
    "mode, state, wanted",
    [
        ("full", None, set(FOLDER)),
        ("since", None, {uid for uid, day in FOLDER.items() if day >= SINCE}),
        ("new-only", RESET, set(FOLDER)),  # a UIDVALIDITY change sweeps everything
    ],
)
@pytest.mark.parametrize("stops", [[0], [0, 0], [1], [3], [1, 0, 2], [5, 5]])
def test_a_sweep_stopped_anywhere_ends_with_exactly_what_an_uninterrupted_one_takes(mode, state, wanted, stops):
    fetched, final = simulate(mode, state, stops)
    assert set(fetched) == wanted  # nothing lost, and a 'since' sweep never reads what is older than its date
    assert final == CursorState(100, 12)
@pytest.mark.parametrize(
    "uids, sizes, max_bytes, groups",
    [
        ([], {}, 100, []),
        ([1, 2, 3], {1: 10, 2: 10, 3: 10}, 100, [[1, 2, 3]]),
        ([1, 2, 3, 4], {1: 10, 2: 10, 3: 25, 4: 5}, 30, [[1, 2], [3, 4]]),
        ([1, 2, 3], {1: 10, 2: 20, 3: 1}, 30, [[1, 2], [3]]),  # exactly the budget still fits
        ([1, 2, 3], {1: 50, 2: 1, 3: 60}, 30, [[1], [2], [3]]),  # over the budget alone: a group of its own
        ([7, 9], {9: 5}, 5, [[7, 9]]),  # an unknown size counts as 0
    ],
)
def test_fetch_groups(uids, sizes, max_bytes, groups):
    assert fetch_groups(uids, sizes, max_bytes) == groups
