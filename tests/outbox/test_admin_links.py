"""The outbox admin links an entry to its document's admin page, found by URL name (the outbox imports no
app above it), and an operator only ever gets links to their own org's documents."""

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from outbox import entries
from outbox.admin import document_url
from outbox.models import Entry
from tests.factories import OrgFactory, UserFactory
from tests.mailpoll.factories import AttachmentFactory

pytestmark = pytest.mark.django_db

LIST = reverse("admin:outbox_entry_changelist")


@pytest.mark.parametrize(("ref", "expected"), [
    ("mailpoll.attachment:42", ("/admin/mailpoll/attachment/42/change/", "attachment 42")),
    ("mailpoll.request:7", ("/admin/mailpoll/request/7/change/", "request 7")),
    ("mailpoll.nosuchmodel:7", None),  # no admin page by that name
    ("test:doc:1", None),  # not a model's row
    ("mailpoll.attachment:42/../../", None),
    ("mailpoll.attachment:", None),
    ("Mailpoll.Attachment:42", None),
])
def test_document_url(ref, expected):
    assert document_url(ref) == expected


def operator_of(org):
    user = UserFactory(is_staff=True, org=org)
    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_entry", "view_attachment",
                                                                       "view_request"]))
    return user


def held_attachment(org, filename):
    attachment = AttachmentFactory(held=True, request__mailbox__org=org, filename=filename)
    assert attachment.request.org_id == org.pk
    entries.add(org_id=org.pk, document_ref=f"mailpoll.attachment:{attachment.pk}", source="email",
                document={"filename": filename})
    return attachment


def test_an_entry_links_to_its_own_attachment_and_never_to_another_orgs(client, downstream):
    mine, theirs = OrgFactory(), OrgFactory()
    attachment = held_attachment(mine, "mine.pdf")
    foreign = held_attachment(theirs, "theirs.pdf")
    client.force_login(operator_of(mine))
    own_url = reverse("admin:mailpoll_attachment_change", args=[attachment.pk])
    foreign_url = reverse("admin:mailpoll_attachment_change", args=[foreign.pk])

    listing = client.get(LIST).content.decode()
    assert f'<a href="{own_url}">attachment {attachment.pk}</a>' in listing
    assert foreign_url not in listing

    entry = Entry.objects.get(document_ref=f"mailpoll.attachment:{attachment.pk}")
    detail = client.get(reverse("admin:outbox_entry_change", args=[entry.pk])).content.decode()
    assert f'<a href="{own_url}">attachment {attachment.pk}</a>' in detail

    # The link's target is that attachment, and from it its Request, one click on.
    target = client.get(own_url)
    assert target.status_code == 200 and "mine.pdf" in target.content.decode()
    assert reverse("admin:mailpoll_request_change", args=[attachment.request_id]) in target.content.decode()
    assert client.get(foreign_url).status_code == 404  # had it been guessed

