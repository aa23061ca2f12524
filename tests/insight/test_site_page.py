"""/imports/sites/<id>/: one site's figures over a period, against hand-computed figures on the real PostgreSQL.

Every test of the page runs twice (``site``'s parameter): on the figures summed from the
metric rows, and on the precomputed ones (migration 0006: the day sums, and the top pages
precomputed for the period shown, which the page must then read): both give the same page.
Also the rules behind it (periods, sorting, how changes read: tables of cases) and
the UrlMetric changelist, which shows the same figures row by row.
"""

import csv
import io
from datetime import date, timedelta
from urllib.parse import quote

import factory
import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.utils import timezone

from imports.ingest import position_weight
from imports.models import UrlMetric
from insight.sitepage import cache, display, figures, listing, sql
from seoinsight import periods
from seoinsight.models import Page
from seoinsight.periods import Period
from tests.factories import ImportFactory, OrgFactory, SiteFactory, SiteTargetFactory, UserFactory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]

MAY = Period(date(2026, 5, 1), date(2026, 5, 31))


class UrlMetricFactory(factory.django.DjangoModelFactory):
    """A metric row as ingest writes it: CTR from clicks and impressions, ``position_weight`` by ingest's rule."""

    class Meta:
        model = UrlMetric

    site_target = factory.SubFactory(SiteTargetFactory)
    url = factory.Sequence(lambda n: f"https://acme.example/page-{n}")
    url_normalized = factory.SelfAttribute("url")
    period_start = date(2026, 5, 1)
    period_end = factory.SelfAttribute("period_start")
    clicks = 1
    impressions = 10
    ctr = factory.LazyAttribute(lambda m: m.clicks / m.impressions if m.clicks is not None and m.impressions else None)
    position = 5.0
    position_weight = factory.LazyAttribute(lambda m: position_weight(m.position, m.impressions))


def day(n: int) -> date:
    """May ``n``, 2026."""
    return date(2026, 5, n)


def custom(start: date, end: date, **more) -> dict:
    return {"period": "custom", "from": start.isoformat(), "to": end.isoformat(), **more}


@pytest.fixture(params=["rows", "precomputed"])
def site(request, target, monkeypatch):
    """The site of ``target``; its page's figures from the metric rows, or from the precomputed sums."""
    monkeypatch.setattr(figures, "PRECOMPUTED", request.param == "precomputed")
    return target.site


def page_of(client, site, **params):
    """The page (or its CSV); with the precomputed figures, its top pages precomputed first, and read."""
    path = f"/imports/sites/{site.pk}/"
    if figures.PRECOMPUTED:
        shown = {key: value for key, value in params.items() if key != "format"}
        choice = client.get(path, shown).context["choice"]
        for target in site.targets.all():
            cache.refresh(target, [choice.current])
    response = client.get(path, params)
    assert response.status_code == 200, response.content[:500]
    if response.context is not None:
        assert response.context["precomputed"] is figures.PRECOMPUTED
    return response


def totals(response) -> dict:
    return {row["name"]: (row["current"], row["previous"], row["change"]) for row in response.context["totals"]}


def listed(response) -> list[str]:
    return [row["url"] for row in response.context["pages"]]


# --- access -------------------------------------------------------------------

def test_anonymous_is_sent_to_the_login_page(client, site):
    response = client.get(f"/imports/sites/{site.pk}/")
    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next=/imports/sites/{site.pk}/"


def test_another_orgs_site_is_a_404_like_an_unknown_one(client, member, site):
    rival = SiteFactory(org=OrgFactory(id="rival"), domain="rival.example")
    UrlMetricFactory(site_target=SiteTargetFactory(site=rival), clicks=99)
    assert client.get(f"/imports/sites/{rival.pk}/").status_code == 404
    assert client.get(f"/imports/sites/{rival.pk}/?format=csv").status_code == 404
    assert client.get(f"/imports/sites/{rival.pk + site.pk + 1000}/").status_code == 404


def test_the_imports_pages_link_each_imports_site(client, member, target, site):
    imp = ImportFactory(site_target=target, filename="Pages.csv")
    link = f'href="/imports/sites/{site.pk}/"'
    assert link in client.get("/imports/").content.decode()
    assert link in client.get(f"/imports/{imp.pk}/").content.decode()


def test_a_site_without_data_says_so_in_every_block(client, member, site):
    response = page_of(client, site, period="7d")

    html = response.content.decode()
    for empty in ("No data in this period.", "No import has data in this period.", "No page has data in this period."):
        assert empty in html
    assert response.context["choice"].current.end == timezone.localdate() - timedelta(days=1)
    assert "yesterday: no data yet" in html


# --- totals ---------------------------------------------------------------------

def test_ctr_is_clicks_over_impressions_and_position_is_weighted_by_impressions(client, member, target, site):
    UrlMetricFactory(site_target=target, period_start=day(1), clicks=10, impressions=100, position=2.0)
    UrlMetricFactory(site_target=target, period_start=day(1), clicks=5, impressions=400, position=10.0)
    # No impressions: left out of the CTR, its position counts once (ingest's weight 1).
    UrlMetricFactory(site_target=target, period_start=day(2), clicks=3, impressions=None, position=4.0)
    # Written before position_weight existed: weighted by its impressions all the same.
    UrlMetricFactory(site_target=target, period_start=day(3), clicks=0, impressions=500, position=1.0,
                     position_weight=None)
    UrlMetricFactory(site_target=target, period_start=day(8), clicks=1000)  # after the period

    response = page_of(client, site, **custom(day(1), day(7)))

    # (2*100 + 10*400 + 4*1 + 1*500) / (100 + 400 + 1 + 500); the plain mean would be 4.25.
    with figures.snapshot():
        current = figures.figures([target.pk], response.context["choice"]).current
    assert (current.clicks, current.impressions, current.rows) == (18, 1000, 4)
    assert current.ctr == pytest.approx(15 / 1000)
    assert current.position == pytest.approx(4704 / 1001)
    assert totals(response) == {"clicks": ("18", "—", "—"), "impressions": ("1,000", "—", "—"),
                                "ctr": ("1.50%", "—", "—"), "position": ("4.7", "—", "—")}
    assert "weighted by impressions, as Search Console computes it" in response.content.decode()


def test_the_previous_period_has_the_same_length_and_ends_the_day_before(client, member, target, site):
    UrlMetricFactory(site_target=target, period_start=day(3), clicks=40, impressions=1000, position=5.0)
    UrlMetricFactory(site_target=target, period_start=day(10), clicks=50, impressions=1000, position=4.0)
    UrlMetricFactory(site_target=target, period_start=date(2026, 4, 30), clicks=7)  # before both

    response = page_of(client, site, **custom(day(8), day(14)))

    choice = response.context["choice"]
    assert (choice.current, choice.previous) == (Period(day(8), day(14)), Period(day(1), day(7)))
    assert totals(response) == {"clicks": ("50", "40", "+25.0%"), "impressions": ("1,000", "1,000", "0.0%"),
                                "ctr": ("5.00%", "4.00%", "+1.00 pts"), "position": ("4.0", "5.0", "−1.0")}
    assert [row["tone"] for row in response.context["totals"]] == ["better", "", "better", "better"]


def test_several_targets_add_up_and_one_can_be_shown_alone(client, member, target, site):
    french = SiteTargetFactory(site=site, url_prefix="https://acme.example/fr/")
    UrlMetricFactory(site_target=target, clicks=3)
    UrlMetricFactory(site_target=french, url="https://acme.example/fr/a", clicks=4)
    UrlMetricFactory(site_target=SiteTargetFactory(site=SiteFactory(org=site.org)), clicks=500)  # another site

    assert totals(page_of(client, site, **custom(day(1), day(7))))["clicks"][0] == "7"
    alone = page_of(client, site, **custom(day(1), day(7), target=french.pk))
    assert totals(alone)["clicks"][0] == "4"
    assert listed(alone) == ["https://acme.example/fr/a"]


# --- the chart: daily rows and period rows ---------------------------------------

def test_daily_rows_are_a_point_a_day(client, member, target, site):
    for n in (1, 2, 4):
        UrlMetricFactory(site_target=target, period_start=day(n), clicks=n, impressions=10 * n)
        UrlMetricFactory(site_target=target, period_start=day(n), clicks=1, impressions=10)

    chart = page_of(client, site, **custom(day(1), day(7))).context["chart"]

    # Every day of the period: a day without data is a break in the lines, not a bridge.
    assert chart["labels"] == [f"2026-05-0{n}" for n in range(1, 8)]
    assert chart["clicks"] == [2, 3, None, 5, None, None, None]
    assert (chart["impressions"][:4], chart["daily"]) == ([20, 30, None, 50], True)
    assert chart["x"][1] - chart["x"][0] == 86400


def test_a_row_covering_a_period_is_one_point_and_counts_only_in_a_period_that_holds_it(client, member, target,
                                                                                        site):
    export = ImportFactory(site_target=target, filename="Pages.csv", period=(day(1), day(31)))
    UrlMetricFactory(site_target=target, period_start=day(1), period_end=day(31), clicks=300, source_import=export)
    UrlMetricFactory(site_target=target, period_start=day(15), clicks=2)

    whole = page_of(client, site, **custom(day(1), day(31)))
    assert whole.context["chart"]["labels"] == ["2026-05-01 → 2026-05-31", "2026-05-15"]
    assert whole.context["chart"]["daily"] is False
    assert totals(whole)["clicks"][0] == "302"
    assert b"data-mixed" in whole.content  # both kinds of rows in one period: maybe counted twice

    part = page_of(client, site, **custom(day(10), day(20)))
    assert totals(part)["clicks"][0] == "2"
    edges = part.context["edges"]
    assert [(e["imp"], e["covered"].period, e["covered"].rows) for e in edges] == [(export, MAY, 1)]
    assert "Pages.csv" in part.content.decode().split("data-edges")[1]


# --- where the figures come from ---------------------------------------------------

def test_the_imports_that_fed_the_figures_and_the_days_without_data(client, member, target, site):
    first = ImportFactory(site_target=target, filename="week1.csv", done=True)
    second = ImportFactory(site_target=target, filename="day5.csv", done=True)
    for n in (1, 2):
        UrlMetricFactory(site_target=target, period_start=day(n), source_import=first)
    UrlMetricFactory(site_target=target, period_start=day(5), source_import=second)
    UrlMetricFactory(site_target=target, period_start=day(5), source_import=None)  # its import was deleted

    response = page_of(client, site, **custom(day(1), day(7)))

    sources = [(s["imp"], str(s["covered"].period), s["covered"].rows) for s in response.context["sources"]]
    assert sources == [(first, "2026-05-01 → 2026-05-02", 2), (second, "2026-05-05", 1), (None, "2026-05-05", 1)]
    html = response.content.decode()
    assert f'href="/imports/{first.pk}/"' in html and f'href="/imports/{second.pk}/"' in html
    assert "An import deleted since" in html
    assert [str(gap) for gap in response.context["gaps"]] == ["2026-05-03 → 2026-05-04", "2026-05-06 → 2026-05-07"]
    # The previous week has no data at all: the comparison is flagged as uneven.
    assert [str(gap) for gap in response.context["previous_gaps"]] == ["2026-04-24 → 2026-04-30"]


# --- top pages ------------------------------------------------------------------

@pytest.fixture
def three_pages(target):
    """a: most clicks, worst position, growing; b: best CTR and position, shrinking; c: new this period."""
    a, b, c = (f"https://acme.example/{name}" for name in "abc")
    UrlMetricFactory(site_target=target, url=a, period_start=day(1), clicks=10, impressions=100)
    UrlMetricFactory(site_target=target, url=b, period_start=day(2), clicks=40, impressions=100)
    UrlMetricFactory(site_target=target, url=a, period_start=day(8), clicks=30, impressions=1000, position=9.0)
    UrlMetricFactory(site_target=target, url=b, period_start=day(9), clicks=20, impressions=100, position=1.5)
    UrlMetricFactory(site_target=target, url=c, period_start=day(10), clicks=5, impressions=500, position=3.0)
    return a, b, c


@pytest.mark.parametrize(("sort", "order"), [
    (None, "abc"),
    ("-clicks", "abc"),
    ("clicks", "cba"),
    ("-impressions", "acb"),
    ("-ctr", "bac"),
    ("position", "bca"),
    ("-position", "acb"),
    ("-change", "abc"),  # a +200 %, b −50 %, c new (no change: last either way)
    ("change", "bac"),
])
def test_top_pages_sort_by_each_column(client, member, site, three_pages, sort, order):
    params = custom(day(8), day(14), **({"sort": sort} if sort else {}))
    assert listed(page_of(client, site, **params)) == [f"https://acme.example/{name}" for name in order]


def test_top_pages_change_against_the_previous_period(client, member, site, three_pages):
    rows = page_of(client, site, **custom(day(8), day(14))).context["pages"]
    assert [(row["clicks"], row["previous_clicks"], row["change"], row["tone"]) for row in rows] == [
        ("30", "10", "+200.0%", "better"), ("20", "40", "−50.0%", "worse"), ("5", "—", "—", "")]


def test_top_pages_search_a_part_of_the_url_case_insensitive_and_literal(client, member, target, site):
    for path in ("Shoes/red", "shoes/blue", "hats", "sale-50%", "sale-50x"):
        UrlMetricFactory(site_target=target, url=f"https://acme.example/{path}")

    def search(q):
        return sorted(listed(page_of(client, site, **custom(day(1), day(7), q=q))))

    assert search("SHOES") == ["https://acme.example/Shoes/red", "https://acme.example/shoes/blue"]
    assert search("50%") == ["https://acme.example/sale-50%"]
    assert search("nothing") == []


def test_top_pages_are_paginated(client, member, target, site):
    for n in range(listing.PAGE_SIZE + 5):
        UrlMetricFactory(site_target=target, url=f"https://acme.example/p{n:02d}", clicks=100 - n)

    first = page_of(client, site, **custom(day(1), day(7)))
    second = page_of(client, site, **custom(day(1), day(7), page=2))
    beyond = page_of(client, site, **custom(day(1), day(7), page=9))

    assert len(listed(first)) == listing.PAGE_SIZE and listed(second)[0] == "https://acme.example/p25"
    assert len(listed(second)) == 5 and first.context["page_count"] == 30
    assert second.context["pagination"]["next"] == "" and "page=1" in second.context["pagination"]["previous"]
    assert listed(beyond) == listed(first)


def test_a_pages_rows_add_up_whether_linked_to_its_page_yet_or_not(client, member, target, site):
    url = "https://acme.example/a"
    page = Page.objects.create(site_target=target, url=url, url_normalized=url)
    UrlMetricFactory(site_target=target, url=url, period_start=day(1), clicks=7, page=page)
    UrlMetricFactory(site_target=target, url=url, period_start=day(2), clicks=5)  # map_reconcile not run yet

    rows = page_of(client, site, **custom(day(1), day(7))).context["pages"]
    assert [(row["url"], row["clicks"]) for row in rows] == [(url, "12")]


def test_a_click_on_a_page_opens_its_own_history(client, member, site, three_pages):
    a = three_pages[0]
    response = page_of(client, site, **custom(day(8), day(14)))
    assert response.context["pages"][0]["history"].endswith(f"url={quote(a, safe='')}")

    history = page_of(client, site, **custom(day(8), day(14), url=a)).context["history"]

    assert [(str(p["period"]), p["clicks"]) for p in history["points"]] == [("2026-05-08", "30")]
    assert {row["name"]: row["current"] for row in history["totals"]}["clicks"] == "30"
    assert {row["name"]: row["previous"] for row in history["totals"]}["clicks"] == "10"
    assert history["chart"]["clicks"] == [30, None, None, None, None, None, None]


# --- CSV ------------------------------------------------------------------------

def test_the_csv_holds_every_row_of_the_table_as_filtered_and_sorted(client, member, target, site):
    for n in range(listing.PAGE_SIZE + 5):
        UrlMetricFactory(site_target=target, url=f"https://acme.example/p{n:02d}", clicks=n, impressions=1000,
                         position=2.0)
    UrlMetricFactory(site_target=target, url="https://acme.example/other", clicks=1000)

    response = page_of(client, site, **custom(day(1), day(7), q="/p", sort="clicks", format="csv"))

    # The pages table alone (tests/insight/test_site_csv_tables.py holds every table to the raw rows).
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="acme.example-pages-20260501-20260507.csv"'
    rows = list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))
    assert rows[0] == ["page", "clicks", "impressions", "ctr_percent", "position", "previous_clicks",
                       "clicks_change_percent"]
    pages = rows[1:]
    assert [row[0] for row in pages] == [f"https://acme.example/p{n:02d}" for n in range(30)]
    assert pages[3] == ["https://acme.example/p03", "3", "1000", "0.3", "2.0", "", ""]


# --- the period -------------------------------------------------------------------

def test_last_n_days_end_on_the_newest_day_with_data_and_a_switch_changes_the_totals(client, member, target, site):
    today = timezone.localdate()
    UrlMetricFactory(site_target=target, period_start=today - timedelta(days=3), clicks=5)
    UrlMetricFactory(site_target=target, period_start=today - timedelta(days=20), clicks=11)

    week = page_of(client, site, period="7d")
    month = page_of(client, site, period="28d")

    assert week.context["choice"].current == Period(today - timedelta(days=9), today - timedelta(days=3))
    assert (totals(week)["clicks"][0], totals(month)["clicks"][0]) == ("5", "16")
    assert "ending on the newest day with data" in week.content.decode()


def test_a_custom_period_that_cannot_be_read_shows_the_default_and_says_why(client, member, site):
    response = page_of(client, site, period="custom", **{"from": "2026-05-09", "to": "2026-05-01"})
    assert response.context["choice"].preset == periods.DEFAULT
    assert "The custom period starts after it ends" in response.content.decode()


@pytest.fixture
def many_rows(target):
    """100 URLs x 200 days, analyzed: enough for the planner to weigh its indexes as on a large table."""
    with connection.cursor() as cursor:
        cursor.execute("""
            INSERT INTO imports_urlmetric (site_target_id, url, url_normalized, period_start, period_end, clicks,
                                           impressions, ctr, position, position_weight, source_rows, updated_at)
            SELECT %s, u.url, u.url, d, d, 1, 10, 0.1, 5, 10, 1, now()
            FROM generate_series(1, 100) AS n
            CROSS JOIN LATERAL (SELECT 'https://acme.example/p' || n AS url) AS u
            CROSS JOIN generate_series(date '2026-01-01', date '2026-07-19', interval '1 day') AS d
        """, [target.pk])
        cursor.execute("ANALYZE imports_urlmetric")


@pytest.mark.parametrize(("statement", "index"), [
    (sql.FIGURES.format(url=""), "urlmetric_site_days"),
    (sql.TOP_PAGES.format(order=listing.order_by("-clicks"), search=""), "urlmetric_site_days"),
    (sql.EDGE_ROWS.format(url=""), "urlmetric_site_periods"),
])
def test_the_statements_read_the_site_page_indexes(target, many_rows, statement, index):
    """A week of 200 days: read through the covering index of migration 0004 (edges: its partial index)."""
    choice = periods.choose("custom", "2026-05-08", "2026-05-14", today=day(20), newest=None)
    params = {"targets": [target.pk], "start": choice.current.start, "end": choice.current.end,
              "previous_start": choice.previous.start, "previous_end": choice.previous.end,
              "pattern": "%", "limit": 25, "offset": 0}
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + statement, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert index in plan, plan


# --- the rules (pure) ---------------------------------------------------------------

@pytest.mark.parametrize(("preset", "start", "end", "newest", "current", "previous"), [
    ("7d", None, None, day(20), (day(14), day(20)), (day(7), day(13))),
    ("28d", None, None, None, (date(2026, 5, 3), day(30)), (date(2026, 4, 5), day(2))),
    ("90d", None, None, date(2026, 6, 1), (date(2026, 3, 3), day(31)), (date(2025, 12, 3), date(2026, 3, 2))),
    ("month", None, None, day(20), (date(2026, 4, 1), date(2026, 4, 30)), (date(2026, 3, 2), date(2026, 3, 31))),
    ("custom", "2026-05-02", "2026-05-02", None, (day(2), day(2)), (day(1), day(1))),
    ("nonsense", None, None, day(28), (day(1), day(28)), (date(2026, 4, 3), date(2026, 4, 30))),
])
def test_periods(preset, start, end, newest, current, previous):
    choice = periods.choose(preset, start, end, today=day(31), newest=newest)
    assert (choice.current, choice.previous) == (Period(*current), Period(*previous))


@pytest.mark.parametrize(("covered", "missing"), [
    ([], ["2026-05-01 → 2026-05-07"]),
    ([(day(1), day(7))], []),
    ([(date(2026, 4, 1), day(31))], []),
    ([(day(3), day(3)), (day(3), day(3))], ["2026-05-01 → 2026-05-02", "2026-05-04 → 2026-05-07"]),
    ([(day(6), day(9)), (day(1), day(2))], ["2026-05-03 → 2026-05-05"]),
])
def test_days_without_data(covered, missing):
    assert [str(gap) for gap in periods.gaps(Period(day(1), day(7)), covered)] == missing


@pytest.mark.parametrize(("column", "current", "link"), [
    ("clicks", "-clicks", "clicks"), ("clicks", "clicks", "-clicks"), ("impressions", "-clicks", "-impressions"),
    ("position", "-clicks", "position"), ("position", "position", "-position"), ("change", None, "-change"),
])
def test_a_column_header_links_to_its_natural_order_then_the_other(column, current, link):
    assert listing.header_sort(column, current) == link


@pytest.mark.parametrize(("metric", "current", "previous", "shown"), [
    (display.CLICKS, 100, 80, ("+25.0%", "better")),
    (display.IMPRESSIONS, 80, 100, ("−20.0%", "worse")),
    (display.CLICKS, 100, 100, ("0.0%", "")),
    (display.CLICKS, 0, 0, ("—", "")),
    (display.CTR, 0.02, 0.03, ("−1.00 pts", "worse")),
    (display.POSITION, 3.0, 7.5, ("−4.5", "better")),
    (display.POSITION, 7.5, 3.0, ("+4.5", "worse")),
    (display.POSITION, 3.04, 3.0, ("0.0", "")),
])
def test_how_a_change_reads(metric, current, previous, shown):
    assert metric.change(current, previous) == shown


# --- the UrlMetric changelist ----------------------------------------------------

def test_the_metric_list_searches_urls_and_rounds_its_figures(admin_client, target):
    UrlMetricFactory(site_target=target, url="https://acme.example/shoes", clicks=7, impressions=2000,
                     ctr=0.0034999999999999996, position=3.14159)
    UrlMetricFactory(site_target=target, url="https://acme.example/hats")

    html = admin_client.get("/admin/imports/urlmetric/", {"q": "SHOES"}).content.decode()

    assert "https://acme.example/shoes" in html and "https://acme.example/hats" not in html
    assert "0.35%" in html and ">3.1<" in html and '<span class="nowrap">2026-05-01</span></td>' in html
    assert "0.0034999999999999996" not in html and "3.14159" not in html


def test_the_metric_list_filters_by_the_site_pages_periods(admin_client, target):
    today = timezone.localdate()
    UrlMetricFactory(site_target=target, url="https://acme.example/recent", period_start=today - timedelta(days=2))
    UrlMetricFactory(site_target=target, url="https://acme.example/older", period_start=today - timedelta(days=40))
    month = UrlMetricFactory(site_target=target, url="https://acme.example/month",
                             period_start=today - timedelta(days=20), period_end=today - timedelta(days=1))

    def shown(period):
        html = admin_client.get("/admin/imports/urlmetric/", {"period": period}).content.decode()
        return [name for name in ("recent", "older", "month") if f"https://acme.example/{name}<" in html]

    assert shown("7d") == ["recent"]
    assert shown("28d") == ["recent", "month"]
    assert shown("90d") == ["recent", "older", "month"]
    html = admin_client.get("/admin/imports/urlmetric/", {"q": "month"}).content.decode()
    assert (f'<span class="nowrap">{month.period_start:%Y-%m-%d}</span> → '
            f'<span class="nowrap">{month.period_end:%Y-%m-%d}</span>') in html


def test_the_metric_list_shows_a_staff_member_only_their_orgs_rows(client, target):
    staff = UserFactory(username="acme-staff", is_staff=True, org=target.site.org)
    staff.user_permissions.add(Permission.objects.get(codename="view_urlmetric"))
    UrlMetricFactory(site_target=target, url="https://acme.example/ours")
    theirs = UrlMetricFactory(site_target=SiteTargetFactory(site=SiteFactory(org=OrgFactory(id="rival"))),
                              url="https://rival.example/theirs")
    client.force_login(staff)

    html = client.get("/admin/imports/urlmetric/").content.decode()

    assert "https://acme.example/ours" in html and "https://rival.example/theirs" not in html
    assert client.get(f"/admin/imports/urlmetric/{theirs.pk}/change/").status_code == 404
