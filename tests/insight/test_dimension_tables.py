"""The site page's queries, devices and countries tables: what counts when exports overlap (held to SUM() over
the raw rows), sort, search, pages, the device and country filter, bad parameters and another org's site."""

import re
from datetime import date, timedelta

import pytest
from django.db.models import Sum
from django.utils import timezone

from imports.dimension_models import DimensionMetric
from insight.sitepage import dimension_rules as rules
from insight.sitepage import dimensions
from seoinsight.periods import Choice, Period
from tests.factories import OrgFactory, SiteFactory, SiteTargetFactory

pytestmark = pytest.mark.django_db

MARCH = Period(date(2024, 3, 1), date(2024, 3, 28))
FEBRUARY = Period(date(2024, 2, 2), date(2024, 2, 29))
CHOICE = Choice("custom", MARCH, FEBRUARY)
SHOWN = {"period": "custom", "from": "2024-03-01", "to": "2024-03-28"}


def metric(target, key, start, end, clicks, impressions=100, position=2.0, dimension="query"):
    row = DimensionMetric.objects.create(site_target=target, dimension=dimension, key=key, period_start=start,
                                         period_end=end, clicks=clicks, impressions=impressions,
                                         ctr=clicks / impressions if impressions else None, position=position)
    return row


def imported_later(*rows):
    """Make ``rows`` the most recently imported (an import's upsert sets updated_at to its own now())."""
    later = timezone.now() + timedelta(minutes=5)
    DimensionMetric.objects.filter(pk__in=[r.pk for r in rows]).update(updated_at=later)


def page(client, target, **params):
    response = client.get(f"/imports/sites/{target.site_id}/", {**SHOWN, **params})
    assert response.status_code == 200
    return response.content.decode()


def shown_keys(html: str) -> list[str]:
    return re.findall(r'<tr data-key="([^"]*)"', html)


@pytest.fixture
def overlapping(target):
    """Queries of March from five sources that overlap: daily rows (a pull), a 7-day export of the same days,
    a 28-day export imported first, a 14-day export imported after it, a 90-day export crossing the edge."""
    daily = [metric(target, "seo", date(2024, 3, d), date(2024, 3, d), d, 50, 3.0) for d in range(1, 8)]
    week = [metric(target, "seo", date(2024, 3, 1), date(2024, 3, 7), 500, 9000, 9.0)]
    month = [metric(target, "seo", date(2024, 3, 1), date(2024, 3, 28), 700, 9000, 9.0),
             metric(target, "audit", date(2024, 3, 1), date(2024, 3, 28), 40, 400, 4.0)]
    fortnight = [metric(target, "seo", date(2024, 3, 8), date(2024, 3, 21), 60, 600, 5.0)]
    quarter = [metric(target, "seo", date(2024, 1, 1), date(2024, 3, 30), 9999, 99999, 1.0)]
    imported_later(*fortnight)
    return {"daily": daily, "week": week, "month": month, "fortnight": fortnight, "quarter": quarter}


def raw_sums(rows) -> dict:
    return DimensionMetric.objects.filter(pk__in=[r.pk for r in rows]).aggregate(
        clicks=Sum("clicks"), impressions=Sum("impressions"))


def test_overlapping_exports_count_each_day_of_a_query_once(target, overlapping):
    rows, total = dimensions.table(target.site_id, [target.pk], CHOICE, "query")

    found = {row.key: row for row in rows}
    assert total == 2
    # "seo": its daily rows, then the 14-day export (imported after the 28-day one, which it overlaps); the 7-day
    # export lies under daily rows, the 90-day one crosses the period's edge.
    counted = raw_sums(overlapping["daily"] + overlapping["fortnight"])
    assert (found["seo"].clicks, found["seo"].impressions) == (counted["clicks"], counted["impressions"]) == (88, 950)
    everything = raw_sums([r for rows in overlapping.values() for r in rows if r.key == "seo"])
    assert everything["clicks"] > found["seo"].clicks  # what adding every row up would have said
    # "audit" is only in the 28-day export: no other row of its own overlaps it, so it counts.
    assert (found["audit"].clicks, found["audit"].impressions) == tuple(raw_sums(
        [r for r in overlapping["month"] if r.key == "audit"]).values())
    # Position weighted by impressions over the counted rows: (7 × 50 × 3.0 + 600 × 5.0) / 950.
    assert found["seo"].position == pytest.approx((350 * 3.0 + 600 * 5.0) / 950)


def test_without_daily_rows_the_newest_export_wins_then_the_older_ones_that_overlap_no_kept_one(target, overlapping):
    DimensionMetric.objects.filter(pk__in=[r.pk for r in overlapping["daily"]]).delete()
    rows, _ = dimensions.table(target.site_id, [target.pk], CHOICE, "query", only="seo")
    # Newest first: the 14-day export (08 → 21) is kept, the 28-day one overlaps it, the 7-day one (01 → 07) does
    # not: each day counted once, from the newest export that covers it whole.
    assert rows[0].clicks == raw_sums(overlapping["fortnight"] + overlapping["week"])["clicks"] == 560
    imported_later(*overlapping["month"])
    rows, _ = dimensions.table(target.site_id, [target.pk], CHOICE, "query", only="seo")
    assert rows[0].clicks == raw_sums([r for r in overlapping["month"] if r.key == "seo"])["clicks"] == 700


def test_each_export_says_which_period_it_covers_and_what_of_it_counts(client, member, target, overlapping):
    html = page(client, target)

    assert "The daily Queries rows 2024-03-01 → 03-07: all its 7 queries are counted." in html
    assert ("The Queries table of the 7-day export 2024-03-01 → 03-07 is not counted: daily rows cover some of its "
            "days.") in html
    assert ("The Queries table of the 28-day export 2024-03-01 → 03-28: 1 of its 2 queries is counted; 1 is not: "
            "daily rows cover some of their days.") in html
    assert "The Queries table of the 14-day export 2024-03-08 → 03-21: its one query is counted." in html
    assert ("The Queries table of the 90-day export 2024-01-01 → 03-30 is not counted: it covers days outside the "
            "period shown.") in html


@pytest.mark.parametrize(("table", "sources"), [
    (rules.Table(MARCH, False, 10, 10), ("all its 10 queries are counted", "counted")),
    (rules.Table(Period(date(2024, 2, 1), date(2024, 3, 28)), False, 10, 0), ("covers days outside", "left")),
    (rules.Table(MARCH, False, 10, 0, 10, 0), ("is not counted: daily rows cover some of its days", "left")),
    (rules.Table(MARCH, False, 10, 0, 0, 10), ("is not counted: a more recently imported export", "left")),
    (rules.Table(MARCH, False, 10, 4, 5, 1), ("4 of its 10 queries are counted; 5 are not: daily rows cover some "
                                             "of their days; 1 is not: a more recently", "partly")),
    (rules.Table(Period(date(2024, 3, 1), date(2024, 3, 9)), True, 9, 9), ("The daily Queries rows", "counted")),
])
def test_what_a_table_adds_in_words(table, sources):
    text, tone = rules.coverage(table, "query", MARCH)
    assert sources[0] in text and tone == sources[1]


def test_the_tables_rows_and_the_previous_period(client, member, target):
    metric(target, "seo", date(2024, 3, 1), date(2024, 3, 28), 30)
    metric(target, "seo", date(2024, 2, 2), date(2024, 2, 29), 20)
    metric(target, "Mobile", date(2024, 3, 1), date(2024, 3, 28), 80, dimension="device")
    metric(target, "France", date(2024, 3, 1), date(2024, 3, 28), 70, dimension="country")

    html = page(client, target)
    assert shown_keys(html) == ["seo"]
    assert '<td class="num change better" title="20 clicks before">+50.0%</td>' in html
    assert shown_keys(page(client, target, table="devices")) == ["Mobile"]
    assert shown_keys(page(client, target, table="countries")) == ["France"]
    assert 'data-dimension-table="countries"' in page(client, target, table="countries")


@pytest.fixture
def thirty(target):
    for n in range(30):
        metric(target, f"q{n:02d}_x" if n % 2 else f"q{n:02d}", date(2024, 3, 1), date(2024, 3, 28), n,
               impressions=1000 - n, position=float(n % 7) + 1)
    metric(target, "50% off", date(2024, 3, 1), date(2024, 3, 28), 1)


@pytest.mark.parametrize(("dsort", "key"), [
    ("-clicks", lambda r: -r.clicks), ("clicks", lambda r: r.clicks), ("-impressions", lambda r: -r.impressions),
    ("position", lambda r: r.position), ("key", lambda r: r.key), ("-key", None),
])
def test_the_table_sorts_by_each_column(target, thirty, dsort, key):
    rows, _ = dimensions.table(target.site_id, [target.pk], CHOICE, "query", sort=dsort, page_size=None)
    if key is None:
        assert [r.key for r in rows] == sorted((r.key for r in rows), reverse=True)
    else:
        assert [key(r) for r in rows] == sorted(key(r) for r in rows)


def test_the_table_searches_literally_and_pages(client, member, target, thirty):
    assert shown_keys(page(client, target, dq="%")) == ["50% off"]
    assert shown_keys(page(client, target, dq="_X", dsort="key")) == [f"q{n:02d}_x" for n in range(1, 30, 2)]
    first, second = page(client, target, dsort="key"), page(client, target, dsort="key", dpage="2")
    assert shown_keys(first) + shown_keys(second) == sorted(shown_keys(first) + shown_keys(second))
    assert len(shown_keys(first)) == rules.PAGE_SIZE and len(shown_keys(second)) == 31 - rules.PAGE_SIZE
    assert "Page 2 of 2" in second
    assert shown_keys(page(client, target, dsort="key", dpage="9")) == shown_keys(first)  # past the end: page 1


@pytest.mark.parametrize(("params", "said"), [
    ({"dsort": "clicks; DROP TABLE x"}, "The table’s sort is not one this page offers"),
    ({"table": "secrets"}, "The table must be one of"),
    ({"dpage": "0"}, "The page number must be a whole number"),
    ({"dq": "a\x01b"}, "The table’s search holds a control character"),
    ({"device": "Toaster"}, "The device is not one this site’s exports name: Mobile."),
    ({"country": "x" * 201}, "The country is longer than 200 characters"),
])
def test_a_bad_parameter_shows_the_default_and_says_why_and_a_csv_with_it_is_refused(client, member, target, params,
                                                                                     said):
    metric(target, "seo", date(2024, 3, 1), date(2024, 3, 28), 30)
    metric(target, "Mobile", date(2024, 3, 1), date(2024, 3, 28), 80, dimension="device")
    html = page(client, target, **params)
    assert said.replace("’", "&#x27;") in html.replace("’", "&#x27;") or said in html
    assert shown_keys(html) == ["seo"]
    csv = client.get(f"/imports/sites/{target.site_id}/", {**SHOWN, **params, "format": "csv", "table": "queries"}
                     if "table" not in params else {**SHOWN, **params, "format": "csv"})
    assert csv.status_code == 400 and csv["Content-Type"].startswith("text/plain")


def test_the_filter_shows_the_chosen_devices_figures_and_its_daily_chart(client, member, target):
    for d in range(1, 29):
        metric(target, "Mobile", date(2024, 3, d), date(2024, 3, d), d, 10 * d, dimension="device")
        metric(target, "Desktop", date(2024, 3, d), date(2024, 3, d), 1, 10, dimension="device")
    metric(target, "France", date(2024, 3, 1), date(2024, 3, 28), 70, dimension="country")

    html = page(client, target, device="Mobile", table="devices")

    mobile = DimensionMetric.objects.filter(key="Mobile").aggregate(Sum("clicks"))["clicks__sum"]
    assert re.search(r'data-metric="clicks">\s*<div class="name">Clicks</div>\s*<div class="value" data-current>'
                     rf'{mobile}</div>', html.split('id="filtered"')[1].split("</section>")[0])
    assert 'id="chart-device"' in html and "data-no-filtered-chart" not in html
    assert '<option value="Mobile" selected>Mobile</option>' in html
    assert '<option value="France">France</option>' in html
    assert 'data-pages-not-filtered' in html and "data-not-split" in html
    assert '<tr data-key="Mobile" class="selected">' in html

    country = page(client, target, country="France")
    assert "data-no-filtered-chart" in country and "2024-03-01 → 03-28" in country
    assert "data-queries-not-filtered" in country
    assert "data-dimension-filter" not in page(client, target)


def test_a_site_without_devices_or_countries_offers_no_filter(client, member, target):
    metric(target, "seo", date(2024, 3, 1), date(2024, 3, 28), 30)
    html = page(client, target)
    assert 'name="device"' not in html and 'name="country"' not in html


def test_another_orgs_site_is_a_404_and_its_rows_never_join_ours(client, member, target):
    rival_target = SiteTargetFactory(site=SiteFactory(org=OrgFactory(id="rival"), domain="rival.example"))
    metric(rival_target, "theirs", date(2024, 3, 1), date(2024, 3, 28), 500)
    metric(rival_target, "Tablet", date(2024, 3, 1), date(2024, 3, 28), 500, dimension="device")
    metric(target, "ours", date(2024, 3, 1), date(2024, 3, 28), 5)
    for params in ({}, {"table": "devices"}, {"format": "csv", "table": "queries"}):
        assert client.get(f"/imports/sites/{rival_target.site_id}/", {**SHOWN, **params}).status_code == 404
    # The rival's target id named beside ours reads nothing of theirs: the site decides.
    rows, _ = dimensions.table(target.site_id, [target.pk, rival_target.pk], CHOICE, "query")
    assert [r.key for r in rows] == ["ours"]
    assert dimensions.keys(target.site_id, [target.pk, rival_target.pk], "device") == []
    assert "The device is not one this site" in page(client, target, device="Tablet").replace("&#x27;", "’")


def test_a_chain_of_overlapping_exports_keeps_the_newest_and_each_older_one_that_overlaps_no_kept_one(target):
    first = metric(target, "seo", date(2024, 3, 1), date(2024, 3, 14), 14)
    middle = metric(target, "seo", date(2024, 3, 10), date(2024, 3, 20), 11)
    last = metric(target, "seo", date(2024, 3, 15), date(2024, 3, 28), 28)
    imported_later(last)

    rows, _ = dimensions.table(target.site_id, [target.pk], CHOICE, "query")

    assert rows[0].clicks == raw_sums([first, last])["clicks"] == 42  # the middle one overlaps both
    assert raw_sums([first, middle, last])["clicks"] == 53


# SOURCES is left out: exports that start up to LONGEST_EXPORT_DAYS before the period and reach into it are
# found by reading that range (no index leads with the last day); the counts themselves are TABLE's.
@pytest.mark.parametrize("statement", ["TABLE", "POINTS"])
def test_the_statements_read_a_week_through_the_dimension_index(target, statement):
    """60 queries a day for 1,030 days, analyzed: a week's rows are found through dimensionmetric_top."""
    from django.db import connection
    with connection.cursor() as cursor:
        cursor.execute("""
            INSERT INTO imports_dimensionmetric (site_target_id, dimension, key, period_start, period_end, clicks,
                                                 impressions, ctr, position, updated_at)
            SELECT %s, 'query', 'q' || n, d, d, 1, 10, 0.1, 5, now()
            FROM generate_series(1, 60) AS n CROSS JOIN generate_series(date '2022-01-01', date '2024-10-26',
                                                                           interval '1 day') AS d
        """, [target.pk])
        cursor.execute("ANALYZE imports_dimensionmetric")
        week = Choice("custom", Period(date(2024, 5, 8), date(2024, 5, 14)), Period(date(2024, 5, 1), date(2024, 5, 7)))
        sql = getattr(dimensions, statement)
        params = dimensions._params(target.site_id, [target.pk], week, "query", only="q1" if statement == "POINTS"
                                    else None, limit=25, offset=0, longest=dimensions.LONGEST_EXPORT_DAYS)
        cursor.execute("EXPLAIN " + (sql.format(order=rules.order_by(None)) if statement == "TABLE" else sql), params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "dimensionmetric_top" in plan or "dimensionmetric_natural_key" in plan, plan
    assert "Seq Scan on imports_dimensionmetric" not in plan, plan
