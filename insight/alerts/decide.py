"""When an alert is due: the pure rules of ``detectdrops``, apart from the SQL that feeds them.

A drop compares the last 7 complete days with data (ending at the newest day with daily data before today) with
the 7 days before; it needs daily data on all 14 days (a gap is too little to judge, not a fall) and a fall of at
least the org's share *and* clicks. Late data compares the days since the newest data with what the site's
schedule, else its upload habit, allows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from math import ceil
from statistics import median

from seoinsight.models import SEARCH_CONSOLE_SETTLING_DAYS

WEEK = 7
TOP_PAGES = 20  # the pages judged for page_drop: the site's top ones by clicks in the week before
HABIT_IMPORTS = 8  # the site's most recent import days that make its upload habit
HABIT_GAPS = 2  # fewer gaps between import days than this: no habit yet, the floor alone


@dataclass(frozen=True)
class Thresholds:
    percent: int = 30
    clicks: int = 50


DEFAULT_THRESHOLDS = Thresholds()


@dataclass(frozen=True)
class Weeks:
    """The week judged (``start``..``end``) and the one before it (``previous_start``..``previous_end``)."""

    start: date
    end: date

    @property
    def previous_start(self) -> date:
        return self.start - timedelta(days=WEEK)

    @property
    def previous_end(self) -> date:
        return self.start - timedelta(days=1)

    def days(self) -> list[date]:
        return [self.previous_start + timedelta(days=n) for n in range(2 * WEEK)]


@dataclass(frozen=True)
class Drop:
    weeks: Weeks
    before: float
    after: float
    page_url: str = ""


@dataclass(frozen=True)
class Late:
    newest: date
    today: date
    allowed: int  # days without new data the site's habit allows
    age: int  # days since its newest data

    @property
    def first_missing(self) -> date:
        return self.newest + timedelta(days=1)

    @property
    def last_missing(self) -> date:
        return self.today - timedelta(days=1)


def weeks_ending(newest_day: date | None, today: date) -> Weeks | None:
    """The week judged: the 7 days up to the newest day with data before ``today`` (which is not complete).

    >>> weeks_ending(date(2026, 12, 6), date(2026, 12, 8))
    Weeks(start=datetime.date(2026, 11, 30), end=datetime.date(2026, 12, 6))
    >>> weeks_ending(date(2026, 12, 8), date(2026, 12, 8)) is None, weeks_ending(None, date(2026, 12, 8)) is None
    (True, True)
    """
    if newest_day is None or newest_day >= today:
        return None
    return Weeks(newest_day - timedelta(days=WEEK - 1), newest_day)


def fell(before: float | None, after: float | None, thresholds: Thresholds) -> bool:
    """Whether clicks fell by at least both thresholds (a share of ``before`` and a number of clicks).

    >>> t = Thresholds(30, 50)
    >>> fell(200, 140, t), fell(200, 141, t), fell(100, 40, t), fell(1000, 750, t)
    (True, False, True, False)
    """
    if not before or after is None:
        return False
    fall = before - after
    return fall >= thresholds.clicks and fall * 100 >= before * thresholds.percent


def judged_weeks(daily_clicks: dict[date, float], today: date) -> Weeks | None:
    """The weeks a site's clicks per day with data allow judging: None when a day of the 14 has no data."""
    weeks = weeks_ending(max((d for d in daily_clicks if d < today), default=None), today)
    if weeks is None or any(day not in daily_clicks for day in weeks.days()):
        return None
    return weeks


def site_drop(daily_clicks: dict[date, float], today: date, thresholds: Thresholds) -> Drop | None:
    """The site's drop, from its clicks per day with data (days before ``today``); None if steady or too little data."""
    weeks = judged_weeks(daily_clicks, today)
    if weeks is None:
        return None
    before = sum(daily_clicks[d] for d in weeks.days()[:WEEK])
    after = sum(daily_clicks[d] for d in weeks.days()[WEEK:])
    return Drop(weeks, before, after) if fell(before, after, thresholds) else None


def page_drops(weeks: Weeks, pages: list[tuple[str, float, float]], thresholds: Thresholds) -> list[Drop]:
    """The top pages (by clicks the week before; ties by URL) that fell: ``pages`` is (url, before, after)."""
    top = sorted(pages, key=lambda p: (-(p[1] or 0), p[0]))[:TOP_PAGES]
    return [Drop(weeks, before, after or 0, page_url=url) for url, before, after in top
            if fell(before, after or 0, thresholds)]


def allowed_delay(schedule_days: list[int], import_days: list[date], floor: int) -> int:
    """Days without new data the site's habit allows: its pull schedule's period, else its uploads' median gap.

    Either plus the days Search Console's figures take to settle; the upload habit never under ``floor``
    (``IMPORT_STALE_AFTER_DAYS``, when the admin's index calls a site stale). Worked examples in the tests.
    """
    scheduled = [days for days in schedule_days if days]
    if scheduled:
        return min(scheduled) + SEARCH_CONSOLE_SETTLING_DAYS
    days = sorted(set(import_days))[-HABIT_IMPORTS:]
    gaps = [(later - earlier).days for earlier, later in zip(days, days[1:], strict=False)]
    if len(gaps) < HABIT_GAPS:
        return floor
    return max(floor, ceil(median(gaps)) + SEARCH_CONSOLE_SETTLING_DAYS)


def late(newest: date | None, today: date, allowed: int) -> Late | None:
    """Late data: more days since the newest data than allowed; None for a site with no data (nothing to judge).

    >>> late(date(2026, 11, 27), date(2026, 12, 8), 7).age
    11
    >>> late(date(2026, 12, 1), date(2026, 12, 8), 7) is None
    True
    """
    if newest is None:
        return None
    age = (today - newest).days
    return Late(newest, today, allowed, age) if age > allowed else None
