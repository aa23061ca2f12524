"""The admin's notes list fits 1,400 px with the side bar and its filters, a 200-character note and a long
domain in it (Debian's Chromium, tests/support/admin_browser.py, as the other lists)."""

from datetime import date

import pytest
from django.urls import reverse

from insight.models import Annotation
from tests.factories import OrgFactory, SiteFactory, UserFactory
from tests.support.admin_browser import CHROMIUM, change_list_layout


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium: run scripts/install_browser.sh")
def test_the_notes_list_fits_1400_px(live_server, media):
    org = OrgFactory(id="a-client-with-a-long-name", name="An agency client with a rather long name")
    site = SiteFactory(org=org, domain="www.a-client-with-a-long-domain-name-for-its-shop.example")
    admin = UserFactory(username="root", org=org)
    admin.is_staff = admin.is_superuser = True
    admin.save()
    Annotation.objects.create(site=site, day=date(2026, 11, 12), created_by=admin,
                              text="Moved the whole shop to HTTPS and changed the category URLs " * 3 + "x" * 20)
    Annotation.objects.create(site=SiteFactory(org=org, domain="blog.a-client-with-a-long-domain-name.example"),
                              day=date(2026, 11, 20), text="Unbreakable" + "x" * 189)

    shown = change_list_layout(live_server, reverse("admin:insight_annotation_changelist"))

    assert shown["sidebar"] and shown["filters"] and shown["rows"] == 2
    assert shown["overflow"] <= 0, (f"the list is {shown['overflow']} px wider than its place at 1,400 px; "
                                    f"its columns: {shown['widths']}")
