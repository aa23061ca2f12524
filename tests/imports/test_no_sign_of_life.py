"""A job whose worker gave no sign of life says so in every list (jobs admin, /imports/, an import's page, its live
progress), not "Running 13 %"; a queued import with no worker running says that, with its age (jobs.liveness)."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from imports.models import ImportStatus
from jobs import liveness
from jobs.durations import readable_duration
from jobs.models import Job, JobStatus, Process
from tests.factories import ImportFactory, UserFactory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]

JOBS_URL = reverse("admin:jobs_job_changelist")
T0 = datetime(2026, 12, 7, 12, 0, 0, tzinfo=UTC)


def clock(now=T0, worker_running=False):
    return liveness.Clock(now=now, server_start=now - timedelta(days=1), worker_running=worker_running)


def test_a_running_job_is_silent_exactly_past_its_types_threshold():
    stale_after = liveness.stale_after("noop")
    job = Job(type="noop", status=JobStatus.RUNNING, started_at=T0 - timedelta(hours=1),
              progress={"done": 13, "total": 100, "updated_at": (T0 - timedelta(seconds=stale_after + 1)).isoformat()})
    assert liveness.stalled(job, clock()).startswith("No sign of life for ")
    job.progress["updated_at"] = (T0 - timedelta(seconds=stale_after - 1)).isoformat()
    assert liveness.stalled(job, clock()) is None


def test_silence_is_said_as_the_sweep_counts_it():
    job = Job(type="noop", status=JobStatus.RUNNING, started_at=T0 - timedelta(seconds=74))
    assert liveness.stale_after("noop") < 74
    assert liveness.stalled(job, clock()) == "No sign of life for 1 min 14 s"
    # Never counted from before the database's start: a restarted server gives its workers a full threshold.
    restarted = liveness.Clock(now=T0, server_start=T0 - timedelta(seconds=5), worker_running=False)
    assert liveness.stalled(job, restarted) is None


def test_a_queued_job_says_no_worker_runs_after_30_s_and_not_before():
    job = Job(type="noop", status=JobStatus.QUEUED, created_at=T0 - timedelta(minutes=2))
    assert liveness.stalled(job, clock()) == "Queued 2 min 0 s ago — no worker is running"
    assert liveness.stalled(job, clock(worker_running=True)) is None
    job.created_at = T0 - timedelta(seconds=20)
    assert liveness.stalled(job, clock()) is None
    # A retry backing off (or a scheduled job) is not late before its time.
    job.created_at, job.run_after = T0 - timedelta(minutes=5), T0 - timedelta(seconds=10)
    assert liveness.stalled(job, clock()) is None


def database(query, *params):
    with connection.cursor() as cursor:
        cursor.execute(query, params)
        return cursor.fetchone()[0]


@pytest.fixture
def silent_import(target, zombies_possible):
    """An import whose worker died at 13 %: started an hour ago, its last heartbeat too."""
    hour_ago = timezone.now() - timedelta(hours=1)
    imp = ImportFactory(site_target=target, running=True,
                        progress={"done": 13, "total": 100, "updated_at": hour_ago.isoformat()})
    Job.objects.filter(pk=imp.job_id).update(started_at=hour_ago)
    silence = database("SELECT now() - GREATEST(%s, pg_postmaster_start_time())", hour_ago)
    return imp, f"No sign of life for {readable_duration(silence)}"


def test_the_jobs_list_says_no_sign_of_life_not_running_13_percent(client, acme, silent_import):
    imp, said = silent_import
    root = UserFactory(username="root", is_staff=True, is_superuser=True, org=acme)
    client.force_login(root)
    html = client.get(JOBS_URL).content.decode()
    row = html.split('id="result_list"')[1].split("<tbody>")[1].split("</tbody>")[0]
    assert said in row
    assert "13%" not in row and ">Running<" not in row


def test_the_imports_list_the_page_and_the_live_progress_say_it(client, member, silent_import):
    imp, said = silent_import
    listing = client.get("/imports/").content.decode()
    page = client.get(f"/imports/{imp.pk}/").content.decode()
    live = client.get(f"/jobs/{imp.job_id}").json()
    for html in (listing, page):
        assert said in html and "13%" not in html and ">Running<" not in html
    assert live["stalled"] == said and live["status"] == "running"


def test_a_queued_import_with_no_worker_says_so_with_its_age(client, member, target):
    imp = ImportFactory(site_target=target)
    Job.objects.filter(pk=imp.job_id).update(created_at=timezone.now() - timedelta(minutes=2))
    age = database("SELECT now() - created_at FROM jobs WHERE id = %s", imp.job_id)
    said = f"Queued {readable_duration(age)} ago — no worker is running"

    assert said in client.get(f"/imports/{imp.pk}/").content.decode()
    assert client.get(f"/jobs/{imp.job_id}").json()["stalled"] == said

    Process.objects.create(kind="runjobs", host="h", pid=1)  # a worker seen just now
    assert "no worker is running" not in client.get(f"/imports/{imp.pk}/").content.decode()
    assert client.get(f"/jobs/{imp.job_id}").json()["stalled"] is None


def test_a_live_well_job_keeps_its_status_and_percentage(client, member, target):
    imp = ImportFactory(site_target=target, running=True, progress={"done": 13, "total": 100})
    Process.objects.create(kind="runjobs", host="h", pid=1)
    page = client.get(f"/imports/{imp.pk}/").content.decode()
    assert "13%" in page and "No sign of life" not in page
    assert client.get(f"/jobs/{imp.job_id}").json()["stalled"] is None
    assert Job.objects.get(pk=imp.job_id).status == JobStatus.RUNNING and imp.status == ImportStatus.RUNNING
