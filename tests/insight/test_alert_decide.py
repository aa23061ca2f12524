"""insight.alerts.decide: when a drop or late data makes an alert, as tables of cases (pure, no database)."""

from datetime import date, timedelta

import pytest

from insight.alerts.decide import Thresholds, Weeks, allowed_delay, fell, late, page_drops, site_drop

TODAY = date(2026, 12, 8)
NEWEST = date(2026, 12, 6)
T = Thresholds(30, 50)


def days(before: float, after: float, *, newest: date = NEWEST, missing: tuple[int, ...] = ()) -> dict:
    """14 days of clicks up to ``newest``: 7 of ``before``/7 per day then 7 of ``after``/7; ``missing`` days left out
    (counted back from ``newest``, 0 being ``newest``)."""
    clicks = {}
    for back in range(14):
        if back not in missing:
            clicks[newest - timedelta(days=back)] = (after if back < 7 else before) / 7
    return clicks


@pytest.mark.parametrize(("case", "daily", "thresholds", "expected"), [
    ("steady", days(700, 700), T, None),
    ("fell 30 % and 210 clicks", days(700, 490), T, (700, 490)),
    ("fell 29 %: not enough", days(700, 497), T, None),
    ("fell 60 % but 30 clicks: a small site", days(50, 20), T, None),
    ("fell 50 clicks exactly, 50 %", days(100, 50), T, (100, 50)),
    ("rose", days(500, 900), T, None),
    ("nothing the week before", days(0, 0), T, None),
    ("a day missing in the week judged: too little data", days(700, 100, missing=(3,)), T, None),
    ("a day missing the week before", days(700, 100, missing=(10,)), T, None),
    ("the org's own thresholds: 10 % and 5 clicks", days(100, 88), Thresholds(10, 5), (100, 88)),
    ("no data at all", {}, T, None),
    ("today's data is not complete: the weeks end yesterday",
     {**days(700, 700, newest=TODAY - timedelta(days=1)), TODAY: 0}, T, None),
])
def test_site_drop(case, daily, thresholds, expected):
    drop = site_drop(daily, TODAY, thresholds)
    found = None if drop is None else (round(drop.before), round(drop.after))
    assert found == expected, case


def test_a_drop_names_the_week_judged_and_the_one_before():
    drop = site_drop(days(700, 100), TODAY, T)
    assert drop.weeks == Weeks(date(2026, 11, 30), date(2026, 12, 6))
    assert (drop.weeks.previous_start, drop.weeks.previous_end) == (date(2026, 11, 23), date(2026, 11, 29))


@pytest.mark.parametrize(("before", "after", "expected"), [
    (200, 140, True), (200, 141, False), (100, 50, True), (100, 51, False), (1000, 750, False), (1000, 700, True),
    (0, 0, False), (None, 0, False), (80, 0, True),
])
def test_fell_needs_both_thresholds(before, after, expected):
    assert fell(before, after, T) is expected


def test_page_drops_judge_the_top_20_of_the_week_before_only():
    weeks = Weeks(date(2026, 11, 30), date(2026, 12, 6))
    pages = [(f"https://a.example/{n:02}", 1000 - n, 1000 - n) for n in range(20)]  # the top 20, steady
    pages += [("https://a.example/fell", 500, 100),  # 21st by clicks the week before: not judged
              ("https://a.example/top", 5000, 1000)]
    found = page_drops(weeks, pages, T)
    assert [(d.page_url, d.before, d.after) for d in found] == [("https://a.example/top", 5000, 1000)]


@pytest.mark.parametrize(("case", "schedules", "import_days", "expected"), [
    ("no schedule, no imports: the index's rule", [], [], 7),
    ("daily pull: a day plus 3 settling", [1], [], 4),
    ("weekly pull", [7], [], 10),
    ("the most frequent schedule wins", [7, 1], [], 4),
    ("a schedule beats the upload habit", [7], [date(2026, 9, 1), date(2026, 10, 1), date(2026, 11, 1)], 10),
    ("monthly uploads: the median gap plus 3", [], [date(2026, 9, 1), date(2026, 10, 1), date(2026, 11, 1)], 34),
    ("daily uploads: never under the floor", [], [date(2026, 11, d) for d in range(1, 9)], 7),
    ("one gap is no habit yet", [], [date(2026, 9, 1), date(2026, 11, 1)], 7),
    ("several imports a day are one day", [], [date(2026, 9, 1)] * 3 + [date(2026, 11, 1)], 7),
    ("only the 8 newest import days", [],
     [date(2025, 1, 1), date(2025, 6, 1)] + [date(2026, 11, 1) + timedelta(days=10 * n) for n in range(8)], 13),
])
def test_allowed_delay(case, schedules, import_days, expected):
    assert allowed_delay(schedules, import_days, floor=7) == expected, case


@pytest.mark.parametrize(("newest", "allowed", "expected_age"), [
    (date(2026, 12, 1), 7, None),  # 7 days: allowed
    (date(2026, 11, 30), 7, 8),
    (date(2026, 12, 3), 4, 5),
    (None, 7, None),  # no data: nothing to judge
    (date(2026, 12, 9), 7, None),  # data ahead of the day judged
])
def test_late(newest, allowed, expected_age):
    found = late(newest, TODAY, allowed)
    assert (None if found is None else found.age) == expected_age


def test_late_names_the_days_without_data():
    found = late(date(2026, 11, 27), TODAY, 7)
    assert (found.first_missing, found.last_missing) == (date(2026, 11, 28), date(2026, 12, 7))
