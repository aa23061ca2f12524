"""The live progress says what the server says of a job (GET /jobs/<id> ``stalled``): an import queued for minutes
with no worker running says so with its age, poll after poll, until a worker takes it; a running import whose worker
gave no sign of life reads "No sign of life for …", never a percentage. Debian's chromium, as tests/e2e does."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from imports.models import Import, ImportStatus
from jobs.models import Job
from tests.e2e.test_upload import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS
from tests.factories import ImportFactory, OrgFactory, SiteFactory, SiteTargetFactory, UserFactory
from tests.support.processes import runjobs

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.processes,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium: run scripts/install_browser.sh"),
]


def test_the_live_progress_says_no_worker_runs_then_no_sign_of_life(live_server, processes, media, zombies_possible):
    from playwright.sync_api import expect, sync_playwright

    org = OrgFactory(id="shop", name="Shop & Co")
    target = SiteTargetFactory(site=SiteFactory(org=org, domain="site.example"), url_prefix="https://site.example/")
    UserFactory(username="ana", org=org)
    waiting = ImportFactory(site_target=target, filename="Waiting.csv")
    Job.objects.filter(pk=waiting.job_id).update(created_at=timezone.now() - timedelta(minutes=2))
    silent = ImportFactory(site_target=target, filename="Silent.csv", running=True,
                           progress={"done": 13, "total": 100})
    Job.objects.filter(pk=silent.job_id).update(started_at=timezone.now() - timedelta(hours=1))

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(TIMEOUT_MS)
            expect.set_options(timeout=TIMEOUT_MS)
            page.goto(f"{live_server.url}/accounts/login/?next=/imports/")
            page.get_by_label("Username").fill("ana")
            page.get_by_label("Password").fill("pw-for-tests")
            polled = lambda response: f"/jobs/{waiting.job_id}" in response.url  # noqa: E731
            with page.expect_response(polled):
                page.get_by_role("button", name="Log in").click()
            with page.expect_response(polled):
                pass  # a second poll: the first one's answer is drawn by now

            queued = page.locator("tr[data-import]", has_text="Waiting.csv")
            expect(queued.locator("[data-status]")).to_have_text(
                re.compile(r"^Queued 2 min \d+ s ago — no worker is running$"))
            stalled = page.locator("tr[data-import]", has_text="Silent.csv")
            expect(stalled.locator("[data-status]")).to_have_text(re.compile(r"^No sign of life for "))
            expect(stalled.locator("[data-progress-label]")).to_have_text("")

            processes(runjobs, MEDIA_ROOT=str(media))
            expect(queued.locator("[data-status]")).to_have_text("Done")
        finally:
            browser.close()

    assert Import.objects.get(pk=waiting.pk).status == ImportStatus.DONE
