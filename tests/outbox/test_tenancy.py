"""A sender serves every org, so its job is no org's: filed under the system org (superusers only, no API
token reaches it), its report only counts. The outbox page counts the viewer's orgs only, and "Retry now"
needs the change permission."""

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from jobs.models import Job
from jobs.system import SYSTEM_ORG
from outbox import entries, sender
from outbox.models import Entry
from outbox.wake import JOB_TYPE
from tests.factories import OrgFactory, UserFactory, api_token

pytestmark = pytest.mark.django_db

LIST = reverse("admin:outbox_entry_changelist")


def add(org, ref, filename):
    entries.add(org_id=org.pk, document_ref=ref, source="test",
                document={"filename": filename, "sender": f"boss@{org.pk}.example"})
    return Entry.objects.get(document_ref=ref)


def staff_of(org, *codenames):
    user = UserFactory(is_staff=True, org=org)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return user


def test_a_sender_job_is_the_system_orgs_and_reports_counts_only(client, downstream, settings):
    settings.OUTBOX_SENDER_SECONDS, settings.OUTBOX_RETRY_BASE_SECONDS = 5, 60  # both tried, neither again
    alpha, bravo = OrgFactory(), OrgFactory()
    add(alpha, "doc-a", "alpha-plan.csv")
    add(bravo, "doc-b", "bravo-secret-merger.csv")
    downstream.answers = [500, 500]

    job = Job.objects.get(type=JOB_TYPE, status="queued")
    assert job.org_id == SYSTEM_ORG
    report = sender.run()
    assert report["failed"] == 2
    text = json.dumps(report)
    assert "bravo" not in text and "alpha" not in text and "HTTP" not in text

    _, token = api_token(alpha)
    response = client.get(f"/jobs/{job.id}", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 404


def test_sender_jobs_show_in_the_job_admin_to_superusers_only(client, downstream):
    alpha = OrgFactory()
    add(alpha, "doc-a", "alpha-plan.csv")
    job = Job.objects.get(type=JOB_TYPE)
    page = reverse("admin:jobs_job_change", args=[job.pk])

    client.force_login(staff_of(alpha, "view_job"))
    assert client.get(page).status_code == 404
    assert str(job.pk)[:8] not in client.get(reverse("admin:jobs_job_changelist")).content.decode()

    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    assert client.get(page).status_code == 200


def test_the_outbox_page_counts_the_viewers_orgs_only(client, downstream):
    alpha, bravo = OrgFactory(), OrgFactory()
    add(alpha, "doc-a", "a.csv")
    for i in range(3):
        add(bravo, f"doc-b{i}", "b.csv")

    client.force_login(staff_of(alpha, "view_entry"))
    page = client.get(LIST).content.decode()
    assert "Outbox: 1 document of your orgs waiting for the downstream" in page
    assert "4 of" not in page

    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    assert "Outbox: 4 of 200 documents waiting for the downstream" in client.get(LIST).content.decode()


def test_retry_now_needs_the_change_permission(client, downstream):
    org = OrgFactory()
    entry = add(org, "doc", "a.csv")
    entries.failed(entries.claim("s"), "HTTP 500")
    later = timezone.now() + timedelta(hours=1)
    Entry.objects.update(next_attempt_at=later)

    client.force_login(staff_of(org, "view_entry"))
    client.post(LIST, {"action": "retry_now", "_selected_action": [entry.pk]}, follow=True)
    assert Entry.objects.get().next_attempt_at == later  # a viewer cannot

    client.force_login(staff_of(org, "view_entry", "change_entry"))
    response = client.post(LIST, {"action": "retry_now", "_selected_action": [entry.pk]}, follow=True)
    assert "1 of 1 entries due now" in response.content.decode()
    assert Entry.objects.get().next_attempt_at <= timezone.now()
