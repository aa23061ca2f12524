"""Which days the site page shows, and the period they are compared with. Pure.

A preset of the last N days ends on the newest day with data, as Search
Console's does (its data lags a few days: ending on yesterday would compare a
partly empty period with a full one); "last month" is the calendar month before
today's. The period compared with has the same length: the one that ends the day before
(``previous``), or the same weekdays 52 weeks (364 days) before (``year``: a Monday is compared
with a Monday, and no February 29 has to be guessed).
A metric row counts in a period only when its whole period lies inside it
(sql.py applies the rule): a month-long row is never split into days.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta

from seoinsight import query_params

LAST_DAYS = {"7d": 7, "28d": 28, "90d": 90}
PRESETS = {"7d": "Last 7 days", "28d": "Last 28 days", "90d": "Last 90 days", "month": "Last month",
           "custom": "Custom"}
DEFAULT = "28d"
DAY = timedelta(days=1)
# What a period is compared with (``?compare=``), as the pages say it.
COMPARES = {"previous": "the previous period", "year": "the same weekdays 52 weeks before"}
DEFAULT_COMPARE = "previous"
# "A year before" is 52 weeks: weekly rhythms line up, and every period has a whole one to compare with.
YEAR = timedelta(weeks=52)


@dataclass(frozen=True)
class Period:
    """From ``start`` to ``end``, both days included."""

    start: date
    end: date

    def __str__(self) -> str:
        return f"{self.start:%Y-%m-%d}" if self.start == self.end else f"{self.start:%Y-%m-%d} → {self.end:%Y-%m-%d}"

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1

    def previous(self) -> Period:
        """The period of the same length that ends the day before this one starts.

        >>> print(Period(date(2026, 3, 1), date(2026, 3, 31)).previous())
        2026-01-29 → 2026-02-28
        """
        return Period(self.start - self.days * DAY, self.start - DAY)

    def year_before(self) -> Period:
        """The same weekdays 52 weeks (364 days) before.

        >>> print(Period(date(2028, 2, 1), date(2028, 2, 29)).year_before())
        2027-02-02 → 2027-03-02
        """
        return Period(self.start - YEAR, self.end - YEAR)

    def compared(self, compare: str) -> Period:
        """The period this one is compared with: ``year`` (52 weeks before) or anything else, the previous one."""
        return self.year_before() if compare == "year" else self.previous()

    def each_day(self) -> list[Period]:
        """Every day of the period, each a one-day Period."""
        return [Period(self.start + n * DAY, self.start + n * DAY) for n in range(self.days)]


@dataclass(frozen=True)
class Choice:
    """The preset shown, its period and the one it is compared with (``previous``, chosen by ``compare``).

    ``problem``: why the request was not followed.
    """

    preset: str
    current: Period
    previous: Period
    problem: str = ""
    compare: str = DEFAULT_COMPARE

    @property
    def compared_with(self) -> str:
        """How the page says what ``previous`` is: "the previous period", "the same weekdays 52 weeks before"."""
        return COMPARES[self.compare]

    @property
    def instead(self) -> str:
        """What the page shows in place of a period it could not follow."""
        return f"Showing the {PRESETS[self.preset].lower()} instead."


def choose(preset: str | None, start: str | None = None, end: str | None = None, *, today: date,
           newest: date | None, max_days: int | None = None, compare: str | None = None) -> Choice:
    """The period a request asks for: a preset name, or ``custom`` with ISO dates ``start`` and ``end``.

    ``newest`` is the newest day with data (None: no data yet, then yesterday). An unknown
    preset is the default one; a custom range that cannot be read, or outside the bounds of
    ``query_params`` (2000-01-01 to today, ``max_days`` long at most, default the
    ``QUERY_MAX_PERIOD_DAYS`` setting), is the default too, with the reason in ``problem``.
    ``compare``: ``year`` compares with the same weekdays 52 weeks before; anything else with the previous period.

    >>> choose("7d", today=date(2026, 12, 10), newest=date(2026, 12, 7)).current
    Period(start=datetime.date(2026, 12, 1), end=datetime.date(2026, 12, 7))
    >>> choose("custom", "2026-12-05", "2026-12-01", today=date(2026, 12, 10), newest=None).problem
    'The custom period starts after it ends.'
    >>> choose("custom", "5001-01-01", "9999-12-31", today=date(2026, 12, 10), newest=None).problem
    'The custom period’s start, 5001-01-01, is after 2026-12-10 (today).'
    >>> print(choose("7d", today=date(2026, 12, 10), newest=date(2026, 12, 7), compare="year").previous)
    2025-12-02 → 2025-12-08
    """
    compare = compare if compare in COMPARES else DEFAULT_COMPARE
    problem = ""
    if preset == "custom":
        try:
            period = _custom(start, end, today=today, max_days=max_days)
            return Choice("custom", period, period.compared(compare), compare=compare)
        except query_params.BadParameter as exc:
            problem = str(exc)
    elif preset == "month":
        period = last_month(today)
        return Choice("month", period, period.compared(compare), compare=compare)
    if preset not in LAST_DAYS:
        preset = DEFAULT
    period = last_days(LAST_DAYS[preset], today=today, newest=newest)
    return Choice(preset, period, period.compared(compare), problem, compare)


def preset_periods(today: date, newest_days: Iterable[date | None]) -> list[Period]:
    """The period shown by each preset (custom aside) for each newest day with data, once each, in order.

    What the top pages are precomputed for: a site's targets together and each alone may end on different days.

    >>> [str(p) for p in preset_periods(date(2026, 3, 15), [date(2026, 3, 12), date(2026, 3, 12)])]
    ['2026-03-06 → 2026-03-12', '2026-02-13 → 2026-03-12', '2025-12-13 → 2026-03-12', '2026-02-01 → 2026-02-28']
    """
    found = []
    for newest in newest_days:
        for preset in PRESETS:
            if preset != "custom" and (period := choose(preset, today=today, newest=newest).current) not in found:
                found.append(period)
    return found


def last_days(count: int, *, today: date, newest: date | None) -> Period:
    """``count`` days ending on the newest day with data, never after today; yesterday without data.

    >>> print(last_days(7, today=date(2026, 12, 10), newest=None))
    2026-12-03 → 2026-12-09
    >>> print(last_days(7, today=date(2026, 12, 10), newest=date(2027, 1, 1)))
    2026-12-04 → 2026-12-10
    """
    end = today - DAY if newest is None else min(newest, today)
    return Period(end - (count - 1) * DAY, end)


def last_month(today: date) -> Period:
    """The calendar month before ``today``'s.

    >>> print(last_month(date(2026, 3, 15)))
    2026-02-01 → 2026-02-28
    """
    end = today.replace(day=1) - DAY
    return Period(end.replace(day=1), end.replace(day=calendar.monthrange(end.year, end.month)[1]))


def _custom(start: str | None, end: str | None, *, today: date, max_days: int | None) -> Period:
    if not (start or "").strip() or not (end or "").strip():
        raise query_params.BadParameter("The custom period needs a start and an end date (YYYY-MM-DD).")
    first = query_params.day(start, latest=today, latest_name="today", what="The custom period’s start")
    last = query_params.day(end, latest=today, latest_name="today", what="The custom period’s end")
    query_params.span(first, last, max_days=max_days, what="The custom period")
    return Period(first, last)


def gaps(period: Period, covered: Iterable[tuple[date, date]]) -> list[Period]:
    """The runs of days of ``period`` that no covered range (start, end) touches, in order.

    >>> [str(g) for g in gaps(Period(date(2026, 5, 1), date(2026, 5, 10)),
    ...                       [(date(2026, 5, 2), date(2026, 5, 3)), (date(2026, 5, 6), date(2026, 5, 9))])]
    ['2026-05-01', '2026-05-04 → 2026-05-05', '2026-05-10']
    """
    missing, day = [], period.start
    for start, end in sorted(covered):
        if end < day:
            continue
        if start > period.end:
            break
        if start > day:
            missing.append(Period(day, start - DAY))
        day = end + DAY
    if day <= period.end:
        missing.append(Period(day, period.end))
    return missing
