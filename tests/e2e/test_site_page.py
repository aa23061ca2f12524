"""The site page in a real headless Chromium: it renders, its chart draws, a period switch changes the totals.

Debian's chromium driven by Playwright (as tests/e2e/test_upload.py). The data is a
demo site's: 40 pages over 120 days from two imports, with two days missing. The
test also takes the screenshot the docs show (docs/img/site-page.png).
"""

import random
from datetime import date, timedelta
from pathlib import Path

import pytest
from django.db.models import Sum
from django.utils import timezone

from imports.ingest import position_weight
from imports.models import ImportOrigin, UrlMetric
from imports.sitepage import display, periods
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
