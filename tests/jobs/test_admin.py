import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from jobs import registry
from jobs.admin.display import readable_duration
from jobs.models import Job, JobStatus
from tests.factories import JobFactory, OrgFactory, UserFactory

pytestmark = pytest.mark.usefixtures("zombies_possible", "test_types")  # zombies: tests/conftest.py

JOBS_URL = reverse("admin:jobs_job_changelist")
# The factory's jobs are of the internal noop type, which the list hides unless shown.
ALL_JOBS_URL = f"{JOBS_URL}?internal=shown"
ZOMBIES_URL = reverse("admin:jobs_zombiejob_changelist")


def listed(response) -> set:
    return {job.pk for job in response.context["cl"].result_list}


def run_action(client, url, action, jobs):
    return client.post(url, {"action": action, "_selected_action": [str(j.pk) for j in jobs]}, follow=True)


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


@pytest.mark.parametrize(
    "seconds, expected",
    [
        (0.04, "0.0 s"),
        (1.23, "1.2 s"),
        (59.96, "1 min 0 s"),
        (184, "3 min 4 s"),
        (2 * 3600 + 5 * 60 + 9, "2 h 5 min"),
        (3 * 86400 + 4 * 3600, "3 d 4 h"),
        (-2, "0.0 s"),  # clock skew between the database and this process
    ],
)
def test_readable_duration(seconds, expected):
    assert readable_duration(timedelta(seconds=seconds)) == expected


@pytest.mark.django_db
def test_changelist_filters_by_status_type_and_org_and_shows_progress(admin_client):
    OrgFactory(id="acme"), OrgFactory(id="globex")
    halfway = JobFactory(org_id="acme", type="noop", running=True, progress={"done": 5, "total": 10})
    other = JobFactory(org_id="globex", type="test_record", failed=True)

    response = admin_client.get(ALL_JOBS_URL)
    html = response.content.decode()

    assert response.status_code == 200
    assert listed(response) == {halfway.pk, other.pk}
    assert '<progress value="5" max="10"' in html and "50%" in html
    for choice in ("status__exact=failed", "type=noop", "type=test_record", "org=acme", "org=globex"):
        assert f"?internal=shown&amp;{choice}" in html
    assert listed(admin_client.get(JOBS_URL, {"internal": "shown", "status__exact": "failed"})) == {other.pk}
    assert listed(admin_client.get(JOBS_URL, {"internal": "shown", "type": "noop"})) == {halfway.pk}
    assert listed(admin_client.get(JOBS_URL, {"internal": "shown", "org": "globex"})) == {other.pk}


@pytest.mark.django_db
@pytest.mark.parametrize(("url", "shown"), [(JOBS_URL, {"internal": "shown"}), (ZOMBIES_URL, {})])
def test_every_column_sorts(admin_client, url, shown):
    jobs = {JobFactory(stale=True).pk, JobFactory(stale=True, attempts=2).pk}
    columns = len(admin_client.get(url, shown).context["cl"].list_display)

    for column in range(1, columns):
        for order in (str(column), f"-{column}"):
            assert listed(admin_client.get(url, {**shown, "o": order})) == jobs, f"sorting by column {order}"


@pytest.mark.django_db
def test_changelist_searches_by_the_tail_of_the_id_shown(admin_client):
    wanted, _ = JobFactory(), JobFactory()

    response = admin_client.get(JOBS_URL, {"internal": "shown", "q": str(wanted.pk)[-8:]})

    assert listed(response) == {wanted.pk}


@pytest.mark.django_db
def test_detail_view_is_read_only_with_pretty_json(admin_client):
    payload = {"site_id": 7, "urls": ["https://a.example/", "https://b.example/"]}
    job = JobFactory(running=True, payload=payload, progress={"done": 1, "total": 4})

    response = admin_client.get(reverse("admin:jobs_job_change", args=[job.pk]))
    html = response.content.decode()

    assert response.status_code == 200
    assert f"<pre>{escape(json.dumps(payload, indent=2, sort_keys=True))}</pre>" in html
    assert "s ago" in html  # heartbeat age of the running job
    assert 'name="_save"' not in html


@pytest.mark.django_db
def test_detail_view_of_a_bare_queued_job_shows_dashes_not_none(admin_client):
    job = JobFactory()

    html = admin_client.get(reverse("admin:jobs_job_change", args=[job.pk])).content.decode()

    assert '<div class="readonly">None</div>' not in html
    assert html.count('<div class="readonly">—</div>') >= 6


@pytest.mark.django_db
def test_requeue_restarts_failed_jobs_and_leaves_done_ones(admin_client):
    failed = JobFactory(failed=True, attempts=2)
    done = JobFactory(done=True)

    response = run_action(admin_client, ALL_JOBS_URL, "requeue_jobs", [failed, done])

    failed.refresh_from_db()
    done.refresh_from_db()
    # attempts is kept: the budget already used stays used, and the next claim's token is new.
    assert (failed.status, failed.attempts, failed.error, failed.finished_at) == (JobStatus.QUEUED, 2, None, None)
    assert done.status == JobStatus.DONE
    assert messages_of(response) == [
        "1 job requeued; 1 skipped (only failed jobs and zombies can be requeued: not done, queued or live running jobs)"
    ]


@pytest.mark.django_db
def test_mark_failed_records_the_operator(admin_client):
    queued = JobFactory()
    done = JobFactory(done=True)

    response = run_action(admin_client, ALL_JOBS_URL, "mark_jobs_failed", [queued, done])

    queued.refresh_from_db()
    done.refresh_from_db()
    assert queued.status == JobStatus.FAILED
    assert queued.error == "marked failed by admin"
    assert queued.finished_at is not None
    assert done.status == JobStatus.DONE
    assert messages_of(response)[0].startswith("1 job marked failed; 1 skipped")


@pytest.mark.django_db
def test_actions_need_the_change_permission(client):
    user = UserFactory(is_staff=True, org=OrgFactory(id="demo"))  # sees the job: the admin is scoped by org
    user.user_permissions.add(Permission.objects.get(codename="view_job"))
    client.force_login(user)
    queued = JobFactory()

    response = client.get(ALL_JOBS_URL)
    run_action(client, ALL_JOBS_URL, "mark_jobs_failed", [queued])

    assert response.status_code == 200
    assert "mark_jobs_failed" not in response.content.decode()
    assert Job.objects.get(pk=queued.pk).status == JobStatus.QUEUED


@pytest.mark.django_db
def test_zombie_view_lists_only_stale_running_jobs(admin_client):
    zombie = JobFactory(stale=True, type="test_slow")
    orphan = JobFactory(stale=True, type="no_longer_registered")
    JobFactory(running=True)
    JobFactory(failed=True)

    response = admin_client.get(ZOMBIES_URL)
    html = response.content.decode()

    assert listed(response) == {zombie.pk, orphan.pk}
    assert "A zombie is a running job" in html
    assert "1 / 2" in html  # test_slow allows 2 attempts
    assert "1 / 3" in html  # unknown types get the default
    # An hour of silence (or the server's age, if younger), less the default threshold.
    silent = min(database("SELECT now() - %s", zombie.started_at), database("SELECT now() - pg_postmaster_start_time()"))
    assert readable_duration(silent - timedelta(seconds=registry.default_stale_after())) in html


def database(query: str, *params):
    """One value, read in the test's own transaction: ``now()`` there is the request's ``now()``."""
    with connection.cursor() as cursor:
        cursor.execute(query, params)
        return cursor.fetchone()[0]


@pytest.mark.django_db
def test_stale_for_counts_silence_from_the_servers_start_as_the_sweep_does(admin_client):
    """A heartbeat from before the server's start: the sweep counts silence from that start, so does the screen."""
    zombie = JobFactory(stale=True, type="noop", started_at=timezone.now() - timedelta(days=3650))

    response = admin_client.get(ZOMBIES_URL)
    (shown,) = response.context["cl"].result_list

    up = database("SELECT now() - pg_postmaster_start_time()")
    threshold = timedelta(seconds=registry.get("noop").stale_after)
    assert shown.pk == zombie.pk
    assert (shown.silent_for, shown.past_threshold) == (up, up - threshold)
    assert f"silent for {readable_duration(up)}; threshold {readable_duration(threshold)}" in response.content.decode()
    assert readable_duration(up - threshold) in response.content.decode()
    assert up < timedelta(days=3650)  # not the heartbeat's ten years


@pytest.mark.django_db
def test_requeue_from_zombie_view_spares_live_jobs(admin_client):
    zombie = JobFactory(stale=True)
    alive = JobFactory(running=True)

    response = run_action(admin_client, ZOMBIES_URL, "requeue_jobs", [zombie, alive])

    zombie.refresh_from_db()
    alive.refresh_from_db()
    assert (zombie.status, zombie.attempts, zombie.started_at) == (JobStatus.QUEUED, 1, None)
    assert alive.status == JobStatus.RUNNING
    assert messages_of(response) == ["1 job requeued"]
    assert listed(admin_client.get(ZOMBIES_URL)) == set()


@pytest.mark.django_db
def test_requeue_of_a_zombie_out_of_attempts_fails_it_as_the_sweep_would(admin_client, executions):
    zombie = JobFactory(stale=True, type="test_slow", attempts=2)  # test_slow: max_attempts=2, on_fail records

    response = run_action(admin_client, ZOMBIES_URL, "requeue_jobs", [zombie])

    zombie.refresh_from_db()
    assert (zombie.status, zombie.attempts, zombie.error) == (JobStatus.FAILED, 2, "max attempts exceeded")
    assert [row[1] for row in executions()] == ["on_fail"]
    assert messages_of(response) == ["0 jobs requeued; 1 job failed: zombies out of attempts, as the sweep does"]


@pytest.mark.django_db
def test_staleness_is_judged_by_the_database_clock_not_the_web_servers(admin_client, monkeypatch):
    """The web server's clock runs an hour fast: a live job must not look like a zombie."""
    from django.utils import timezone

    alive = JobFactory(running=True)
    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() + timedelta(hours=1))

    assert listed(admin_client.get(ZOMBIES_URL)) == set()
    run_action(admin_client, ALL_JOBS_URL, "requeue_jobs", [alive])

    alive.refresh_from_db()
    assert (alive.status, alive.attempts) == (JobStatus.RUNNING, 1)
    html = admin_client.get(reverse("admin:jobs_job_change", args=[alive.pk])).content.decode()
    assert "s ago" in html and "1 h 0 min ago" not in html  # the heartbeat's age, on the database clock


@pytest.mark.django_db
def test_requeue_with_a_fresh_budget_runs_a_job_whose_attempts_are_spent(admin_client):
    spent = JobFactory(failed=True, type="test_slow", attempts=2, report={"old": True},
                       traceback="Traceback (most recent call last): ...")

    refused = run_action(admin_client, ALL_JOBS_URL, "requeue_jobs", [spent])
    assert messages_of(refused) == ["0 jobs requeued; 1 skipped (no attempts left: use Requeue with a fresh budget)"]

    response = run_action(admin_client, ALL_JOBS_URL, "requeue_jobs_with_fresh_budget", [spent])

    spent.refresh_from_db()
    assert (spent.status, spent.attempts, spent.counted_attempts) == (JobStatus.QUEUED, 2, 0)
    assert (spent.error, spent.report, spent.traceback) == (None, None, None)
    assert messages_of(response) == ["1 job requeued"]


@pytest.mark.django_db
def test_requeue_says_which_job_holds_the_key_it_would_need(admin_client):
    failed = JobFactory(failed=True, type="test_active", enqueued_key="crawl:3")
    holder = JobFactory(running=True, type="test_active", dedup_key="crawl:3", enqueued_key="crawl:3")

    response = run_action(admin_client, ALL_JOBS_URL, "requeue_jobs", [failed])

    assert Job.objects.get(pk=failed.pk).status == JobStatus.FAILED
    assert messages_of(response) == [
        f"0 jobs requeued; 1 skipped (job {holder.pk} holds its key 'crawl:3' and covers the same work)"
    ]


@pytest.mark.django_db
def test_detail_view_shows_the_traceback_to_staff(admin_client):
    job = JobFactory(failed=True, traceback="Traceback (most recent call last):\n  boom")

    html = admin_client.get(reverse("admin:jobs_job_change", args=[job.pk])).content.decode()

    assert "Traceback (most recent call last):" in html
