"""The site page in a real headless Chromium: it renders, its chart draws, a period switch changes the totals.

Debian's chromium driven by Playwright (as tests/e2e/test_upload.py). The data is a
demo site's: 40 pages over 120 days from two imports, with two days missing. The
test also takes the screenshot the docs show (docs/img/site-page.png).
"""

import random
import re
from datetime import date, timedelta
from pathlib import Path

import pytest
from django.db.models import Sum
from django.utils import timezone

from imports.ingest import position_weight
from imports.models import ImportOrigin, UrlMetric
from insight.models import Alert, AlertKind, Annotation
from insight.sitepage import display
from seoinsight import periods
from tests.e2e.test_upload import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS
from tests.factories import ImportFactory, OrgFactory, SiteFactory, SiteTargetFactory, UserFactory

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium: run scripts/install_browser.sh"),
]

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "img" / "site-page.png"
LAST_DAY = date(2026, 11, 29)  # fixed, so the screenshot is the same from one run to the next
DAYS = 120
MISSING = {LAST_DAY - timedelta(days=9), LAST_DAY - timedelta(days=10)}
SECTIONS = ["products", "blog", "guides", "category"]
WORDS = ["linen-shirt", "oak-table", "garden-chair", "wool-coat", "ceramic-mug", "leather-bag", "desk-lamp",
         "summer-sale", "kids-shoes", "sofa"]

# What the canvas holds: a count of the pixels drawn (alpha > 0). A blank canvas has none.
DRAWN_PIXELS = """(id) => {
  const canvas = document.querySelector(`[data-chart="${id}"] canvas`);
  const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
  let drawn = 0;
  for (let i = 3; i < pixels.length; i += 4) if (pixels[i] > 0) drawn++;
  return drawn;
}"""


def demo_site():
    """A shop's site: daily rows of 40 pages from two exports (mailed in, then uploaded), two days missing."""
    org = OrgFactory(id="shop", name="Shop & Co")
    site = SiteFactory(org=org, domain="shop.example")
    target = SiteTargetFactory(site=site, url_prefix="https://shop.example/")
    UserFactory(username="ana", org=org)
    older = ImportFactory(site_target=target, filename="Search-Console-Aug-Oct.csv", origin=ImportOrigin.EMAIL,
                          done=True)
    newer = ImportFactory(site_target=target, filename="Performance-on-Search.csv", done=True)
    rng = random.Random(7)
    rows = []
    for n in range(40):
        url = f"https://shop.example/{SECTIONS[n % 4]}/{WORDS[n % 10]}-{n}"
        reach, rank = 4000 / (n + 1) ** 0.8, 2 + n * 0.9
        for age in range(DAYS):
            day = LAST_DAY - timedelta(days=age)
            if day in MISSING:
                continue
            weekly = 0.75 if day.weekday() >= 5 else 1.0
            impressions = max(1, round(reach * weekly * (1 + 0.25 * (DAYS - age) / DAYS) * rng.uniform(0.8, 1.2)))
            position = max(1.0, rank * rng.uniform(0.85, 1.15) - 0.01 * (DAYS - age))
            clicks = round(impressions * min(0.4, 0.3 / position) * rng.uniform(0.7, 1.3))
            rows.append(UrlMetric(site_target=target, url=url, url_normalized=url, period_start=day, period_end=day,
                                  clicks=clicks, impressions=impressions, ctr=clicks / impressions, position=position,
                                  position_weight=position_weight(position, impressions),
                                  source_import=older if age >= 45 else newer))
    UrlMetric.objects.bulk_create(rows)
    return site


def shown_clicks(site, preset: str) -> str:
    """The clicks total the page should show for ``preset``: the data's rows summed here, by the ORM."""
    choice = periods.choose(preset, today=timezone.localdate(), newest=LAST_DAY)
    rows = UrlMetric.objects.filter(site_target__site=site, period_start__gte=choice.current.start,
                                    period_end__lte=choice.current.end)
    return display.number(rows.aggregate(clicks=Sum("clicks"))["clicks"])


def test_the_site_page_draws_its_chart_and_a_period_switch_changes_the_totals(live_server, media):
    from playwright.sync_api import expect, sync_playwright

    site = demo_site()
    # What the docs' picture shows on the chart too: a note and an open alert.
    Annotation.objects.create(site=site, day=date(2026, 11, 12), text="New category pages live")
    Alert.objects.create(site=site, kind=AlertKind.CLICKS_DROP, period_start=date(2026, 11, 21),
                         period_end=date(2026, 11, 27), before=2140, after=1310)
    # Read before the browser starts: Playwright's sync API runs an event loop, where the ORM refuses to run.
    month_clicks, week_clicks = shown_clicks(site, "28d"), shown_clicks(site, "7d")
    assert month_clicks != week_clicks
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(TIMEOUT_MS)
            expect.set_options(timeout=TIMEOUT_MS)

            page.goto(f"{live_server.url}/accounts/login/?next=/imports/sites/{site.pk}/")
            page.get_by_label("Username").fill("ana")
            page.get_by_label("Password").fill("pw-for-tests")
            page.get_by_role("button", name="Log in").click()
            expect(page).to_have_url(f"{live_server.url}/imports/sites/{site.pk}/")
            expect(page.get_by_role("heading", name="shop.example")).to_be_visible()

            clicks = page.locator('[data-metric="clicks"] [data-current]')
            expect(clicks).to_have_text(month_clicks)
            expect(page.locator("[data-current-period]")).to_have_text("2026-11-02 → 2026-11-29")
            page.wait_for_function("() => window.sitePageCharts && window.sitePageCharts['chart-site']")
            series = page.evaluate("() => window.sitePageCharts['chart-site'].data.map(s => s.length)")
            assert series == [28] * 4  # a point a day (two of them empty): x, clicks, impressions, position
            assert page.evaluate(DRAWN_PIXELS, "chart-site") > 2000
            expect(page.locator('[data-chart="chart-site"] [data-note-mark]')).to_have_count(1)
            expect(page.locator('[data-chart="chart-site"] [data-alert-mark]')).to_have_count(1)
            expect(page.locator("[data-gaps] li")).to_have_text(["2026-11-19 → 2026-11-20 (2 days)"])
            expect(page.locator("[data-top-pages] tbody tr")).to_have_count(25)
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOT), full_page=True)

            page.locator("label.preset", has_text="Last 7 days").click()
            expect(page.locator("[data-current-period]")).to_have_text("2026-11-23 → 2026-11-29")
            expect(clicks).to_have_text(week_clicks)
            page.wait_for_function("() => window.sitePageCharts && window.sitePageCharts['chart-site']")
            assert page.evaluate("() => window.sitePageCharts['chart-site'].data[0].length") == 7

            # A page's own history, from the top pages table.
            first = page.locator("[data-top-pages] tbody tr").first
            url = first.get_attribute("data-page")
            first.get_by_role("link").click()
            expect(page.locator("[data-history-url]")).to_have_text(url)
            page.wait_for_function("() => window.sitePageCharts && window.sitePageCharts['chart-page']")
            assert page.evaluate(DRAWN_PIXELS, "chart-page") > 1000
        finally:
            browser.close()


# --- the chart tells the truth ------------------------------------------------------------------------------------

# Figures of different digit counts: compared as text, "9" > "378" and the scale tops out below the data.
CLICKS = [9, 378, 12, 95, 40, 7, 230, 1050, 3]
IMPRESSIONS = [90, 12000, 400, 3100, 8, 950, 56000, 70]
POSITIONS = [4.4, 12.0, 9.5, 1.2, 38.0, 2.7]

# For each series shown: its scale's bounds and its data's (read as numbers whatever their type), and the types.
SCALES_AND_DATA = """(id) => {
  const chart = window.sitePageCharts[id];
  return chart.series.slice(1).filter(s => s.show).map(s => {
    const values = chart.data[chart.series.indexOf(s)].filter(v => v != null);
    const numbers = values.map(Number);
    const scale = chart.scales[s.scale];
    return {series: s.label, scaleMin: scale.min, scaleMax: scale.max, count: values.length,
            dataMin: Math.min(...numbers), dataMax: Math.max(...numbers),
            types: [...new Set(values.map(v => typeof v))]};
  });
}"""


def ranked_site():
    """Two pages' daily rows over 120 days whose figures cycle through 1 to 5 digits."""
    org = OrgFactory(id="ranks", name="Ranks")
    site = SiteFactory(org=org, domain="ranks.example")
    target = SiteTargetFactory(site=site, url_prefix="https://ranks.example/")
    UserFactory(username="bo", org=org)
    imp = ImportFactory(site_target=target, filename="Performance-on-Search.csv", done=True)
    rows = []
    for n, url in enumerate(["https://ranks.example/a", "https://ranks.example/b"]):
        for age in range(DAYS):
            clicks, impressions = CLICKS[(age + n) % len(CLICKS)], IMPRESSIONS[(age + 3 * n) % len(IMPRESSIONS)]
            clicks = min(clicks, impressions)
            position = POSITIONS[(age + n) % len(POSITIONS)]
            rows.append(UrlMetric(site_target=target, url=url, url_normalized=url, period_start=LAST_DAY - timedelta(days=age),
                                  period_end=LAST_DAY - timedelta(days=age), clicks=clicks, impressions=impressions,
                                  ctr=clicks / impressions, position=position,
                                  position_weight=position_weight(position, impressions), source_import=imp))
    UrlMetric.objects.bulk_create(rows)
    return site


def assert_inside_its_axes(page, chart_id: str, view: str):
    page.wait_for_function("(id) => window.sitePageCharts && window.sitePageCharts[id]", arg=chart_id)
    shown = page.evaluate(SCALES_AND_DATA, chart_id)
    assert shown, f"{view}: no series shown"
    for s in shown:
        assert s["count"] > 0, (view, s)
        assert s["types"] == ["number"], f"{view}, {s['series']}: the data reached the browser as {s['types']}"
        assert s["scaleMin"] <= s["dataMin"] and s["dataMax"] <= s["scaleMax"], (
            f"{view}, {s['series']}: data {s['dataMin']}…{s['dataMax']} outside its axis "
            f"{s['scaleMin']}…{s['scaleMax']}")


def x_ticks(page, chart_id: str) -> list[str]:
    """The x axis's tick labels as drawn (uPlot keeps the last ones drawn on the axis)."""
    return page.evaluate("(id) => window.sitePageCharts[id].axes[0]._values", chart_id)


def test_every_plotted_value_lies_inside_its_axis_and_the_x_axis_ticks_days(live_server, media):
    from playwright.sync_api import expect, sync_playwright

    site = ranked_site()
    base = f"{live_server.url}/imports/sites/{site.pk}/"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(TIMEOUT_MS)
            expect.set_options(timeout=TIMEOUT_MS)
            page.goto(f"{live_server.url}/accounts/login/?next=/imports/sites/{site.pk}/")
            page.get_by_label("Username").fill("bo")
            page.get_by_label("Password").fill("pw-for-tests")
            page.get_by_role("button", name="Log in").click()
            expect(page).to_have_url(base)

            for preset, days in (("7d", 7), ("28d", 28), ("90d", 90)):
                for chart_id, query in (("chart-site", ""), ("chart-page", "&url=https%3A%2F%2Franks.example%2Fa")):
                    page.goto(f"{base}?period={preset}{query}")
                    view = f"{chart_id}, {preset}"
                    assert_inside_its_axes(page, chart_id, view)
                    assert page.evaluate("(id) => window.sitePageCharts[id].data[0].length", chart_id) == days
                    ticks = x_ticks(page, chart_id)
                    assert ticks and not [t for t in ticks if "am" in t.lower() or "pm" in t.lower()], (view, ticks)
                    assert all(re.fullmatch(r"[A-Z][a-z]{2} \d{1,2}", t) for t in ticks), (view, ticks)
        finally:
            browser.close()


def test_one_figure_at_a_time_can_be_shown(live_server, media):
    from playwright.sync_api import expect, sync_playwright

    site = ranked_site()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(TIMEOUT_MS)
            expect.set_options(timeout=TIMEOUT_MS)
            page.goto(f"{live_server.url}/accounts/login/?next=/imports/sites/{site.pk}/")
            page.get_by_label("Username").fill("bo")
            page.get_by_label("Password").fill("pw-for-tests")
            page.get_by_role("button", name="Log in").click()
            page.wait_for_function("() => window.sitePageCharts && window.sitePageCharts['chart-site']")
            choice = page.locator('[data-chart-metrics="chart-site"]')
            shown = "() => window.sitePageCharts['chart-site'].series.slice(1).map(s => s.show)"

            assert page.evaluate(shown) == [True, True, True]
            for label, expected in (("Clicks", [True, False, False]), ("Impressions", [False, True, False]),
                                    ("Position", [False, False, True]), ("All", [True, True, True])):
                choice.get_by_label(label, exact=True).check()
                assert page.evaluate(shown) == expected, label
                # A hidden figure's axis goes with it (uPlot hides an axis whose scale has nothing shown).
                assert page.evaluate("() => window.sitePageCharts['chart-site'].axes.slice(1).map(a => a._show)") \
                    == expected, label
                assert_inside_its_axes(page, "chart-site", f"{label} alone")

            # The legend's own toggle: a mix, so no choice is marked.
            page.locator('[data-chart="chart-site"] .u-legend .u-series').nth(2).click()
            assert page.evaluate(shown) == [True, False, True]
            expect(choice.locator("input:checked")).to_have_count(0)
        finally:
            browser.close()
