"""The portfolio's pure rules, by tables of cases: the order of its rows, the sparkline's drawing, the site page's
address; and its statement, which reads the day sums only, never the metric rows (EXPLAIN)."""

import re
from datetime import date, timedelta

import pytest
from django.db import connection

from insight.portfolio import figures, links, ordering, sparkline, sql
from insight.portfolio.figures import SiteRow
from insight.sitepage.display import Sums
from seoinsight import periods
from seoinsight.periods import Period


def row(name, clicks=None, before=None, *, ctr=None, ctr_before=None, position=None, position_before=None,
        newest=None, alerts=0):
    return SiteRow(site_id=ord(name[0]), domain=name, newest=newest,
                   current=Sums(clicks, None, ctr, position), previous=Sums(before, None, ctr_before, position_before),
                   days={}, alerts=[object()] * alerts)


ROWS = [
    row("a.example", 100, 300, ctr=0.05, ctr_before=0.04, position=3.0, position_before=5.0,
        newest=date(2026, 5, 14), alerts=1),
    row("b.example", 40, 20, ctr=0.02, ctr_before=0.03, position=9.0, position_before=6.0, newest=date(2026, 5, 10)),
    row("c.example", None, 90, newest=date(2026, 3, 1), alerts=2),  # no data now: fell by all its clicks
    row("d.example", 10, None, ctr=0.10, position=1.5, newest=date(2026, 5, 14)),  # new: no change
    row("e.example"),  # no data at all
]


@pytest.mark.parametrize(("sort", "order"), [
    (None, "acbde"),  # −200, −90, +20, then no change (d, e) by domain
    ("clicks_delta", "acbde"),
    ("-clicks_delta", "bcade"),
    ("clicks_change", "cabde"),  # −100 %, −66.7 %, +100 %
    ("-clicks", "abdce"),
    ("site", "abcde"),
    ("-site", "edcba"),
    ("ctr_change", "bacde"),
    ("position", "dabce"),  # the best first
    ("-position_change", "bacde"),  # the worst move first: b went from 6 to 9
    ("newest", "cbade"),  # the oldest data first
    ("-open", "cabde"),
])
def test_the_rows_order(sort, order):
    assert "".join(r.domain[0] for r in ordering.ordered(ROWS, sort)) == order


@pytest.mark.parametrize(("value", "parsed"), [
    ("-open", ("open", True)), ("newest", ("newest", False)), ("", ("clicks_delta", False)),
    ("--clicks", ("clicks_delta", False)), ("CLICKS", ("clicks_delta", False)),
])
def test_a_sort_parameter(value, parsed):
    assert ordering.parse_sort(value) == parsed


def test_every_sort_offered_is_bounded_and_parses_to_itself():
    assert len(ordering.SORTS) == 2 * len(ordering.COLUMNS)
    for sort in ordering.SORTS:
        column, descending = ordering.parse_sort(sort)
        assert f"{'-' if descending else ''}{column}" == sort


# --- the sparkline -------------------------------------------------------------------------------------------

WEEK = Period(date(2026, 5, 1), date(2026, 5, 7))


@pytest.mark.parametrize(("days", "runs"), [
    ({}, []),
    ({date(2026, 5, 1): 5}, [1]),
    ({date(2026, 5, n): n for n in range(1, 8)}, [7]),
    ({date(2026, 5, 1): 0, date(2026, 5, 2): None, date(2026, 5, 3): 4, date(2026, 5, 4): 2}, [1, 2]),
    ({date(2026, 5, 2): 10, date(2026, 5, 4): 0, date(2026, 5, 5): 0, date(2026, 5, 7): 3}, [1, 2, 1]),
])
def test_the_sparkline_breaks_at_days_without_data_and_stays_inside_its_drawing(days, runs):
    drawn = sparkline.points(WEEK, days)
    assert [len(run) for run in drawn] == runs
    for x, y in (point for run in drawn for point in run):
        assert 0 <= x <= sparkline.WIDTH and 0 <= y <= sparkline.HEIGHT
    if any(days.values()):  # the highest day at the top of the drawing
        assert min(y for run in drawn for _, y in run) == sparkline.PAD


def test_the_sparkline_escapes_notes_and_marks_their_days():
    svg = sparkline.svg(WEEK, {date(2026, 5, 2): 1234}, [(date(2026, 5, 2), 'moved "<b>"'), (date(2026, 5, 5), "x")])
    assert "<title>2026-05-02: 1,234 clicks · note: moved &quot;&lt;b&gt;&quot;</title>" in svg
    assert "<title>2026-05-05: no data · note: x</title>" in svg
    assert svg.count('class="spark-note"') == 2 and "<b>" not in svg


# --- the site page's address --------------------------------------------------------------------------------

TODAY = date(2026, 5, 20)


@pytest.mark.parametrize(("preset", "compare", "site_newest", "expected"), [
    ("28d", "previous", date(2026, 5, 14), {"period": "28d"}),
    ("28d", "year", date(2026, 5, 14), {"period": "28d", "compare": "year"}),
    ("28d", "previous", date(2026, 5, 10), {"period": "custom", "from": "2026-04-17", "to": "2026-05-14"}),
    ("7d", "previous", None, {"period": "custom", "from": "2026-05-08", "to": "2026-05-14"}),
    ("month", "year", None, {"period": "month", "compare": "year"}),
])
def test_a_row_links_the_site_page_with_the_same_days(preset, compare, site_newest, expected):
    choice = periods.choose(preset, today=TODAY, newest=date(2026, 5, 14), compare=compare)
    params = links.site_page_params(choice, site_newest, TODAY)
    assert params == expected
    # What the site page will choose from these parameters is the portfolio's period, whatever the site's data.
    shown = periods.choose(params["period"], params.get("from"), params.get("to"), today=TODAY, newest=site_newest,
                           compare=params.get("compare"))
    assert (shown.current, shown.previous) == (choice.current, choice.previous)


# --- the statement ----------------------------------------------------------------------------------------

@pytest.mark.django_db
def test_the_figures_come_from_the_day_sums_never_the_metric_rows(target):
    choice = periods.choose("90d", today=TODAY, newest=TODAY - timedelta(days=1), compare="year")
    params = {"org": target.site.org_id, "today": TODAY, "pattern": None, "start": choice.current.start,
              "end": choice.current.end, "previous_start": choice.previous.start, "previous_end": choice.previous.end}
    for statement in (sql.FIGURES, sql.NEWEST_DAY):
        assert statement.lstrip().startswith("-- portfolio.")
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN " + statement, params)
            plan = "\n".join(r[0] for r in cursor.fetchall())
        assert "imports_sitepage_day_sums" in plan
        assert not re.search(r"\bimports_urlmetric\b", plan), plan
    assert figures.site_rows(target.site.org_id, choice, today=TODAY)[0].current == Sums()
