"""The alerts page in a real headless Chromium: the org's open alerts as detectdrops recorded them from real rows, an
Acknowledge that takes one out of the open list (who and when kept), and the digest choice.

It also takes the screenshot the docs show (docs/img/alerts.png), with fixed dates.
"""

from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from insight.alerts.detect import detect
from insight.models import Alert
from tests.e2e.test_upload import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS
from tests.factories import OrgFactory, SiteFactory, SiteTargetFactory, UserFactory
from tests.insight.test_detectdrops import daily
from tests.insight.test_site_page import UrlMetricFactory

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium: run scripts/install_browser.sh"),
]

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "img" / "alerts.png"
TODAY = date(2026, 12, 8)  # fixed, so the screenshot is the same from one run to the next
RECORDED = datetime(2026, 12, 8, 6, 0, 12, tzinfo=UTC)


def agency():
    """An agency's org: a shop whose clicks fell, a blog whose top page fell, a client whose data stopped coming."""
    org = OrgFactory(id="shop", name="Shop & Co")
    UserFactory(username="ana", email="ana@agency.test", org=org)
    shop = SiteTargetFactory(site=SiteFactory(org=org, domain="shop.example"), url_prefix="https://shop.example/")
    daily(shop, "https://shop.example/", 180, 95)
    daily(shop, "https://shop.example/products/linen-shirt", 60, 22)
    blog = SiteTargetFactory(site=SiteFactory(org=org, domain="blog.example"), url_prefix="https://blog.example/")
    daily(blog, "https://blog.example/", 300, 310)
    daily(blog, "https://blog.example/guides/oak-table-care", 40, 12)
    late = SiteTargetFactory(site=SiteFactory(org=org, domain="garden.example"),
                             url_prefix="https://garden.example/")
    UrlMetricFactory(site_target=late, url="https://garden.example/", period_start=date(2026, 11, 24))
    steady = SiteTargetFactory(site=SiteFactory(org=org, domain="steady.example"))
    daily(steady, "https://steady.example/", 120, 118)
    recorded = detect(org, TODAY)
    Alert.objects.update(created_at=RECORDED)
    return org, recorded


def test_the_alerts_page_lists_acknowledges_and_keeps_the_digest_choice(live_server, media):
    from playwright.sync_api import expect, sync_playwright

    _, recorded = agency()
    # Read before the browser starts: Playwright's sync API runs an event loop, where the ORM refuses to run.
    kinds = sorted((a.site.domain, a.kind) for a in recorded)
    assert kinds == [("blog.example", "page_drop"), ("garden.example", "stale_data"), ("shop.example", "clicks_drop"),
                     ("shop.example", "page_drop"), ("shop.example", "page_drop")]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(TIMEOUT_MS)
            expect.set_options(timeout=TIMEOUT_MS)

            page.goto(f"{live_server.url}/accounts/login/?next=/imports/alerts/")
            page.get_by_label("Username").fill("ana")
            page.get_by_label("Password").fill("pw-for-tests")
            page.get_by_role("button", name="Log in").click()
            expect(page).to_have_url(f"{live_server.url}/imports/alerts/")
            open_rows = page.locator("[data-alerts-open] tbody tr")
            expect(open_rows).to_have_count(5)
            expect(page.locator("[data-alerts-open]")).to_contain_text("No new data for 14 days (expected within 7)")
            expect(page.locator("[data-alerts-open]")).not_to_contain_text("steady.example")
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOT), full_page=True)

            garden = open_rows.filter(has_text="garden.example")
            garden.get_by_role("button", name="Acknowledge").click()
            expect(page.locator(".messages")).to_contain_text("Acknowledged: garden.example")
            expect(open_rows).to_have_count(4)
            expect(page.locator("[data-alerts-acknowledged]")).to_contain_text("by ana, ")

            page.get_by_label("Email me a daily digest").check()
            page.locator("[data-digest]").get_by_role("button", name="Save").click()
            expect(page.locator(".messages")).to_contain_text("You will get a daily digest")
            expect(page.get_by_label("Email me a daily digest")).to_be_checked()
        finally:
            browser.close()
    assert Alert.objects.filter(acknowledged_at__isnull=False).get().site.domain == "garden.example"


def test_the_admin_alert_list_fits_1400_px_with_long_page_addresses(live_server, media):
    from tests.support.admin_browser import change_list_layout

    _, recorded = agency()
    site = recorded[0].site
    long_url = "https://shop.example/products/" + "-".join(["linen-shirt-summer-collection"] * 6)
    Alert.objects.create(site=site, kind="page_drop", page_url=long_url, period_start=date(2026, 11, 30),
                         period_end=date(2026, 12, 6), before=420, after=100)
    UserFactory(username="root", is_staff=True, is_superuser=True)

    layout = change_list_layout(live_server, "/admin/insight/alert/?acknowledged=no")

    assert layout["rows"] == 6 and layout["sidebar"] and layout["filters"]
    assert layout["overflow"] <= 0, layout["widths"]
