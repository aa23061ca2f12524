"""The admin's issue-21 facts: waiting jobs (scheduled, retrying) with when, priority, queue, cancelled and
timed-out jobs, the queue filter, and the schedules list (superusers only)."""

import re
import time
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.db import connection
from django.urls import reverse
from django.utils.html import escape

from jobs import schedules
from jobs.admin.display import Fact, job_facts
from jobs.models import Job, Schedule
from jobs.system import SYSTEM_ORG
from tests.factories import JobFactory, OrgFactory, UserFactory
from tests.jobs.test_prune import finished

pytestmark = pytest.mark.usefixtures("test_types")

JOBS_URL = reverse("admin:jobs_job_changelist")
# The factory's jobs are of the internal noop type, which the list hides unless shown.
ALL_JOBS_URL = f"{JOBS_URL}?internal=shown"
SCHEDULES_URL = reverse("admin:jobs_schedule_changelist")
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
LATER, EARLIER = NOW + timedelta(minutes=5), NOW - timedelta(minutes=5)


def listed(response) -> set:
    return {row.pk for row in response.context["cl"].result_list}


def database_now() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


FACTS = [
    ("a plain queued job", dict(status="queued"), []),
    ("scheduled: first run later", dict(status="queued", run_after=LATER), [Fact.SCHEDULED]),
    ("a schedule now due is a plain queued job", dict(status="queued", run_after=EARLIER), []),
    ("backing off after a failed attempt", dict(status="queued", attempts=1, run_after=LATER), [Fact.RETRY_WAIT]),
    ("requeued by the sweep: no run_after, no wait", dict(status="queued", attempts=1), []),
    ("retrying after a timeout", dict(status="queued", attempts=1, run_after=LATER, error="timed out"),
     [Fact.RETRY_WAIT, Fact.TIMED_OUT]),
    ("running, asked to stop", dict(status="running", attempts=1, cancel_requested_at=EARLIER),
     [Fact.CANCEL_REQUESTED]),
    ("cancelled", dict(status="failed", attempts=1, cancel_requested_at=EARLIER, error="cancelled"),
     [Fact.CANCELLED]),
    ("cancelled while queued", dict(status="failed", error="cancelled"), [Fact.CANCELLED]),
    ("timed out for good", dict(status="failed", attempts=3, error="timed out"), [Fact.TIMED_OUT]),
    ("a failure is not a cancellation", dict(status="failed", attempts=1, error="ValueError: x"), []),
    ("finished: its run_after no longer matters", dict(status="done", attempts=1, run_after=LATER), []),
]


@pytest.mark.parametrize("case, fields, expected", FACTS, ids=[f[0] for f in FACTS])
def test_job_facts(case, fields, expected):
    facts = job_facts(Job(type="noop", org_id="acme", **fields), NOW)

    assert [fact for fact, _ in facts] == expected


def test_a_waiting_jobs_fact_says_until_when():
    [(fact, detail)] = job_facts(Job(status="queued", run_after=LATER), NOW)

    assert (fact, detail) == (Fact.SCHEDULED, "not before 2026-12-03 12:05:00 UTC, in 5 min 0 s")


@pytest.mark.django_db
def test_the_list_shows_when_priority_queue_and_the_facts_and_filters_by_them(admin_client):
    soon = database_now() + timedelta(hours=2)
    scheduled = JobFactory(run_after=soon, priority=50, queue_name="imports")
    retrying = JobFactory(attempts=1, run_after=soon, error="timed out", queue_name="mail")
    cancelled = JobFactory(failed=True, error="cancelled", priority=-5)
    plain = JobFactory()

    response = admin_client.get(ALL_JOBS_URL)
    html = response.content.decode()

    # Under the type (queue, priority) and the status (runs at), so the list fits 1,400 px.
    assert "queue imports" in html and "priority 50" in html and "priority -5" in html and "queue mail" in html
    assert " · runs at <span" in html
    for fact in (Fact.SCHEDULED, Fact.RETRY_WAIT, Fact.TIMED_OUT, Fact.CANCELLED):
        assert f">{fact}</span>" in html
    assert 'title="in 1 h 59 min"' in html or 'title="in 2 h 0 min"' in html  # "runs at", with how long
    assert all(f"?internal=shown&amp;queue={queue}" in html for queue in ("imports", "mail", "default"))
    assert listed(admin_client.get(JOBS_URL, {"internal": "shown", "queue": "imports"})) == {scheduled.pk}
    assert listed(admin_client.get(JOBS_URL, {"internal": "shown", "queue": "default"})) == {cancelled.pk, plain.pk}
    assert listed(admin_client.get(JOBS_URL, {"internal": "shown", "fact": Fact.SCHEDULED})) == {scheduled.pk}
    assert listed(admin_client.get(JOBS_URL, {"internal": "shown", "fact": Fact.RETRY_WAIT})) == {retrying.pk}
    assert listed(admin_client.get(JOBS_URL, {"internal": "shown", "fact": Fact.TIMED_OUT})) == {retrying.pk}
    assert listed(admin_client.get(JOBS_URL, {"internal": "shown", "fact": Fact.CANCELLED})) == {cancelled.pk}


@pytest.mark.django_db
def test_the_queue_filter_offers_a_staff_user_only_the_queues_of_their_orgs(client):
    own = OrgFactory(id="alpha")
    OrgFactory(id="bravo")
    JobFactory(org_id="bravo", queue_name="bravo-secret-queue")
    JobFactory(org_id="alpha", queue_name="alpha-queue")
    staff = UserFactory(is_staff=True, org=own)
    staff.user_permissions.set(Permission.objects.filter(codename="view_job"))
    client.force_login(staff)

    html = client.get(ALL_JOBS_URL).content.decode()

    assert "?internal=shown&amp;queue=alpha-queue" in html and "bravo-secret-queue" not in html


def noop(job):
    return None


@pytest.fixture
def periodic(temporary_type):
    temporary_type("test_every_minute", noop, every=timedelta(minutes=1))
    temporary_type("test_nightly", noop, cron="0 3 * * *")
    temporary_type("test_never_seen", noop, every=timedelta(hours=6))


def clear_of_a_minute_boundary() -> None:
    """Wait out the last seconds of a minute on the database's clock.

    test_every_minute's period is enqueued on that clock and the page reads it (Django's Now() is the
    statement's time) a moment later: both must fall in one minute, or the next period shows as due.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT 60 - extract(second FROM clock_timestamp())::float8")
        left = cursor.fetchone()[0]
    if left < 5:
        time.sleep(left + 0.1)


@pytest.mark.django_db(transaction=True)  # each statement on the clock of its own time, not the test's start
def test_the_schedules_list_shows_each_schedule_with_its_last_job_and_next_run(admin_client, periodic):
    from jobs import registry

    clear_of_a_minute_boundary()
    [job] = schedules.enqueue_due([registry.get("test_every_minute")])
    Schedule.objects.create(name="test_nightly", last_period=database_now() + timedelta(days=3))  # clock was ahead
    Schedule.objects.create(name="test_gone", last_period=database_now() - timedelta(days=1))

    response = admin_client.get(SCHEDULES_URL)
    html = response.content.decode()

    assert listed(response) == {"test_every_minute", "test_nightly", "test_gone"}
    assert "every 0:01:00" in html and escape('cron "0 3 * * *" (UTC)') in html
    assert f'href="{reverse("admin:jobs_job_change", args=[job.pk])}">…{str(job.pk)[-8:]}</a> queued' in html
    assert html.count('<span title="in ') == 2  # the next run of both known schedules, with how long
    assert "not a periodic type here" in html  # test_gone
    assert "Not enqueued yet" in html and "test_never_seen" in html
    assert admin_client.get(reverse("admin:jobs_schedule_change", args=["test_nightly"])).status_code == 200
    assert admin_client.get(reverse("admin:jobs_schedule_add")).status_code == 403


@pytest.mark.django_db
def test_a_schedule_left_behind_reads_due_now(admin_client, periodic):
    Schedule.objects.create(name="test_every_minute", last_period=database_now() - timedelta(hours=1))

    assert "due now: period" in admin_client.get(SCHEDULES_URL).content.decode()


@pytest.mark.django_db
def test_a_bad_zone_reads_unknown_on_the_list_instead_of_an_error(admin_client, periodic, settings):
    Schedule.objects.create(name="test_nightly", last_period=database_now())
    settings.JOBS_SCHEDULE_TIMEZONE = "Nowhere/Atlantis"

    response = admin_client.get(SCHEDULES_URL)

    assert response.status_code == 200
    assert "unknown: JOBS_SCHEDULE_TIMEZONE=" in response.content.decode()


@pytest.mark.django_db
def test_a_single_orgs_staff_sees_no_schedule_and_no_periodic_job(client, admin_client, periodic):
    from jobs import registry

    [job] = schedules.enqueue_due([registry.get("test_every_minute")])
    own = OrgFactory(id="alpha")
    theirs = JobFactory(org_id="alpha")
    staff = UserFactory(is_staff=True, org=own)
    staff.user_permissions.set(Permission.objects.all())
    client.force_login(staff)

    assert job.org_id == SYSTEM_ORG
    assert client.get(SCHEDULES_URL).status_code == 403
    assert client.get(reverse("admin:jobs_schedule_change", args=["test_every_minute"])).status_code == 403
    assert "jobs/schedule/" not in client.get(reverse("admin:index")).content.decode()
    assert listed(client.get(ALL_JOBS_URL)) == {theirs.pk}
    assert client.get(reverse("admin:jobs_job_change", args=[job.pk])).status_code == 404
    assert {job.pk, theirs.pk} <= listed(admin_client.get(ALL_JOBS_URL))


JOB_LINK = re.compile(r'href="(/admin/jobs/job/[0-9a-f-]{36}/change/)"')


@pytest.mark.django_db
def test_once_prunejobs_took_the_last_job_the_schedules_list_links_to_no_deleted_job(admin_client, periodic):
    # The schedule as a period enqueued 15 days ago left it: its job done since, older than JOBS_PRUNE_DONE_AFTER.
    old = finished("done", days=15, type="test_every_minute")
    Schedule.objects.create(name="test_every_minute", last_period=old.created_at, last_job_id=old.pk)
    before = admin_client.get(SCHEDULES_URL).content.decode()
    assert JOB_LINK.findall(before) == [reverse("admin:jobs_job_change", args=[old.pk])]

    call_command("prunejobs", stdout=StringIO())

    assert not Job.objects.filter(pk=old.pk).exists()
    response = admin_client.get(SCHEDULES_URL)
    assert response.status_code == 200
    for link in JOB_LINK.findall(response.content.decode()):  # any job link left must open its job
        assert admin_client.get(link).status_code == 200, link
    assert str(old.pk)[-8:] not in response.content.decode()
    assert Schedule.objects.get(name="test_every_minute").last_job_id is None
