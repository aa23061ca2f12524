"""The site page's chart carries numbers: every figure reaches the browser as a JSON number or null, never text.

PostgreSQL sums bigints into numerics (Decimals), which Django's JSON encoder writes as strings; the chart's
scale then compares text ("9" > "378") and lines leave their axes. The browser side is tests/e2e/test_site_page.py.
"""

import json
import re
from datetime import date
from decimal import Decimal

import pytest
from django.core.serializers.json import DjangoJSONEncoder

from insight.sitepage import display, figures
from insight.sitepage.display import Sums
from seoinsight.periods import Period
from tests.insight.test_site_page import UrlMetricFactory, custom, page_of

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]

SERIES = ("clicks", "impressions", "position")


def day(n: int) -> date:
    return date(2026, 5, n)


def as_browser_reads(chart: dict) -> dict:
    """The chart as json_script writes it into the page and the browser parses it back."""
    return json.loads(json.dumps(chart, cls=DjangoJSONEncoder))


@pytest.mark.parametrize("sums, expected", [
    (Sums(Decimal("378"), Decimal("9000"), 0.042, 4.4), (378, 9000, 4.4)),
    (Sums(Decimal("9"), Decimal("12"), 0.75, 12.0), (9, 12, 12.0)),
    (Sums(9, 12, None, 3.14159), (9, 12, 3.14)),
    (Sums(Decimal("0"), None, None, None), (0, None, None)),
    (Sums(None, Decimal("1234567890123"), None, Decimal("2.25")), (None, 1234567890123, 2.25)),
    (None, (None, None, None)),  # a day without data
])
def test_each_figure_of_the_chart_is_a_number_or_null(sums, expected):
    period = Period(day(1), day(2))
    points = [] if sums is None else [(Period(day(1), day(1)), sums)]
    points.append((Period(day(2), day(2)), Sums(1, 2, 0.5, 1.0)))

    read = as_browser_reads(display.chart(points, period))

    assert tuple(read[name][0] for name in SERIES) == expected
    for name in SERIES:
        for value in read[name]:
            assert value is None or type(value) in (int, float), f"{name}: {value!r} is not a number"


CHART = re.compile(r'<script id="(chart-site|chart-page)" type="application/json">(.*?)</script>', re.S)


@pytest.fixture(params=["rows", "precomputed"])
def site(request, target, monkeypatch):
    monkeypatch.setattr(figures, "PRECOMPUTED", request.param == "precomputed")
    return target.site


def test_the_pages_charts_carry_numbers_for_the_site_and_a_pages_history(client, member, target, site):
    url = "https://acme.example/shop"
    for n, clicks in ((1, 9), (2, 378), (4, 12)):
        UrlMetricFactory(site_target=target, url=url, period_start=day(n), clicks=clicks, impressions=clicks * 10,
                         position=4.4 if n == 1 else 12.0)

    content = page_of(client, site, **custom(day(1), day(7), url=url)).content.decode()

    charts = {name: json.loads(text) for name, text in CHART.findall(content)}
    assert set(charts) == {"chart-site", "chart-page"}
    for name, chart in charts.items():
        assert chart["clicks"] == [9, 378, None, 12, None, None, None], name
        assert chart["impressions"][:4] == [90, 3780, None, 120], name
        assert chart["position"][:2] == [4.4, 12.0], name
        for series in SERIES:
            assert all(value is None or type(value) in (int, float) for value in chart[series]), (name, chart[series])
