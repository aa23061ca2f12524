"""Notes and open alerts on the site page's chart, in a real headless Chromium.

An operator adds a note through the form under the chart: it comes back as a marker at its day's x (read from
the uPlot instance: valToPos), with its text on hover, and in the list under the chart; an open alert is a band
over its days. The lines stay inside their axes, and the page logs no error. Takes docs/img/annotations.png.
"""

from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from insight.models import Alert, AlertKind, Annotation
from tests.e2e.test_site_page import LAST_DAY, assert_inside_its_axes, demo_site
from tests.e2e.test_upload import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium: run scripts/install_browser.sh"),
]

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "img" / "annotations.png"
NOTE_DAY = date(2026, 11, 12)
ALERT_DAYS = (date(2026, 11, 21), date(2026, 11, 27))

# A mark's box against the plotting area's, and where the chart puts a day (all in CSS pixels of the page).
MARK_BOX = """([id, selector, days]) => {
  const chart = window.sitePageCharts[id];
  const over = chart.over.getBoundingClientRect();
  const mark = document.querySelector(`[data-chart="${id}"] ${selector}`).getBoundingClientRect();
  return {left: mark.left - over.left, right: mark.right - over.left, width: mark.width,
          top: mark.top - over.top, height: mark.height, overHeight: over.height,
          days: days.map(d => chart.valToPos(d, "x"))};
}"""


def seconds(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp())


def log_in(page, base_url, site, username):
    page.goto(f"{base_url}/accounts/login/?next=/imports/sites/{site.pk}/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("pw-for-tests")
    page.get_by_role("button", name="Log in").click()


def test_a_note_added_in_the_browser_is_marked_at_its_day_beside_an_open_alert(live_server, media):
    from playwright.sync_api import expect, sync_playwright

    site = demo_site()
    alert = Alert.objects.create(site=site, kind=AlertKind.CLICKS_DROP, period_start=ALERT_DAYS[0],
                                 period_end=ALERT_DAYS[1], before=2140, after=1310)
    errors = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(TIMEOUT_MS)
            expect.set_options(timeout=TIMEOUT_MS)
            # Every error the page logs, but the browser's own ask for a favicon (the site has none).
            page.on("console", lambda message: message.type == "error"
                    and not message.location.get("url", "").endswith("/favicon.ico") and errors.append(message.text))
            page.on("pageerror", lambda error: errors.append(str(error)))
            log_in(page, live_server.url, site, "ana")
            base = f"{live_server.url}/imports/sites/{site.pk}/"
            page.goto(f"{base}?period=28d")
            expect(page.locator("[data-current-period]")).to_have_text("2026-11-02 → 2026-11-29")

            form = page.locator("[data-note-form]")
            form.get_by_label("Day").fill(NOTE_DAY.isoformat())
            form.get_by_label("Note").fill("Moved to HTTPS")
            form.get_by_role("button", name="Add note").click()

            # Back on the same period, the note listed under the chart and said added.
            expect(page).to_have_url(f"{base}?period=28d#notes")
            expect(page.locator(".messages")).to_contain_text("Note added on 2026-11-12: “Moved to HTTPS”.")
            listed = page.locator('[data-marks="chart-site"] [data-note-list] li')
            expect(listed).to_have_count(1)
            expect(listed).to_contain_text("2026-11-12 Moved to HTTPS")
            note_id = listed.get_attribute("data-note")
            expect(page.locator(f'[data-marks="chart-site"] [data-alert="{alert.pk}"]')).to_contain_text(
                "Clicks fell −38.8% (2,140 → 1,310 in 7 days)")

            page.wait_for_function("() => window.sitePageCharts && window.sitePageCharts['chart-site']")
            note = page.evaluate(MARK_BOX, ["chart-site", f'[data-note-mark="{note_id}"]', [seconds(NOTE_DAY)]])
            centre = (note["left"] + note["right"]) / 2
            assert abs(centre - note["days"][0]) <= 1, note
            assert note["top"] <= 1 and note["height"] >= note["overHeight"] - 1, note  # the plot's full height

            band = page.evaluate(MARK_BOX, ["chart-site", f'[data-alert-mark="{alert.pk}"]',
                                            [seconds(ALERT_DAYS[0]), seconds(ALERT_DAYS[1])]])
            first, last = band["days"]
            day_width = (last - first) / 6
            assert first - day_width / 2 - 1 <= band["left"] <= first and last <= band["right"] <= last + day_width / 2 + 1, band

            # The texts on hover: the note's, then the alert's (from its flag).
            tip = page.locator(f'[data-note-mark="{note_id}"] .chart-mark-tip')
            expect(tip).to_be_hidden()
            page.locator(f'[data-note-mark="{note_id}"]').hover()
            expect(tip).to_be_visible()
            expect(tip).to_have_text("2026-11-12 · Moved to HTTPS")
            page.locator(f'[data-alert-mark="{alert.pk}"] .chart-mark-flag').hover()
            expect(page.locator(f'[data-alert-mark="{alert.pk}"] .chart-mark-tip')).to_have_text(
                "2026-11-21 → 2026-11-27 · Clicks fell −38.8% (2,140 → 1,310 in 7 days)")

            # The marks move with the chart: a narrower window, the same days.
            width = page.evaluate("() => window.sitePageCharts['chart-site'].over.clientWidth")
            page.set_viewport_size({"width": 1000, "height": 1000})
            page.wait_for_function("(w) => Math.abs(window.sitePageCharts['chart-site'].over.clientWidth - w) > 50",
                                   arg=width)
            moved = page.evaluate(MARK_BOX, ["chart-site", f'[data-note-mark="{note_id}"]', [seconds(NOTE_DAY)]])
            assert abs((moved["left"] + moved["right"]) / 2 - moved["days"][0]) <= 1, moved
            page.set_viewport_size({"width": 1400, "height": 1000})

            assert_inside_its_axes(page, "chart-site", "with a note and an alert")

            # A page's history: the site's note is marked on its chart too, at the same day.
            page.locator("[data-top-pages] tbody tr").first.get_by_role("link").click()
            page.wait_for_function("() => window.sitePageCharts && window.sitePageCharts['chart-page']")
            history = page.evaluate(MARK_BOX, ["chart-page", f'[data-note-mark="{note_id}"]', [seconds(NOTE_DAY)]])
            assert abs((history["left"] + history["right"]) / 2 - history["days"][0]) <= 1, history
            assert_inside_its_axes(page, "chart-page", "a page's history with a note and an alert")

            # The docs' picture: the chart with the note's text shown, the list and the form under it.
            page.goto(f"{base}?period=28d")
            page.wait_for_function("() => window.sitePageCharts && window.sitePageCharts['chart-site']")
            page.locator("#chart").scroll_into_view_if_needed()
            page.locator(f'[data-note-mark="{note_id}"]').hover()
            expect(page.locator(f'[data-note-mark="{note_id}"] .chart-mark-tip')).to_be_visible()
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            page.locator("#chart").screenshot(path=str(SCREENSHOT))

            # Deleted from the list: gone from the chart and the list.
            page.locator(f'[data-note="{note_id}"]').get_by_role("button", name="Delete the note of 2026-11-12").click()
            expect(page).to_have_url(f"{base}?period=28d#notes")
            expect(page.locator("[data-note-list]")).to_have_count(0)
            expect(page.locator("[data-note-mark]")).to_have_count(0)
            expect(page.locator(f'[data-alert-mark="{alert.pk}"]')).to_have_count(1)
        finally:
            browser.close()

    assert errors == []
    assert Annotation.objects.count() == 0


def test_a_refused_note_says_why_and_keeps_the_words(live_server, media):
    from playwright.sync_api import expect, sync_playwright

    site = demo_site()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(TIMEOUT_MS)
            expect.set_options(timeout=TIMEOUT_MS)
            log_in(page, live_server.url, site, "ana")
            page.goto(f"{live_server.url}/imports/sites/{site.pk}/?period=7d")
            form = page.locator("[data-note-form]")
            form.get_by_label("Day").fill(LAST_DAY.isoformat())
            # Only spaces: the browser's "required" lets them through, the server refuses them.
            form.get_by_label("Note").fill("     ")
            form.get_by_role("button", name="Add note").click()

            expect(page.locator("[data-note-errors]")).to_contain_text("The note is empty")
            expect(page.locator("[data-note-errors]")).to_contain_text("The note was not added.")
            expect(page.locator("[data-current-period]")).to_have_text("2026-11-23 → 2026-11-29")
            expect(form.get_by_label("Day")).to_have_value(LAST_DAY.isoformat())
        finally:
            browser.close()

    assert Annotation.objects.count() == 0


def test_on_a_chart_of_weekly_rows_a_note_is_at_its_day_or_only_listed_past_the_last_point(live_server, media):
    """Rows covering a week are drawn at their first day: a note between two is placed at its own day; one
    after the last week's first day is past the chart's x axis, so it is only listed (never drawn at an edge)."""
    from playwright.sync_api import expect, sync_playwright

    from imports.ingest import position_weight
    from imports.models import UrlMetric
    from tests.factories import ImportFactory, OrgFactory, SiteFactory, SiteTargetFactory, UserFactory

    org = OrgFactory(id="weekly", name="Weekly")
    site = SiteFactory(org=org, domain="weekly.example")
    target = SiteTargetFactory(site=site, url_prefix="https://weekly.example/")
    UserFactory(username="wes", org=org)
    imp = ImportFactory(site_target=target, filename="Pages-weekly.csv", done=True)
    weeks = [date(2026, 11, 2), date(2026, 11, 9), date(2026, 11, 16), date(2026, 11, 23)]
    UrlMetric.objects.bulk_create(
        UrlMetric(site_target=target, url="https://weekly.example/a", url_normalized="https://weekly.example/a",
                  period_start=start, period_end=date.fromordinal(start.toordinal() + 6), clicks=clicks,
                  impressions=clicks * 20, ctr=0.05, position=3.0 + n, position_weight=position_weight(3.0 + n, clicks * 20),
                  source_import=imp)
        for n, (start, clicks) in enumerate(zip(weeks, [9, 378, 12, 1050], strict=True)))
    inside = Annotation.objects.create(site=site, day=date(2026, 11, 12), text="between two weeks")
    past = Annotation.objects.create(site=site, day=date(2026, 11, 28), text="in the last week")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(TIMEOUT_MS)
            expect.set_options(timeout=TIMEOUT_MS)
            log_in(page, live_server.url, site, "wes")
            page.goto(f"{live_server.url}/imports/sites/{site.pk}/?period=custom&from=2026-11-02&to=2026-11-29")
            page.wait_for_function("() => window.sitePageCharts && window.sitePageCharts['chart-site']")
            assert page.evaluate("() => window.sitePageCharts['chart-site'].data[0].length") == 4

            box = page.evaluate(MARK_BOX, ["chart-site", f'[data-note-mark="{inside.pk}"]', [seconds(inside.day)]])
            assert abs((box["left"] + box["right"]) / 2 - box["days"][0]) <= 1, box
            expect(page.locator(f'[data-note-mark="{past.pk}"]')).to_be_hidden()
            expect(page.locator(f'[data-marks="chart-site"] [data-note="{past.pk}"]')).to_contain_text(
                "2026-11-28 in the last week")
            assert_inside_its_axes(page, "chart-site", "weekly rows with notes")
        finally:
            browser.close()
