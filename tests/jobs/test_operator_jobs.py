"""The Operator group on the jobs admin: it requeues its own org's failed jobs from the jobs list, and sees a
read-only list of the live workers without what each is doing (that names every org's jobs and mailboxes)."""

import pytest
from django.contrib.admin import helpers
from django.contrib.auth.models import Group
from django.urls import reverse

from jobs.models import Job, JobStatus, Process
from seoinsight import operator_group
from tests.factories import JobFactory, OrgFactory, UserFactory

pytestmark = pytest.mark.django_db

JOBS_URL = reverse("admin:jobs_job_changelist")
PROCESSES_URL = reverse("admin:jobs_process_changelist")


@pytest.fixture
def operator(client):
    user = UserFactory(is_staff=True, org=OrgFactory(id="acme"))
    user.groups.add(Group.objects.get(name=operator_group.NAME))
    client.force_login(user)
    return user


def test_an_operator_requeues_their_orgs_failed_job_from_the_jobs_list(client, operator):
    ours = JobFactory(org_id="acme", type="import_csv", failed=True)
    theirs = JobFactory(org_id=OrgFactory(id="globex").pk, type="import_csv", failed=True)
    page = client.get(JOBS_URL).content.decode()
    assert 'value="requeue_jobs"' in page

    response = client.post(JOBS_URL, {"action": "requeue_jobs",
                                      helpers.ACTION_CHECKBOX_NAME: [str(ours.pk), str(theirs.pk)]}, follow=True)

    assert [str(m) for m in response.context["messages"]] == ["1 job requeued"]
    assert Job.objects.get(pk=ours.pk).status == JobStatus.QUEUED
    assert Job.objects.get(pk=theirs.pk).status == JobStatus.FAILED


def test_an_operator_sees_the_live_workers_without_what_they_do(client, operator):
    Process.objects.create(kind="runjobs", host="worker-1", pid=4242, doing="job=0190 type=import_csv")
    response = client.get(PROCESSES_URL)
    html = response.content.decode()
    assert response.status_code == 200
    assert "worker-1" in html and "4242" in html and "running" in html
    assert "import_csv" not in html and "doing" not in response.context["cl"].list_display
    process = Process.objects.get()
    detail = client.get(reverse("admin:jobs_process_change", args=[process.pk])).content.decode()
    assert "import_csv" not in detail
    assert client.post(reverse("admin:jobs_process_delete", args=[process.pk])).status_code == 403
    assert client.get(reverse("admin:jobs_schedule_changelist")).status_code == 403


def test_a_superuser_sees_what_each_worker_does(client):
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    Process.objects.create(kind="runjobs", host="worker-1", pid=4242, doing="job=0190 type=import_csv")
    assert "import_csv" in client.get(PROCESSES_URL).content.decode()
