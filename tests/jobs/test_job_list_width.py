"""The jobs list fits 1,400 px with the admin's side bar and filters, for the rows an operator reads: a job
for an import of a long file name, one that waits to retry, one with no sign of life. Measured in Debian's
Chromium (tests/support/admin_browser.py); a wider list hides its last columns behind a scroll bar."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs.models import Job
from tests.factories import ImportFactory, JobFactory, OrgFactory, SiteFactory, SiteTargetFactory, UserFactory
from tests.support.admin_browser import CHROMIUM, change_list_layout

JOBS_URL = reverse("admin:jobs_job_changelist")
LONG_FILENAME = "Performance-report_Search-Console_www.a-client-with-a-long-domain-name.example_2026-11-01_2026-11-30.csv"


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium: run scripts/install_browser.sh")
def test_the_jobs_list_fits_1400_px(live_server, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    org = OrgFactory(id="an-agency-client-with-a-long-id", name="An agency client with a rather long name")
    target = SiteTargetFactory(site=SiteFactory(org=org, domain="www.a-client-with-a-long-domain-name.example"),
                               url_prefix="https://www.a-client-with-a-long-domain-name.example/")
    running = ImportFactory(site_target=target, filename=LONG_FILENAME, running=True,
                            progress={"done": 1234567, "total": 9876543})
    ImportFactory(site_target=target, filename=LONG_FILENAME.replace(".csv", ".xlsx"), failed=True)
    hour_ago = timezone.now() - timedelta(hours=1)
    Job.objects.filter(pk=running.job_id).update(started_at=hour_ago)  # no sign of life: the longest status
    JobFactory(org_id=org.pk, type="import_csv", attempts=1, run_after=timezone.now() + timedelta(hours=3))
    admin = UserFactory(username="root", org=org)
    admin.is_staff = admin.is_superuser = True
    admin.save()

    shown = change_list_layout(live_server, JOBS_URL)

    assert shown["sidebar"] and shown["filters"] and shown["rows"] == 3
    assert shown["overflow"] <= 0, (f"the list is {shown['overflow']} px wider than its place at 1,400 px; "
                                    f"its columns: {shown['widths']}")
