"""Help texts in the admin read as written: a plain one is escaped, one marked as HTML stays HTML.

Django prints a help text unescaped; ``reports+<slug>@…`` lost its placeholder to the browser as an unknown tag.
templates/admin/includes/fieldset.html escapes help texts not marked safe.
"""

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from tests.factories import OrgFactory, SiteFactory, UserFactory

pytestmark = pytest.mark.django_db


def staff_of(client, org, *codenames):
    user = UserFactory(is_staff=True, org=org)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    client.force_login(user)
    return user


def test_the_site_slug_help_text_keeps_its_placeholder(client):
    org = OrgFactory()
    site = SiteFactory(org=org)
    staff_of(client, org, "view_site", "change_site")
    page = client.get(reverse("admin:seoinsight_site_change", args=[site.pk])).content.decode()
    assert "A short name for mail: reports+&lt;slug&gt;@… (when the org allows it)." in page
    assert "<slug>" not in page


def test_the_org_plus_tag_help_text_keeps_its_placeholder(admin_client):
    org = OrgFactory()
    page = admin_client.get(reverse("admin:seoinsight_org_change", args=[org.pk])).content.decode()
    assert "Mail to an address like reports+&lt;site slug&gt;@… goes to that site&#x27;s default target" in page


def test_a_help_text_written_as_html_stays_html(client):
    org = OrgFactory()
    staff_of(client, org, "view_mailbox", "add_mailbox")
    page = client.get(reverse("admin:mailpoll_mailbox_add")).content.decode()
    assert "Comma-separated, e.g. <code>INBOX, Invoices</code>." in page
    assert "<b>New mail only</b>" in page
