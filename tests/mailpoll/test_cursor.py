"""Seed 002's cursor rules, as tables."""

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


@pytest.mark.parametrize(
    "state, attempted, succeeded, expected",
    [
        (None, [], set(), 50),  # full sweep found nothing: store the high-water mark
        (None, [3, 4], {3}, 3),  # full sweep, one failure: never the high-water mark
        (CursorState(100, 42), [], set(), 42),
        (CursorState(100, 42), [43, 44], {43, 44}, 44),
    ],
)
def test_next_cursor(state, attempted, succeeded, expected):
    plan = plan_folder_sync("full", None, STATUS, state)
    assert next_cursor(plan, attempted, succeeded) == expected


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
