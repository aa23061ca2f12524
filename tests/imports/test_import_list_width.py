"""The admin's Imports list fits 1,400 px, with the side bar and its filters, its status column in sight.

A real agency's imports: long export names, long client names and URL prefixes, every count filled in. A
wider list hides its last columns (the status, the job) behind a scroll bar. Measured in Debian's Chromium
(tests/support/admin_browser.py), as the mailbox and attachment lists are.
"""

import pytest
from django.urls import reverse

from tests.factories import ImportFactory, OrgFactory, SiteFactory, SiteTargetFactory, UserFactory
from tests.support.admin_browser import CHROMIUM, change_list_layout

IMPORTS_URL = reverse("admin:imports_import_changelist")

LONG_FILENAME = "Performance-report_Search-Console_www.a-client-with-a-long-domain-name.example_2026-11-01_2026-11-30.csv"
LONG_PREFIX = "https://www.a-client-with-a-long-domain-name.example/en-gb/collections/autumn-winter/"


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium: run scripts/install_browser.sh")
def test_the_imports_list_fits_1400_px_with_its_status_in_sight(live_server, media):
    org = OrgFactory(id="a-client-with-a-long-name", name="An agency client with a rather long name")
    target = SiteTargetFactory(site=SiteFactory(org=org, domain="www.a-client-with-a-long-domain-name.example"),
                               url_prefix=LONG_PREFIX)
    counts = {"read": 1234567, "inserted": 1234000, "updated": 567, "skipped": 12345, "errors": 12345}
    ImportFactory(site_target=target, filename=LONG_FILENAME, done=True, **counts)
    ImportFactory(site_target=target, filename=LONG_FILENAME.replace(".csv", ".xlsx"), failed=True)
    ImportFactory(site_target=target, filename="a" * 200 + ".csv", running=True)
    admin = UserFactory(username="root", org=org)
    admin.is_staff = admin.is_superuser = True
    admin.save()

    shown = change_list_layout(live_server, IMPORTS_URL)

    assert shown["sidebar"] and shown["filters"] and shown["rows"] == 3
    assert "STATUS" in [header.upper() for header in shown["headers"]]
    assert shown["overflow"] <= 0, (f"the list is {shown['overflow']} px wider than its place at 1,400 px; "
                                    f"its columns: {shown['widths']}")
