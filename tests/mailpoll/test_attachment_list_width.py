"""The attachment list fits 1,400 px, with the admin's side bar and filters, however long what it shows.

Long file names (a report export's), subjects, sender addresses and errors are what a real intake
address receives; a wider list hides its last columns (when it arrived) behind a scroll bar. Measured in
Debian's Chromium, as tests/e2e does.
"""

from pathlib import Path

import pytest
from django.urls import reverse

from mailpoll.models import AttachmentStatus
from tests.factories import OrgFactory, UserFactory
from tests.mailpoll.factories import AttachmentFactory, MailboxFactory, RequestFactory

ATTACHMENTS_URL = reverse("admin:mailpoll_attachment_changelist")
CHROMIUM = Path("/usr/bin/chromium")

LONG_FILENAME = "Performance-report_Search-Console_www.a-client-with-a-long-domain-name.example_2026-11-01_2026-11-30.csv"
LONG_SUBJECT = "TR: Fwd: Monthly SEO export for every site of the group, November 2026, as agreed with the account team"
LONG_SENDER = "reporting-automation-no-reply@analytics.a-client-with-a-long-domain-name.example"
LONG_ERROR = ("ImportError: column 'Top queries' not found in the header row; the file's columns are "
              "Requêtes les plus fréquentes, Clics, Impressions, CTR, Position")


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium: run scripts/install_browser.sh")
def test_the_list_fits_1400_px_with_long_names_subjects_senders_and_errors(live_server):
    from playwright.sync_api import sync_playwright

    org = OrgFactory(name="An agency client with a rather long name")
    request = RequestFactory(mailbox=MailboxFactory(org=org), subject=LONG_SUBJECT, sender=LONG_SENDER)
    AttachmentFactory(request=request, filename=LONG_FILENAME, failed=True, error=LONG_ERROR)
    AttachmentFactory(request=request, filename=LONG_FILENAME.replace(".csv", ".xlsx"),
                      status=AttachmentStatus.NEEDS_ROUTE, route_reason="no rule matched this sender or subject")
    AttachmentFactory(request=request, filename="a" * 200 + ".csv", done=True)
    admin = UserFactory(username="root", org=org)
    admin.is_staff = admin.is_superuser = True
    admin.save()

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--headless", "--no-sandbox",
                                                                           "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{live_server.url}/admin/login/?next={ATTACHMENTS_URL}")
            page.fill("#id_username", "root")
            page.fill("#id_password", "pw-for-tests")
            page.click("input[type=submit]")
            page.wait_for_url(f"**{ATTACHMENTS_URL}")
            shown = page.evaluate("""() => {
                const results = document.querySelector('#changelist .results');
                return {overflow: results.scrollWidth - results.clientWidth,
                        rows: document.querySelectorAll('#result_list tbody tr').length,
                        sidebar: !!document.querySelector('#nav-sidebar') && getComputedStyle(
                            document.querySelector('#nav-sidebar')).display !== 'none',
                        filters: !!document.querySelector('#changelist-filter'),
                        widths: Object.fromEntries([...document.querySelectorAll('#result_list thead th')].map(
                            th => [th.innerText.trim(), Math.round(th.getBoundingClientRect().width)]))};
            }""")
        finally:
            browser.close()

    assert shown["sidebar"] and shown["filters"] and shown["rows"] == 3
    assert shown["overflow"] <= 0, (f"the list is {shown['overflow']} px wider than its place at 1,400 px; "
                                    f"its columns: {shown['widths']}")
