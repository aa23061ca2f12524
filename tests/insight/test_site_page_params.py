"""The site page's query string, attacked: every parameter is read through seoinsight.query_params, bounded
before it costs anything, and a bad one is said in plain words on the page (200, the defaults in its place)
or in a plain-text 400 for the CSV, never a 500. The work stays bounded: a chart point a day, at most
QUERY_MAX_PERIOD_DAYS of them."""

from datetime import date, timedelta

import pytest
from django.utils import timezone

from seoinsight import conf, periods
from tests.factories import SiteTargetFactory
from tests.insight.test_site_page import UrlMetricFactory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]

# (query string, what the page says)
HOSTILE = [
    ("period=custom&from=5001-01-01&to=9999-12-31", "The custom period’s start, 5001-01-01, is after"),
    ("period=custom&from=0001-01-01&to=0001-12-31", "The custom period’s start, 0001-01-01, is before 2000-01-01"),
    ("period=custom&from=9999-12-01&to=9999-12-31", "The custom period’s start, 9999-12-01, is after"),
    ("period=custom&from=2000-01-01&to=2000-01-07", ""),  # the earliest day: its previous period is before it
    ("period=custom&from=2020-01-01&to=2026-06-30", "The custom period spans 2,373 days; it may span 500 at most"),
    ("period=custom&from=yesterday&to=2026-05-07", "The custom period’s start must be a date written YYYY-MM-DD"),
    ("period=custom&from=20260501&to=2026-05-07", "The custom period’s start must be a date written YYYY-MM-DD"),
    ("period=custom&from=2026-W18-5&to=2026-05-07", "The custom period’s start must be a date written YYYY-MM-DD"),
    ("period=custom&from=2026-02-01&to=2026-02-30", "The custom period’s end must be a date written YYYY-MM-DD"),
    ("period=custom&from=2026-05-01&to=" + "9" * 5000, "The custom period’s end must be a date written YYYY-MM-DD"),
    ("period=custom&from=2026-05-01&from=2026-05-03&to=2026-05-07", "“from” is given 2 times in the address"),
    ("period=custom&period=7d", "“period” is given 2 times in the address"),
    ("period=decade", "The period must be one of"),
    ("page=99999999999999999999", "The page number must be a whole number from 1 to 100,000"),
    ("page=-3", "The page number must be a whole number from 1 to 100,000"),
    ("page=0", "The page number must be a whole number from 1 to 100,000"),
    ("page=1e400", "The page number must be a whole number from 1 to 100,000"),
    ("page=%D9%A3", "The page number must be a whole number from 1 to 100,000"),  # Arabic-Indic three
    ("page=2&page=3", "“page” is given 2 times in the address"),
    ("sort=url%3B%20DROP%20TABLE", "The sort must be one of"),
    ("target=-1", "The target must be one of"),
    ("target=99999999999999999999", "The target must be one of"),
    ("q=a%01b", "The search holds a control character"),
    ("q=" + "x" * 3000, "The search is longer than 2,048 characters"),
    ("url=https://acme.example/%01", "The page whose history is open holds a control character"),
    ("format=xml", "The format must be one of"),
]


@pytest.fixture
def site(target):
    today = timezone.localdate()
    UrlMetricFactory(site_target=target, period_start=today - timedelta(days=3), clicks=5)
    return target.site


def get(client, site, query: str):
    return client.get(f"/imports/sites/{site.pk}/?{query}")


@pytest.mark.parametrize(("query", "says"), HOSTILE, ids=[query[:60] for query, _ in HOSTILE])
def test_a_hostile_parameter_is_a_plain_message_on_a_bounded_page(client, member, site, query, says):
    response = get(client, site, query)

    assert response.status_code == 200, response.content[:300]
    html = response.content.decode()
    if says:
        assert says in html
        assert says in " ".join(map(str, response.context["problems"]))
    else:
        assert response.context["problems"] == []
    if "page=" in query:
        assert "Showing page 1." in html and response.context["pagination"]["number"] == 1
    chart = response.context["chart"]
    assert len(chart["x"]) <= conf.get("QUERY_MAX_PERIOD_DAYS")
    # The page's own links carry only what it followed: a click never repeats the bad parameter.
    assert all(link.count("page=") <= 1 for link in (response.context["csv_url"],
                                                      *(h for _, _, h in response.context["headers"])))
    if says:
        assert "9999-12-31" not in response.context["csv_url"] and "%01" not in response.context["csv_url"]


CSV_HOSTILE = [(query, says) for query, says in HOSTILE if says and "format=" not in query]


@pytest.mark.parametrize(("query", "says"), CSV_HOSTILE, ids=[query[:60] for query, _ in CSV_HOSTILE])
def test_a_hostile_parameter_of_the_csv_is_a_plain_400(client, member, site, query, says):
    response = get(client, site, f"{query}&format=csv")

    assert response.status_code == 400
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    text = response.content.decode()
    assert says in text
    assert "nothing was exported" in text


def test_a_custom_period_of_the_longest_length_is_shown_a_point_a_day(client, member, site, settings):
    settings.QUERY_MAX_PERIOD_DAYS = 60
    end = timezone.localdate() - timedelta(days=1)
    start = end - timedelta(days=59)

    response = get(client, site, f"period=custom&from={start}&to={end}")
    longer = get(client, site, f"period=custom&from={start - timedelta(days=1)}&to={end}")

    assert response.context["problems"] == []
    assert response.context["choice"].current == periods.Period(start, end)
    assert len(response.context["chart"]["x"]) == 60
    html = response.content.decode()
    assert f'min="2000-01-01" max="{timezone.localdate()}"' in html and "60 days at most" in html
    assert longer.context["choice"].preset == periods.DEFAULT
    assert "The custom period spans 61 days; it may span 60 at most." in longer.content.decode()
    assert len(longer.context["chart"]["x"]) == 28


def test_a_custom_period_may_end_today_not_after(client, member, site):
    today = timezone.localdate()
    ok = get(client, site, f"period=custom&from={today - timedelta(days=6)}&to={today}")
    later = get(client, site, f"period=custom&from={today}&to={today + timedelta(days=1)}")

    assert ok.context["choice"].current == periods.Period(today - timedelta(days=6), today)
    assert f"The custom period’s end, {today + timedelta(days=1)}, is after {today} (today)" in later.content.decode()


def test_a_good_query_string_says_nothing_and_its_links_keep_it(client, member, site):
    french = SiteTargetFactory(site=site, url_prefix="https://acme.example/fr/")
    response = get(client, site, f"period=custom&from=2026-05-01&to=2026-05-07&target={french.pk}&sort=position"
                                 "&q=shoes&page=1&utm_source=mail")

    assert response.context["problems"] == []
    assert response.context["choice"].current == periods.Period(date(2026, 5, 1), date(2026, 5, 7))
    assert response.context["csv_url"] == (f"?period=custom&from=2026-05-01&to=2026-05-07&target={french.pk}"
                                           "&sort=position&q=shoes&format=csv")


def test_the_imports_list_says_a_bad_page_number_and_shows_the_first(client, member, site):
    for query in ("page=99999999999999999999", "page=-1", "page=x", "page=1&page=2"):
        response = client.get(f"/imports/?{query}")
        assert response.status_code == 200
        assert response.context["page"].number == 1
        html = response.content.decode()
        assert ("The page number must be a whole number from 1 to 100,000. Showing page 1." in html
                or "“page” is given 2 times in the address" in html), query
