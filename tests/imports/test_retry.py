"""An operator retries a failed import of their org from its page (POST /imports/<id>/retry/): the same Import goes
back to queued, then done when a real worker runs it; another org's import is a 404, and the POST needs its CSRF."""

import pytest
from django.test import Client

from imports.models import Import, ImportStatus
from jobs.models import Job, JobStatus
from tests.factories import ImportFactory, OrgFactory, SiteFactory, SiteTargetFactory
from tests.support.processes import run_burst

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]


def test_a_failed_import_is_retried_in_place_and_a_worker_finishes_it(client, member, target):
    imp = ImportFactory(site_target=target, failed=True, error="ImportRejected: the disk was full")
    page = client.get(f"/imports/{imp.pk}/").content.decode()
    assert f'action="/imports/{imp.pk}/retry/"' in page

    response = client.post(f"/imports/{imp.pk}/retry/")

    assert response.status_code == 302 and response["Location"] == f"/imports/{imp.pk}/"
    imp.refresh_from_db()
    assert (imp.status, imp.error) == (ImportStatus.QUEUED, "")
    assert Job.objects.get(pk=imp.job_id).status == JobStatus.QUEUED
    assert "is queued again" in client.get(f"/imports/{imp.pk}/").content.decode()

    run_burst()

    imp.refresh_from_db()
    assert imp.status == ImportStatus.DONE, imp.error
    assert Import.objects.count() == 1 and Job.objects.filter(type="import_csv").count() == 1


def test_only_a_failed_import_is_retried(client, member, target):
    imp = ImportFactory(site_target=target, done=True)
    response = client.post(f"/imports/{imp.pk}/retry/", follow=True)
    assert "Only a failed import can be retried: this one is done." in response.content.decode()
    imp.refresh_from_db()
    assert imp.status == ImportStatus.DONE and Job.objects.get(pk=imp.job_id).status == JobStatus.DONE
    assert 'retry/"' not in client.get(f"/imports/{imp.pk}/").content.decode()


def test_another_orgs_import_is_404_and_stays_failed(client, member):
    rival = SiteTargetFactory(site=SiteFactory(org=OrgFactory(id="globex")), url_prefix="https://globex.example/")
    theirs = ImportFactory(site_target=rival, failed=True)
    assert client.post(f"/imports/{theirs.pk}/retry/").status_code == 404
    assert client.post("/imports/999999/retry/").status_code == 404
    theirs.refresh_from_db()
    assert theirs.status == ImportStatus.FAILED


def test_the_retry_is_a_post_with_its_csrf_token(member, target):
    imp = ImportFactory(site_target=target, failed=True)
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(member)
    assert browser.get(f"/imports/{imp.pk}/retry/").status_code == 405
    assert browser.post(f"/imports/{imp.pk}/retry/").status_code == 403
    imp.refresh_from_db()
    assert imp.status == ImportStatus.FAILED

    token = browser.get(f"/imports/{imp.pk}/").cookies["csrftoken"].value
    assert browser.post(f"/imports/{imp.pk}/retry/", {"csrfmiddlewaretoken": token}).status_code == 302
    imp.refresh_from_db()
    assert imp.status == ImportStatus.QUEUED


def test_a_retry_that_lost_the_race_says_why_and_changes_nothing(client, member, target):
    imp = ImportFactory(site_target=target, failed=True)
    # The import is failed but its job already went back (another operator's requeue from the admin).
    Job.objects.filter(pk=imp.job_id).update(status=JobStatus.QUEUED, finished_at=None)
    response = client.post(f"/imports/{imp.pk}/retry/", follow=True)
    assert "Not retried: only failed jobs and zombies can be requeued" in response.content.decode()
