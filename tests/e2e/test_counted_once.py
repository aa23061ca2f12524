"""Figures you can trust, in a real headless Chromium: what the site page leaves out, and replaced figures said.

A shop's site with a Search Console pull of daily rows for 12 of its 20 pages, the 28-day *Pages*
table of a ZIP export for all 20 over the same days, and a workbook that later replaced some of the
pull's figures. The page's clicks are the rule's (each day of a page once: the ZIP's rows of the 12
pages with daily rows are left out), it says which export rows it left out and how many of each
import's rows count; the workbook's page says whose figures it replaced. The screenshots are the
docs' (docs/img/site-page-counted-once.png, docs/img/import-replaced.png).
"""

from datetime import date, timedelta
from pathlib import Path

import pytest
from django.db.models import F

from imports.ingest import position_weight
from imports.models import ImportReplacement, UrlMetric
from tests.e2e.test_upload import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS
from tests.factories import ImportFactory, OrgFactory, SiteFactory, SiteTargetFactory, UserFactory

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium: run scripts/install_browser.sh"),
]

IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
FIRST, LAST = date(2026, 11, 7), date(2026, 12, 4)  # fixed: the screenshots stay the same from run to run
DAYS = [FIRST + timedelta(days=n) for n in range((LAST - FIRST).days + 1)]


def shop():
    org = OrgFactory(id="shop", name="Shop & Co")
    site = SiteFactory(org=org, domain="shop.example")
    target = SiteTargetFactory(site=site, url_prefix="https://shop.example/")
    UserFactory(username="ana", org=org)
    pull = ImportFactory(site_target=target, filename="Search-Console-pull.csv", done=True)
    export = ImportFactory(site_target=target, filename="Performance-28-days.csv", done=True, period=(FIRST, LAST))
    workbook = ImportFactory(site_target=target, filename="corrections.csv", done=True)
    pages = [f"https://shop.example/products/item-{n}" for n in range(20)]
    daily = [UrlMetric(site_target=target, url=url, url_normalized=url, period_start=day, period_end=day,
                       clicks=10 + n, impressions=200 + 5 * n, position=3.0 + n / 4,
                       position_weight=position_weight(3.0 + n / 4, 200 + 5 * n), source_import=pull)
             for n, url in enumerate(pages[:12]) for day in DAYS]
    UrlMetric.objects.bulk_create(daily)
    UrlMetric.objects.bulk_create([
        UrlMetric(site_target=target, url=url, url_normalized=url, period_start=FIRST, period_end=LAST,
                  clicks=300 + 10 * n, impressions=6000 + 50 * n, position=4.0 + n / 3,
                  position_weight=position_weight(4.0 + n / 3, 6000 + 50 * n), source_import=export)
        for n, url in enumerate(pages)])
    # The workbook corrects the first 3 pages' last 10 days: their rows change import, as ingest's upsert does.
    UrlMetric.objects.filter(url_normalized__in=pages[:3], period_start__gte=LAST - timedelta(days=9),
                             period_end=F("period_start")).update(source_import=workbook, clicks=50)
    for imp, inserted, updated in ((pull, len(daily), 0), (export, 20, 0), (workbook, 0, 30)):
        type(imp).objects.filter(pk=imp.pk).update(inserted=inserted, updated=updated)
    return site, pull, export, workbook


def the_rules_clicks(site) -> str:
    """The site's clicks over the period by the rule, summed here: daily rows, and the export's rows of pages
    without daily rows."""
    rows = UrlMetric.objects.filter(site_target__site=site)
    daily_pages = set(rows.filter(period_start=F("period_end")).values_list("url_normalized", flat=True))
    total = sum(r.clicks for r in rows if r.period_start == r.period_end or r.url_normalized not in daily_pages)
    return f"{total:,}"


def test_the_page_counts_each_day_once_and_says_what_it_left_out(live_server, media):
    from playwright.sync_api import expect, sync_playwright

    site, pull, export, workbook = shop()
    clicks = the_rules_clicks(site)
    assert ImportReplacement.objects.filter(source_import=workbook, replaced_import=pull).get().figures == 30
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(TIMEOUT_MS)
            expect.set_options(timeout=TIMEOUT_MS)
            address = f"/imports/sites/{site.pk}/?period=custom&from={FIRST}&to={LAST}"
            page.goto(f"{live_server.url}/accounts/login/")
            page.get_by_label("Username").fill("ana")
            page.get_by_label("Password").fill("pw-for-tests")
            page.get_by_role("button", name="Log in").click()
            page.wait_for_load_state()
            page.goto(f"{live_server.url}{address}")
            expect(page.get_by_role("heading", name="shop.example")).to_be_visible()

            expect(page.locator('[data-metric="clicks"] [data-current]')).to_have_text(clicks)
            left_out = page.locator("[data-left-out-why]")
            expect(left_out).to_have_text(["12 of the 20 pages of the 28-day export of 2026-11-07 → 2026-12-04 are "
                                           "not counted: daily rows of those pages cover some of its days."])
            kept = page.locator("[data-sources] [data-kept]")
            expect(kept).to_have_text(["306 of 336 rows count: 30 replaced by a later import or deleted",
                                       "8 of 20 rows count: 12 left out, daily rows of the same pages cover their "
                                       "days",
                                       "All 30 rows count"])
            coverage = page.locator("#coverage")
            coverage.scroll_into_view_if_needed()
            IMG.mkdir(parents=True, exist_ok=True)
            coverage.screenshot(path=str(IMG / "site-page-counted-once.png"))

            page.goto(f"{live_server.url}/imports/{workbook.pk}/")
            replaced = page.locator("[data-replaced]")
            expect(replaced).to_contain_text("Replaced 30 figures first read from Search-Console-pull.csv")
            expect(replaced.get_by_role("link", name="Search-Console-pull.csv")).to_have_attribute(
                "href", f"/imports/{pull.pk}/")
            page.locator("section.card").first.screenshot(path=str(IMG / "import-replaced.png"))
            page.goto(f"{live_server.url}/imports/{pull.pk}/")
            expect(page.locator("[data-replaced-by]")).to_contain_text("30 of its figures replaced by corrections.csv")
        finally:
            browser.close()
