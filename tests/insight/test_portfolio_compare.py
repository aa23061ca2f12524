"""``?compare=previous|year``: the period a figure is compared with, on the site page (the portfolio's own tests
use it too). "A year before" is the same weekdays 52 weeks (364 days) before: the rule is tested at its edges,
February 29 included, and the site page's figures against the raw rows of the year before.
"""

import csv
import io
from datetime import date

import pytest
from django.db.models import Sum

from imports.models import UrlMetric
from insight.sitepage import cache, figures
from seoinsight import periods
from seoinsight.periods import Period
from tests.factories import ImportFactory, SiteTargetFactory
from tests.insight.test_site_page import UrlMetricFactory


def d(text: str) -> date:
    return date.fromisoformat(text)


@pytest.mark.parametrize(("current", "year", "previous"), [
    # A 28-day period: 364 days back keeps the weekdays (both start on a Monday).
    (("2026-11-02", "2026-11-29"), ("2025-11-03", "2025-11-30"), ("2026-10-05", "2026-11-01")),
    # A leap month: Feb 29 2028 compared with Mar 2 2027 (same weekday); the previous 29 days end on Jan 31.
    (("2028-02-01", "2028-02-29"), ("2027-02-02", "2027-03-02"), ("2028-01-03", "2028-01-31")),
    # A period starting on Feb 29: a year before has no Feb 29, 52 weeks before is a whole day all the same.
    (("2028-02-29", "2028-03-06"), ("2027-03-02", "2027-03-08"), ("2028-02-22", "2028-02-28")),
    # The year after a leap year: 52 weeks before starts on the Feb 29 itself.
    (("2029-02-27", "2029-03-02"), ("2028-02-29", "2028-03-03"), ("2029-02-23", "2029-02-26")),
    # One day, and the previous period across New Year.
    (("2027-01-01", "2027-01-01"), ("2026-01-02", "2026-01-02"), ("2026-12-31", "2026-12-31")),
])
def test_a_period_is_compared_with_the_one_before_or_the_same_weekdays_52_weeks_before(current, year, previous):
    period = Period(d(current[0]), d(current[1]))
    assert period.compared("year") == Period(d(year[0]), d(year[1]))
    assert period.compared("previous") == Period(d(previous[0]), d(previous[1]))
    for compared in (period.compared("year"), period.compared("previous")):
        assert compared.days == period.days
    assert period.year_before().start.weekday() == period.start.weekday()


@pytest.mark.parametrize(("preset", "compare", "current", "compared"), [
    ("28d", None, ("2028-02-02", "2028-02-29"), ("2028-01-05", "2028-02-01")),
    ("28d", "year", ("2028-02-02", "2028-02-29"), ("2027-02-03", "2027-03-02")),
    ("month", "year", ("2028-02-01", "2028-02-29"), ("2027-02-02", "2027-03-02")),
    ("month", "previous", ("2028-02-01", "2028-02-29"), ("2028-01-03", "2028-01-31")),
    ("7d", "nonsense", ("2028-02-23", "2028-02-29"), ("2028-02-16", "2028-02-22")),  # unknown: the default
])
def test_choose_follows_the_comparison_asked(preset, compare, current, compared):
    choice = periods.choose(preset, today=d("2028-03-02"), newest=d("2028-02-29"), compare=compare)
    assert (choice.current, choice.previous) == (Period(*map(d, current)), Period(*map(d, compared)))
    assert choice.compare == ("year" if compare == "year" else "previous")


def test_a_custom_period_is_compared_a_year_before_too():
    choice = periods.choose("custom", "2028-02-29", "2028-02-29", today=d("2028-03-10"), newest=None, compare="year")
    assert (choice.current, choice.previous) == (Period(d("2028-02-29"), d("2028-02-29")),
                                                 Period(d("2027-03-02"), d("2027-03-02")))
    assert choice.compared_with == "the same weekdays 52 weeks before"


# --- the site page -------------------------------------------------------------------------------------------

CURRENT = Period(d("2026-05-04"), d("2026-05-10"))
YEAR_BEFORE = CURRENT.year_before()  # 2025-05-05 → 2025-05-11


def raw_clicks(site, period: Period, url: str | None = None) -> int:
    rows = UrlMetric.objects.filter(site_target__site=site, period_start__gte=period.start,
                                    period_end__lte=period.end)
    if url:
        rows = rows.filter(url_normalized=url)
    return rows.aggregate(clicks=Sum("clicks"))["clicks"]


@pytest.fixture(params=["rows", "precomputed"])
def year_site(request, target, monkeypatch):
    """Rows this week, the week before, the same weekdays 52 weeks before and a calendar year before."""
    monkeypatch.setattr(figures, "PRECOMPUTED", request.param == "precomputed")
    french = SiteTargetFactory(site=target.site, url_prefix="https://acme.example/fr/")
    a, b = "https://acme.example/a", "https://acme.example/fr/b"
    for day, clicks in (("2026-05-04", 30), ("2026-05-10", 12), ("2026-04-30", 700), ("2025-05-05", 8),
                        ("2025-05-11", 4), ("2025-05-04", 900), ("2025-05-12", 800)):
        UrlMetricFactory(site_target=target, url=a, period_start=d(day), clicks=clicks, impressions=100)
    UrlMetricFactory(site_target=french, url=b, period_start=d("2025-05-06"), clicks=10, impressions=50)
    UrlMetricFactory(site_target=french, url=b, period_start=d("2026-05-06"), clicks=5, impressions=50)
    for t in (target, french):
        cache.refresh(t, [CURRENT])  # the precomputed top pages hold the previous period's clicks, current
    return target.site


@pytest.mark.django_db
@pytest.mark.usefixtures("media")
def test_the_site_page_compares_with_the_same_weekdays_52_weeks_before(client, member, year_site):
    params = {"period": "custom", "from": "2026-05-04", "to": "2026-05-10", "compare": "year"}
    response = client.get(f"/imports/sites/{year_site.pk}/", params)

    assert response.status_code == 200
    choice = response.context["choice"]
    assert (choice.current, choice.previous, choice.compare) == (CURRENT, YEAR_BEFORE, "year")
    clicks = {row["name"]: row for row in response.context["totals"]}["clicks"]
    assert (clicks["current"], clicks["previous"]) == (str(raw_clicks(year_site, CURRENT)),
                                                       str(raw_clicks(year_site, YEAR_BEFORE)))
    assert (clicks["current"], clicks["previous"], clicks["change"]) == ("47", "22", "+113.6%")
    # Each top page's change is against its own clicks 52 weeks before, not the week before.
    pages = {row["url"]: row for row in response.context["pages"]}
    assert pages["https://acme.example/a"]["previous_clicks"] == str(raw_clicks(year_site, YEAR_BEFORE,
                                                                                 "https://acme.example/a"))
    assert pages["https://acme.example/fr/b"]["previous_clicks"] == "10"
    html = response.content.decode()
    assert "the same weekdays 52 weeks (364 days) before" in html
    assert '<option value="year" selected>' in html
    # The page's own links keep the comparison.
    assert all("compare=year" in link for _, _, link in response.context["headers"])
    assert "compare=year" in response.context["csv_url"]

    # The pages CSV says the same previous clicks.
    body = client.get(f"/imports/sites/{year_site.pk}/", {**params, "format": "csv"}).content.decode("utf-8-sig")
    table = {row["page"]: row for row in csv.DictReader(io.StringIO(body))}
    assert table["https://acme.example/a"]["previous_clicks"] == "12"


@pytest.mark.django_db
@pytest.mark.usefixtures("media")
def test_the_site_page_compares_with_the_previous_period_by_default(client, member, year_site):
    response = client.get(f"/imports/sites/{year_site.pk}/", {"period": "custom", "from": "2026-05-04",
                                                              "to": "2026-05-10"})
    clicks = {row["name"]: row for row in response.context["totals"]}["clicks"]
    previous = CURRENT.previous()
    assert response.context["choice"].previous == previous
    assert clicks["previous"] == str(raw_clicks(year_site, previous)) == "700"
    assert "compare" not in response.context["params"]


@pytest.mark.django_db
@pytest.mark.usefixtures("media")
def test_a_bad_comparison_shows_the_previous_period_and_says_why_and_a_csv_is_refused(client, member, year_site):
    params = {"period": "custom", "from": "2026-05-04", "to": "2026-05-10", "compare": "decade"}
    response = client.get(f"/imports/sites/{year_site.pk}/", params)
    assert response.context["choice"].previous == CURRENT.previous()
    assert [str(p) for p in response.context["problems"]] == [
        "The comparison must be one of previous, year. Compared with the previous period."]

    refused = client.get(f"/imports/sites/{year_site.pk}/", {**params, "format": "csv"})
    assert refused.status_code == 400
    assert refused["Content-Type"].startswith("text/plain")
    assert "The comparison must be one of previous, year." in refused.content.decode()


@pytest.mark.django_db
@pytest.mark.usefixtures("media")
def test_a_row_between_the_year_before_and_the_period_is_no_edge_of_either(client, member, year_site):
    target = year_site.targets.order_by("pk").first()
    between = ImportFactory(site_target=target, filename="September.csv", period=(d("2025-09-01"), d("2025-09-30")))
    across = ImportFactory(site_target=target, filename="Spring.csv", period=(d("2026-04-20"), d("2026-05-06")))
    UrlMetricFactory(site_target=target, url="https://acme.example/c", period_start=d("2025-09-01"),
                     period_end=d("2025-09-30"), clicks=300, source_import=between)
    UrlMetricFactory(site_target=target, url="https://acme.example/c", period_start=d("2026-04-20"),
                     period_end=d("2026-05-06"), clicks=90, source_import=across)

    response = client.get(f"/imports/sites/{year_site.pk}/", {"period": "custom", "from": "2026-05-04",
                                                              "to": "2026-05-10", "compare": "year"})

    # Spring crosses the period's first day: counted in neither, and said so; September touches neither period.
    assert [edge["imp"] for edge in response.context["edges"]] == [across]
    clicks = {row["name"]: row for row in response.context["totals"]}["clicks"]
    assert (clicks["current"], clicks["previous"]) == ("47", "22")
