"""The attachment list says where each document went: the site, and the mail rule that sent it there (else why).

Documents stored through the real routing (``store_message``): one by a rule, one by the mailbox's site target,
one waiting for a site; the list is read as a staff member of the org.
"""

import re

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from mailpoll.models import Attachment, AttachmentStatus
from mailpoll.sync.store import store_message
from tests.factories import OrgFactory, SiteTargetFactory, UserFactory
from tests.mailpoll.factories import CSV, MailboxFactory, MailRuleFactory, mail

pytestmark = pytest.mark.django_db

ATTACHMENTS_URL = reverse("admin:mailpoll_attachment_changelist")


def stored(mailbox, uid, sender):
    store_message(mailbox, "INBOX", uid, mail(f"Report {uid}", sender=sender,
                                              attachments=[(f"Pages-{uid}.csv", CSV, "text/csv")]))
    return Attachment.objects.get(request__uid=uid, request__mailbox=mailbox)


def row_of(page: str, filename: str) -> str:
    return next(row for row in re.findall(r"<tr>.*?</tr>", page, re.S) if filename in row)


def test_the_list_names_the_site_and_the_rule(client):
    org = OrgFactory()
    fallback = SiteTargetFactory(site__org=org, site__domain="fallback.example")
    mailbox = MailboxFactory(org=org, site_target=fallback)
    rule = MailRuleFactory(org=org, name="Acme weekly", sender="acme.example",
                           site_target=SiteTargetFactory(site__org=org, site__domain="acme.example"))
    by_rule = stored(mailbox, 1, "ana@acme.example")
    stored(mailbox, 2, "bob@other.example")
    assert (by_rule.rule_id, by_rule.status) == (rule.pk, AttachmentStatus.PENDING)
    user = UserFactory(is_staff=True, org=org)
    user.user_permissions.add(Permission.objects.get(codename="view_attachment"))
    client.force_login(user)

    page = client.get(ATTACHMENTS_URL).content.decode()

    assert re.search(r'<th scope="col" class="sortable column-went_to">.*?>Site</a>', page, re.S)
    ruled = row_of(page, "Pages-1.csv")
    assert 'class="field-went_to"' in ruled and ">acme.example</span>" in ruled and "rule &#x27;Acme weekly&#x27;" in ruled
    defaulted = row_of(page, "Pages-2.csv")
    assert ">fallback.example</span>" in defaulted and "the mailbox&#x27;s site target" in defaulted


def test_a_document_waiting_for_a_site_went_nowhere_yet(client):
    org = OrgFactory()
    waiting = stored(MailboxFactory(org=org, site_target=None), 1, "ana@acme.example")
    assert waiting.status == AttachmentStatus.NEEDS_ROUTE
    user = UserFactory(is_staff=True, org=org)
    user.user_permissions.add(Permission.objects.get(codename="view_attachment"))
    client.force_login(user)
    row = row_of(client.get(ATTACHMENTS_URL).content.decode(), "Pages-1.csv")
    assert re.search(r'<td class="field-went_to">—</td>', row)
