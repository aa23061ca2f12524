"""The outbox admin: scoped by org, age / attempts / last error shown, "retry now" through the transition."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from jobs.models import Job
from outbox import entries
from outbox.models import Entry
from tests.factories import OrgFactory, UserFactory

pytestmark = pytest.mark.django_db

URL = reverse("admin:outbox_entry_changelist")


def staff_of(org, *codenames):
    user = UserFactory(is_staff=True, org=org)
    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_entry", *codenames]))
    return user


def add(org, ref):
    entries.add(org_id=org.pk, document_ref=ref, source="test", document={"filename": f"{ref}.pdf"})
    return Entry.objects.get(document_ref=ref)


def test_a_member_sees_their_orgs_entries_only_with_attempts_and_error(client, downstream):
    mine, theirs = OrgFactory(), OrgFactory()
    entry = add(mine, "doc-mine")
    add(theirs, "doc-theirs")
    claimed = entries.claim("s")
    entries.failed(claimed, "HTTP 502: bad gateway")
    client.force_login(staff_of(mine))

    page = client.get(URL).content.decode()
    assert "doc-mine" in page and "doc-theirs" not in page
    assert "HTTP 502: bad gateway" in page
    assert "Outbox: 1 document of your orgs waiting" in page
    other = Entry.objects.get(document_ref="doc-theirs")
    assert client.get(reverse("admin:outbox_entry_change", args=[other.pk])).status_code == 404
    assert client.get(reverse("admin:outbox_entry_change", args=[entry.pk])).status_code == 200


def test_retry_now_makes_the_entry_due_and_queues_a_sender(client, downstream):
    org = OrgFactory()
    entry = add(org, "doc")
    entries.failed(entries.claim("s"), "HTTP 500")
    Entry.objects.update(next_attempt_at=timezone.now() + timedelta(hours=1))
    Job.objects.filter(type="deliver_outbox").delete()
    client.force_login(staff_of(org, "change_entry"))

    response = client.post(URL, {"action": "retry_now", "_selected_action": [entry.pk]}, follow=True)
    assert "1 of 1 entries due now" in response.content.decode()
    assert Entry.objects.get().next_attempt_at <= timezone.now()
    assert Job.objects.filter(type="deliver_outbox", status="queued").count() == 1
