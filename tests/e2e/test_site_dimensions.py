"""The site page's queries, devices and countries in headless Chromium: the tabs, the device filter and its chart.

The data: daily page rows and a device's daily rows over 28 days, and a 28-day export's Queries and Countries
tables. The test also takes the screenshot the docs show (docs/img/site-dimensions.png).
"""

from datetime import date, timedelta
from pathlib import Path

import pytest
from django.db.models import Sum

from imports.dimension_models import DimensionMetric
from imports.ingest import position_weight
from imports.models import UrlMetric
from tests.e2e.test_site_page import DRAWN_PIXELS, assert_inside_its_axes
from tests.e2e.test_upload import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS
from tests.factories import ImportFactory, OrgFactory, SiteFactory, SiteTargetFactory, UserFactory

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium: run scripts/install_browser.sh"),
]

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "img" / "site-dimensions.png"
FIRST, LAST = date(2026, 11, 2), date(2026, 11, 29)  # fixed, so the screenshot is the same from one run to the next
QUERIES = ["linen shirt", "oak table", "garden chair", "wool coat", "ceramic mug", "leather bag", "desk lamp",
           "summer sale", "kids shoes", "sofa", "linen shirt women", "oak dining table"]


def shop():
    org = OrgFactory(id="shop", name="Shop & Co")
    site = SiteFactory(org=org, domain="shop.example")
    target = SiteTargetFactory(site=site, url_prefix="https://shop.example/")
    UserFactory(username="ana", org=org)
    export = ImportFactory(site_target=target, filename="shop.example-Performance-on-Search-2026-11-30.zip",
                           done=True)
    rows, dimension_rows = [], []
    for age in range(28):
        day = LAST - timedelta(days=age)
        for n in range(5):
            url, clicks, impressions, position = f"https://shop.example/p{n}", 40 - 5 * n + age % 7, 900, 3.0 + n
            rows.append(UrlMetric(site_target=target, url=url, url_normalized=url, period_start=day, period_end=day,
                                  clicks=clicks, impressions=impressions, ctr=clicks / impressions, position=position,
                                  position_weight=position_weight(position, impressions), source_import=export))
        for device, share in (("Mobile", 0.62), ("Desktop", 0.33), ("Tablet", 0.05)):
            clicks = round((150 + 10 * (age % 7)) * share)
            dimension_rows.append(DimensionMetric(site_target=target, dimension="device", key=device,
                                                  period_start=day, period_end=day, clicks=clicks,
                                                  impressions=clicks * 25, ctr=0.04, position=3.5 + share))
    for n, query in enumerate(QUERIES):
        clicks = 900 // (n + 1)
        dimension_rows.append(DimensionMetric(site_target=target, dimension="query", key=query, period_start=FIRST,
                                              period_end=LAST, clicks=clicks, impressions=clicks * 30, ctr=1 / 30,
                                              position=2.0 + n / 2, source_import=export))
    for n, country in enumerate(["France", "Belgique", "Suisse", "États-Unis"]):
        clicks = 2400 // (n + 1) ** 2
        dimension_rows.append(DimensionMetric(site_target=target, dimension="country", key=country,
                                              period_start=FIRST, period_end=LAST, clicks=clicks,
                                              impressions=clicks * 28, ctr=1 / 28, position=3.0 + n,
                                              source_import=export))
    UrlMetric.objects.bulk_create(rows)
    DimensionMetric.objects.bulk_create(dimension_rows)
    return site


def test_the_device_filter_shows_its_figures_and_chart_and_the_tabs_switch_tables(live_server, media):
    from playwright.sync_api import expect, sync_playwright

    site = shop()
    # Read before the browser starts: Playwright's sync API runs an event loop, where the ORM refuses to run.
    mobile = DimensionMetric.objects.filter(key="Mobile").aggregate(Sum("clicks"))["clicks__sum"]
    base = f"{live_server.url}/imports/sites/{site.pk}/"
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
            page.goto(f"{base}?period=custom&from={FIRST}&to={LAST}")

            expect(page.locator("[data-dimension-rows] tbody tr")).to_have_count(len(QUERIES))
            expect(page.locator("[data-dimension-filter]")).to_have_count(0)

            page.locator('select[name="device"]').select_option("Mobile")
            page.get_by_role("button", name="Show").click()
            expect(page.locator("[data-filtered-key]")).to_have_text("Mobile")
            expect(page.locator('[data-filtered="device"] [data-metric="clicks"] [data-current]')).to_have_text(
                f"{mobile:,}")
            expect(page.locator("[data-pages-not-filtered]")).to_be_visible()
            expect(page.locator("[data-queries-not-filtered]")).to_be_visible()
            assert_inside_its_axes(page, "chart-device", "the device's chart")
            assert page.evaluate("() => window.sitePageCharts['chart-device'].data[0].length") == 28
            assert page.evaluate(DRAWN_PIXELS, "chart-device") > 2000

            page.locator('[data-tab="devices"]').click()
            expect(page.locator('[data-dimension-table="devices"]')).to_be_visible()
            expect(page.locator("[data-dimension-rows] tbody tr.selected")).to_have_attribute("data-key", "Mobile")
            expect(page.locator("[data-filtered-key]")).to_have_text("Mobile")  # the tab keeps the filter

            page.locator('[data-tab="queries"]').click()
            page.get_by_label("Search queries").fill("linen")
            page.get_by_label("Search queries").press("Enter")
            expect(page.locator("[data-dimension-rows] tbody tr")).to_have_count(2)
            page.get_by_label("Search queries").fill("")
            page.get_by_label("Search queries").press("Enter")
            page.locator('[data-dsort="position"]').click()
            expect(page.locator("[data-dimension-rows] tbody tr").first).to_have_attribute("data-key", "linen shirt")

            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOT), full_page=True)
        finally:
            browser.close()
