"""End to end in a real headless browser: log in, upload a CSV, watch its progress bar finish.

Debian's chromium (scripts/install_browser.sh) driven by Playwright through
``executable_path``: Playwright's own browser downloads are never used. The job
runs on a real ``runjobs`` worker against the test database.
"""

import os
import time
from pathlib import Path

import pytest

from imports.models import Import, ImportStatus
from tests.factories import OrgFactory, SiteFactory, SiteTargetFactory, UserFactory
from tests.support.processes import runjobs

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TIMEOUT_MS = 30_000

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.processes,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium: run scripts/install_browser.sh"),
]

CSV = (
    "Page,Clicks,Impressions,CTR,Position,Date\n"
    "https://shop.example/,120,4000,3%,4.2,2024-05-01\n"
    "https://shop.example/shoes,30,1500,2%,8.9,2024-05-01\n"
    "https://shop.example/hats,0,90,0%,31,2024-05-01\n"
)


def reload_until(page, locator, timeout: float = 30):
    """Reload ``page`` until ``locator`` matches something (server-rendered parts do not poll)."""
    deadline = time.monotonic() + timeout
    while not locator.count():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {locator}")
        page.wait_for_timeout(250)
        page.reload()


def test_upload_a_csv_and_watch_it_finish(live_server, processes, media, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    org = OrgFactory(id="shop", name="Shop & Co")
    SiteTargetFactory(site=SiteFactory(org=org, domain="shop.example"), url_prefix="https://shop.example/")
    UserFactory(username="ana", org=org)
    export = tmp_path / "Pages.csv"
    export.write_text(CSV)
    screenshots = Path(os.environ.get("E2E_SCREENSHOT_DIR", tmp_path))

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(TIMEOUT_MS)
            # expect() keeps its own 5 s default: a worker started on a loaded 2-core machine can take longer.
            expect.set_options(timeout=TIMEOUT_MS)

            page.goto(f"{live_server.url}/imports/")
            expect(page).to_have_url(f"{live_server.url}/accounts/login/?next=/imports/")
            page.get_by_label("Username").fill("ana")
            page.get_by_label("Password").fill("pw-for-tests")
            page.get_by_role("button", name="Log in").click()
            expect(page).to_have_url(f"{live_server.url}/imports/")
            expect(page.locator(".who .org")).to_have_text("Shop & Co")
            expect(page.get_by_text("No imports yet — upload a Search Console export above.")).to_be_visible()

            page.get_by_label("Export file").set_input_files(export)
            page.get_by_label("Site target").select_option(label="https://shop.example/")
            page.get_by_role("button", name="Upload and import").click()

            # No worker yet: the row waits with a live progress bar.
            row = page.locator("tr[data-import]", has_text="Pages.csv")
            expect(row.locator("[data-status]")).to_have_text("Queued")
            expect(row.locator("[data-job-url]")).to_be_visible()
            expect(row.locator("[data-progress-label]")).to_have_text("Waiting for a worker…")

            processes(runjobs, MEDIA_ROOT=str(media))
            expect(row.locator("[data-status]")).to_have_text("Done")
            expect(row.locator("[data-job-url]")).to_be_hidden()
            counts = {name: row.locator(f'[data-count="{name}"]')
                      for name in ("read", "inserted", "updated", "skipped", "errors")}
            expect(counts["read"]).to_have_text("3")
            expect(counts["inserted"]).to_have_text("3")
            expect(counts["updated"]).to_have_text("0")
            expect(counts["skipped"]).to_have_text("0")
            expect(counts["errors"]).to_have_text("0")

            # The finished import enqueued map_reconcile: its report joins the event log.
            reload_until(page, page.locator("#events tbody tr"))
            event = page.locator("#events tbody tr").first
            expect(event.locator("td.num")).to_have_text(["3", "3"])
            page.screenshot(path=str(screenshots / "imports-page.png"), full_page=True)

            row.get_by_role("link", name="Pages.csv").click()
            expect(page.locator(".stat [data-count='inserted']")).to_have_text("3")
            expect(page.get_by_text("No row had an error.")).to_be_visible()
        finally:
            browser.close()

    imp = Import.objects.get()
    assert (imp.status, imp.read, imp.inserted) == (ImportStatus.DONE, 3, 3)


def test_a_file_for_another_site_ends_as_nothing_imported_live(live_server, processes, media, tmp_path):
    """The live badge reads the job's outcome: a file whose every row is off the target is never a green Done."""
    from playwright.sync_api import expect, sync_playwright

    org = OrgFactory(id="shop", name="Shop & Co")
    SiteTargetFactory(site=SiteFactory(org=org, domain="shop.example"), url_prefix="https://shop.example/")
    UserFactory(username="ana", org=org)
    export = tmp_path / "Other.csv"
    export.write_text(CSV.replace("https://shop.example/", "https://other.example/"))

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(TIMEOUT_MS)
            expect.set_options(timeout=TIMEOUT_MS)
            page.goto(f"{live_server.url}/accounts/login/?next=/imports/")
            page.get_by_label("Username").fill("ana")
            page.get_by_label("Password").fill("pw-for-tests")
            page.get_by_role("button", name="Log in").click()

            page.get_by_label("Export file").set_input_files(export)
            page.get_by_label("Site target").select_option(label="https://shop.example/")
            page.get_by_role("button", name="Upload and import").click()

            badge = page.locator("tr[data-import]", has_text="Other.csv").locator("[data-status]")
            expect(badge).to_have_text("Queued")
            processes(runjobs, MEDIA_ROOT=str(media))  # now: the page's script sees the job end, no reload
            expect(badge).to_have_text("Nothing imported")
            expect(badge).to_have_class("badge nothing_imported")
        finally:
            browser.close()

    imp = Import.objects.get()
    assert (imp.status, imp.outcome, imp.skipped) == (ImportStatus.DONE, "nothing_imported", 3)
