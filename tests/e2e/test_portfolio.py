"""The portfolio in a real headless Chromium: every site, the biggest fall first, sparklines drawn, within 1,400 px.

An agency's twelve client sites over 70 days ending on a fixed day, one falling hard, one without data,
one with an open alert, a failed import and a note; the test takes the screenshot the docs show
(docs/img/portfolio.png) and checks that the page's widest table fits a 1,400 px window.
"""

import random
from datetime import date, timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from imports.ingest import position_weight
from imports.models import UrlMetric
from insight.models import Alert, AlertKind, Annotation
from tests.e2e.test_upload import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS
from tests.factories import ImportFactory, OrgFactory, SiteFactory, SiteTargetFactory, UserFactory

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium: run scripts/install_browser.sh"),
]

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "img" / "portfolio.png"
LAST_DAY = date(2026, 11, 29)  # fixed, so the screenshot is the same from one run to the next
DAYS = 70
# Domain, reach, trend over the last 14 days (1: steady), days of data missing at the end.
SITES = [
    ("boulangerie-dupont-et-fils.example", 900, 0.45, 0),
    ("garden-tools.example", 2400, 1.0, 0),
    ("hotel-des-alpes.example", 1500, 1.25, 0),
    ("kids-shoes.example", 700, 0.85, 0),
    ("law-firm-martin.example", 300, 1.05, 0),
    ("oak-furniture.example", 3100, 0.95, 0),
    ("pizzeria-napoli.example", 450, 1.6, 0),
    ("plumber-lyon.example", 220, 0.7, 3),
    ("shop.example", 5200, 1.1, 0),
    ("tea-house.example", 800, 1.0, 0),
    ("vet-clinic.example", 350, 0.9, 0),
]


def agency():
    """The org, its member ana, its sites and their rows; returns the falling site."""
    org = OrgFactory(id="agency", name="North Star SEO")
    UserFactory(username="ana", org=org)
    rng = random.Random(36)
    rows, sites = [], {}
    for domain, reach, trend, missing in SITES:
        site = SiteFactory(org=org, domain=domain)
        sites[domain] = site
        target = SiteTargetFactory(site=site, url_prefix=f"https://{domain}/")
        imp = ImportFactory(site_target=target, filename=f"{domain}-performance.csv", done=True)
        for n in range(10):
            url = f"https://{domain}/page-{n}"
            for age in range(missing, DAYS):
                day = LAST_DAY - timedelta(days=age)
                change = trend if age < 14 else 1.0  # the last two weeks: a step the sparkline shows
                impressions = max(1, round(reach / (n + 1) * change * (0.75 if day.weekday() >= 5 else 1)
                                           * rng.uniform(0.85, 1.15)))
                position = 2 + n * 1.3 * rng.uniform(0.9, 1.1)
                clicks = round(impressions * 0.3 / position * rng.uniform(0.8, 1.2))
                rows.append(UrlMetric(site_target=target, url=url, url_normalized=url, period_start=day,
                                      period_end=day, clicks=clicks, impressions=impressions,
                                      ctr=clicks / impressions, position=position,
                                      position_weight=position_weight(position, impressions), source_import=imp))
    UrlMetric.objects.bulk_create(rows)
    SiteTargetFactory(site=SiteFactory(org=org, domain="new-client.example"), url_prefix="https://new-client.example/")
    falling = sites["boulangerie-dupont-et-fils.example"]
    Alert.objects.create(site=falling, kind=AlertKind.CLICKS_DROP, period_start=LAST_DAY - timedelta(days=6),
                         period_end=LAST_DAY, before=1480, after=690)
    Annotation.objects.create(site=falling, day=LAST_DAY - timedelta(days=20), text="new theme went live")
    ImportFactory(site_target=sites["plumber-lyon.example"].targets.get(), filename="plumber-oct.xlsx", failed=True)
    return falling


# The widest table of the page, and the page itself, against the window.
WIDTHS = """() => {
  const tables = [...document.querySelectorAll('main table')];
  const widest = Math.max(...tables.map(t => t.getBoundingClientRect().right));
  const wraps = [...document.querySelectorAll('.table-wrap')].map(w => w.scrollWidth - w.clientWidth);
  return {window: window.innerWidth, widest: widest, page: document.documentElement.scrollWidth,
          wrapOverflow: Math.max(0, ...wraps)};
}"""


def test_the_portfolio_lists_every_site_biggest_fall_first_and_fits_1400_px(live_server, media):
    from playwright.sync_api import expect, sync_playwright

    falling = agency()
    assert timezone.localdate() > LAST_DAY
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(TIMEOUT_MS)
            expect.set_options(timeout=TIMEOUT_MS)

            page.goto(f"{live_server.url}/accounts/login/?next=/imports/")
            page.get_by_label("Username").fill("ana")
            page.get_by_label("Password").fill("pw-for-tests")
            page.get_by_role("button", name="Log in").click()
            page.get_by_role("link", name="Sites", exact=True).click()
            expect(page).to_have_url(f"{live_server.url}/imports/sites/")

            expect(page.locator("[data-current-period]")).to_have_text("2026-11-02 → 2026-11-29")
            rows = page.locator("[data-portfolio] tbody tr")
            expect(rows).to_have_count(len(SITES) + 1)
            expect(rows.first).to_have_attribute("data-site", falling.domain)
            expect(rows.last).to_have_attribute("data-site", "new-client.example")  # no data: last
            expect(rows.first.locator("[data-alerts]")).to_have_text("1 alert")
            expect(page.locator('tr[data-site="plumber-lyon.example"] [data-failed-imports]')).to_have_text(
                "1 failed import")
            expect(page.locator('tr[data-site="plumber-lyon.example"] [data-newest]')).to_have_text("2026-11-26")
            assert page.locator("[data-portfolio] polyline").count() == len(SITES)
            note = rows.first.locator("svg title", has_text="new theme went live")
            expect(note).to_have_count(1)

            widths = page.evaluate(WIDTHS)
            assert widths["widest"] <= widths["window"], widths
            assert widths["page"] <= widths["window"] and widths["wrapOverflow"] <= 0, widths
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOT), full_page=True)

            # A year before has no data here: every change is a dash, and the choice is kept in the row links.
            page.locator("select[data-compare]").select_option("year")
            page.get_by_role("button", name="Show").click()
            expect(page.locator("[data-previous-period]")).to_have_text("2025-11-03 → 2025-11-30")
            row = page.locator(f'tr[data-site="{falling.domain}"]')
            expect(row.locator("[data-clicks-change]")).to_have_text("—")
            expect(row.locator("[data-clicks-delta]")).to_have_text("—")
            row.get_by_role("link", name=falling.domain).click()
            expect(page.get_by_role("heading", name=falling.domain)).to_be_visible()
            expect(page.locator("[data-previous-period]")).to_have_text("2025-11-03 → 2025-11-30")
        finally:
            browser.close()
