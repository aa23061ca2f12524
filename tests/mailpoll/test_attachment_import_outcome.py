"""A mailed CSV whose import failed says so in the attachments admin, not "Done" (issue 24 §2).

The attachment is done once its run handed the file to an Import; the list and the attachment's page show
what became of that Import: its status, its error, its page on the Imports pages. The documents run through
the real pipeline (``process_attachment``, then ``import_csv``) on an in-process worker.
"""

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils.html import escape

from imports.models import ImportStatus
from mailpoll.models import Attachment, AttachmentStatus
from mailpoll.sync.store import store_message
from tests.factories import UserFactory
from tests.mailpoll.factories import CSV, MailboxFactory, mail
from tests.support.processes import run_burst

pytestmark = pytest.mark.django_db

ATTACHMENTS_URL = reverse("admin:mailpoll_attachment_changelist")
# Headers no reader knows: the import refuses the file as a whole.
UNKNOWN = b"Landing Page URL,Visits\nhttps://shop.example/a,3\n"


def mailed(mailbox, *files) -> dict[str, Attachment]:
    """Store one message with these (name, CSV bytes) files, run its jobs; the attachments by file name."""
    store_message(mailbox, "INBOX", 1, mail(attachments=[(name, data, "text/csv") for name, data in files]))
    run_burst()  # process_attachment, then import_csv
    return {a.filename: a for a in Attachment.objects.filter(kind="file").select_related("source_import")}


def row_of(response, filename: str) -> str:
    """The list's table row of the attachment named ``filename``."""
    rows = response.content.decode().split('id="result_list"')[1].split("</table>")[0].split("<tr")
    return next(row for row in rows if f">{filename}<" in row)


def listed(response) -> set:
    return {obj.pk for obj in response.context["cl"].result_list}


@pytest.fixture
def outcomes():
    """A failed import and a good one, from one message; both attachments done."""
    found = mailed(MailboxFactory(), ("bad.csv", UNKNOWN), ("good.csv", CSV))
    bad, good = found["bad.csv"], found["good.csv"]
    assert (bad.status, good.status) == (AttachmentStatus.DONE, AttachmentStatus.DONE)
    assert (bad.source_import.status, good.source_import.status) == (ImportStatus.FAILED, ImportStatus.DONE)
    return bad, good


def test_the_list_shows_a_failed_import_with_its_error_and_page_not_done(admin_client, outcomes):
    bad, good = outcomes

    bad_row, good_row = (row_of(admin_client.get(ATTACHMENTS_URL), name) for name in ("bad.csv", "good.csv"))

    assert "Import failed" in bad_row and ">Done<" not in bad_row
    assert "its import failed: " in bad_row
    assert reverse("imports:detail", args=[bad.source_import_id]) in bad_row
    assert "Import done" in good_row and "its import failed" not in good_row


def test_the_import_failed_filter_lists_only_those(admin_client, outcomes):
    bad, good = outcomes

    failed = admin_client.get(ATTACHMENTS_URL, {"import": "failed"})
    imported = admin_client.get(ATTACHMENTS_URL, {"import": "done"})

    assert listed(failed) == {bad.pk}
    assert escape("the import's page says what went wrong") in failed.content.decode()
    assert listed(imported) == {good.pk}


def test_the_attachments_page_shows_the_imports_whole_error_and_its_pages(admin_client, outcomes):
    bad, _ = outcomes
    imp = bad.source_import

    html = admin_client.get(reverse("admin:mailpoll_attachment_change", args=[bad.pk])).content.decode()

    assert imp.error.startswith("ImportRejected: no URL column") and escape(imp.error) in html
    assert reverse("imports:detail", args=[imp.pk]) in html
    assert reverse("admin:imports_import_change", args=[imp.pk]) in html
    assert "Import failed" in html


def test_another_orgs_staff_sees_none_of_it(client, outcomes):
    bad, _ = outcomes
    stranger = UserFactory(is_staff=True)
    stranger.user_permissions.add(Permission.objects.get(codename="view_attachment"))
    client.force_login(stranger)

    assert listed(client.get(ATTACHMENTS_URL, {"import": "failed"})) == set()
    assert client.get(reverse("admin:mailpoll_attachment_change", args=[bad.pk])).status_code == 404


def test_an_attachment_without_import_keeps_its_own_status(admin_client):
    failed = mailed(MailboxFactory(site_target=None), ("waiting.csv", CSV))["waiting.csv"]

    html = admin_client.get(ATTACHMENTS_URL).content.decode()

    assert failed.status == AttachmentStatus.NEEDS_ROUTE and failed.source_import is None
    assert "Needs a site" in html and "Import " not in html.split('id="result_list"')[1]


def test_a_mailed_file_that_imported_nothing_says_so_not_done(admin_client):
    elsewhere = CSV.replace(b"https://shop.example/", b"https://other.example/")
    found = mailed(MailboxFactory(), ("other.csv", elsewhere), ("good.csv", CSV))
    other = found["other.csv"]
    assert (other.source_import.status, other.source_import.outcome) == (ImportStatus.DONE, "nothing_imported")

    row = row_of(admin_client.get(ATTACHMENTS_URL), "other.csv")
    assert "Import nothing imported" in row and "Import done" not in row
    assert "None of the" in row or "The row was not imported" in row  # the reason, on hover
    assert listed(admin_client.get(ATTACHMENTS_URL, {"import": "nothing_imported"})) == {other.pk}
    assert listed(admin_client.get(ATTACHMENTS_URL, {"import": "done"})) == {found["good.csv"].pk}
