"""The attachment list fits 1,400 px, with the admin's side bar and filters, however long what it shows.

Long file names (a report export's), subjects, sender addresses and errors are what a real intake
address receives; a wider list hides its last columns (when it arrived) behind a scroll bar. Measured in
Debian's Chromium, as tests/e2e does.
"""

import pytest
from django.urls import reverse

from mailpoll.models import AttachmentStatus
from tests.factories import OrgFactory, SiteTargetFactory, UserFactory
from tests.mailpoll.factories import AttachmentFactory, MailboxFactory, RequestFactory
from tests.support.admin_browser import CHROMIUM, change_list_layout

ATTACHMENTS_URL = reverse("admin:mailpoll_attachment_changelist")

LONG_FILENAME = "Performance-report_Search-Console_www.a-client-with-a-long-domain-name.example_2026-11-01_2026-11-30.csv"
LONG_SUBJECT = "TR: Fwd: Monthly SEO export for every site of the group, November 2026, as agreed with the account team"
LONG_SENDER = "reporting-automation-no-reply@analytics.a-client-with-a-long-domain-name.example"
LONG_ERROR = ("ImportError: column 'Top queries' not found in the header row; the file's columns are "
              "Requêtes les plus fréquentes, Clics, Impressions, CTR, Position")


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium: run scripts/install_browser.sh")
def test_the_list_fits_1400_px_with_long_names_subjects_senders_and_errors(live_server):
    org = OrgFactory(name="An agency client with a rather long name")
    request = RequestFactory(mailbox=MailboxFactory(org=org), subject=LONG_SUBJECT, sender=LONG_SENDER)
    AttachmentFactory(request=request, filename=LONG_FILENAME, failed=True, error=LONG_ERROR)
    AttachmentFactory(request=request, filename=LONG_FILENAME.replace(".csv", ".xlsx"),
                      status=AttachmentStatus.NEEDS_ROUTE, route_reason="no rule matched this sender or subject")
    AttachmentFactory(request=request, filename="a" * 200 + ".csv", done=True)
    AttachmentFactory(request=request, filename="routed.csv", done=True, rule_name="Monthly exports of the group's sites",
                      site_target=SiteTargetFactory(site__org=org, site__domain="www.a-client-with-a-long-domain-name.example"))
    admin = UserFactory(username="root", org=org)
    admin.is_staff = admin.is_superuser = True
    admin.save()

    shown = change_list_layout(live_server, ATTACHMENTS_URL)

    assert shown["sidebar"] and shown["filters"] and shown["rows"] == 4
    assert shown["overflow"] <= 0, (f"the list is {shown['overflow']} px wider than its place at 1,400 px; "
                                    f"its columns: {shown['widths']}")
