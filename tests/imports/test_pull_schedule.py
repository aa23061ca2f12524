"""Scheduled Search Console pulls (imports.schedules): when a target is due, as a table; then the periodic job on
the real database — each due target queued once under its own org, two runs at once on two connections queuing
one pull, a target without a key skipped with its reason — and what the admin shows of a schedule."""

import json
import threading
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.urls import reverse

from imports import schedules
from imports.models import Import, ImportKind
from jobs import registry
from jobs import schedules as periodic
from jobs.models import Job
from jobs.system import SYSTEM_ORG
from seoinsight import models as seoinsight_models
from seoinsight.models import SiteTarget, next_pull, pull_days_problem, pull_due
from tests.core.test_admin import KEY
from tests.factories import OrgFactory, SiteFactory, SiteTargetFactory
from tests.jobs.test_schedules import lock_waits
from tests.support.processes import wait_for


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


PARIS = ZoneInfo("Europe/Paris")

# (case, schedule, last queued, now, due, next pull from)
WHEN = [
    ("off: never due", "off", None, at("2026-12-04 10:00"), False, None),
    ("daily, never queued: due at once", "daily", None, at("2026-12-04 10:00"), True, "now"),
    ("daily, queued today: next at 00:00 UTC", "daily", at("2026-12-04 00:05"), at("2026-12-04 23:59:59"), False,
     at("2026-12-05 00:00")),
    ("daily, queued yesterday: due at midnight", "daily", at("2026-12-03 23:59"), at("2026-12-04 00:00"), True,
     "now"),
    ("daily, days missed: one pull, now", "daily", at("2026-11-01 03:00"), at("2026-12-04 10:00"), True, "now"),
    ("daily: the day is UTC's, whatever the zone of now", "daily", at("2026-12-04 00:10"),
     datetime(2026, 12, 5, 0, 30, tzinfo=PARIS), False, at("2026-12-05 00:00")),
    ("weekly, never queued: due mid-week at once", "weekly", None, at("2026-12-03 12:00"), True, "now"),
    ("weekly, queued Monday: not due on Sunday night", "weekly", at("2026-11-30 00:10"), at("2026-12-06 23:59"),
     False, at("2026-12-07 00:00")),
    ("weekly, queued on a Sunday: due on Monday", "weekly", at("2026-11-29 12:00"), at("2026-11-30 00:00"), True,
     "now"),
    ("a turn taken while the clock was ahead holds until a period after it", "daily", at("2026-12-06 01:00"),
     at("2026-12-04 10:00"), False, at("2026-12-07 00:00")),
]


@pytest.mark.parametrize("case, schedule, last, now, due, upcoming", WHEN, ids=[w[0] for w in WHEN])
def test_when_a_target_is_due(case, schedule, last, now, due, upcoming):
    assert pull_due(schedule, last, now) is due
    assert next_pull(schedule, last, now) == (now if upcoming == "now" else upcoming)


# (schedule, days refreshed, refused)
DAYS = [("daily", 3, True), ("daily", 4, False), ("weekly", 9, True), ("weekly", 10, False), ("off", 1, False)]


@pytest.mark.parametrize("schedule, days, refused", DAYS, ids=[f"{s}-{d}" for s, d, _ in DAYS])
def test_a_pull_refreshes_enough_days_for_each_day_to_be_fetched_once_final(schedule, days, refused):
    assert (pull_days_problem(schedule, days) is not None) is refused


def test_the_window_ends_yesterday_and_holds_the_days_refreshed():
    assert schedules.refresh_window(1, date(2026, 3, 1)) == (date(2026, 2, 28), date(2026, 2, 28))
    assert schedules.refresh_window(4, date(2026, 3, 1)) == (date(2026, 2, 25), date(2026, 2, 28))


def test_the_periodic_type_exists_only_when_the_deployment_turns_it_on(settings):
    assert schedules.periodic_type() is None  # the default: off
    settings.IMPORT_SCHEDULED_PULLS_EVERY = 3600
    job_type = schedules.periodic_type()
    assert (job_type.name, job_type.every, job_type.handler) == (
        "queue_scheduled_pulls", timedelta(hours=1), schedules.queue_scheduled_pulls)


# -- With the database -------------------------------------------------------------------------------------------


def scheduled(org=None, schedule="daily", days=10, keyed=True, **fields) -> SiteTarget:
    target = SiteTargetFactory(site=SiteFactory(org=org or OrgFactory()), search_console_property="sc-domain:x.example",
                               pull_schedule=schedule, pull_days=days, **fields)
    if keyed:
        target.set_service_account(json.dumps(KEY))
        target.save()
    return target


def pulls_of(target) -> list[Job]:
    return list(Job.objects.filter(type="import_api", payload__site_target_id=target.pk))


@pytest.fixture
def periodic_job(settings, db):
    """The periodic job of the current hour, enqueued as every worker's schedule duty would (for the system org)."""
    settings.IMPORT_SCHEDULED_PULLS_EVERY = 3600
    job_type = schedules.periodic_type()
    with registry.registered(job_type):
        (job,) = periodic.enqueue_due([job_type])
        yield job


def test_the_periodic_job_queues_each_due_target_once_under_its_own_org(periodic_job):
    acme, umbrella = OrgFactory(id="acme"), OrgFactory(id="umbrella")
    daily, weekly = scheduled(acme, "daily", days=4), scheduled(umbrella, "weekly")
    off = scheduled(acme, "off")
    done_today = scheduled(acme, "daily", pull_queued_at=schedules.database_now())

    report = schedules.queue_scheduled_pulls(periodic_job)

    assert periodic_job.org_id == SYSTEM_ORG
    assert report["not_queued"] == []
    assert len(report["queued"]) == 2
    today = schedules.database_now().date()
    for target, org, days in ((daily, "acme", 4), (weekly, "umbrella", 10)):
        (job,) = pulls_of(target)
        imp = Import.objects.get(job=job)
        assert {"target": target.pk, "org": org, "import": imp.pk} in report["queued"]
        assert (job.org_id, imp.org_id, imp.site_target_id, imp.kind) == (org, org, target.pk, ImportKind.API)
        assert (imp.period_start, imp.period_end) == (today - timedelta(days=days), today - timedelta(days=1))
        assert job.dedup_key == f"import_api:scheduled:{target.pk}:{today.isoformat()}"
        target.refresh_from_db()
        assert target.pull_queued_at is not None
    assert pulls_of(off) == [] and pulls_of(done_today) == []

    rerun = schedules.queue_scheduled_pulls(periodic_job)
    assert rerun == {"queued": [], "not_queued": []}
    assert Import.objects.count() == 2


def test_a_target_without_credentials_is_skipped_with_its_reason(periodic_job, caplog):
    target = scheduled(keyed=False)

    report = schedules.queue_scheduled_pulls(periodic_job)

    assert report["not_queued"] == [{"target": target.pk, "org": target.site.org_id,
                                     "reason": "no Search Console credentials"}]
    assert f"site target {target.pk} of org {target.site.org_id}: scheduled pull not queued: no Search Console " \
           "credentials" in caplog.text
    target.refresh_from_db()
    assert target.pull_queued_at is None  # its turn is kept for when a key is pasted
    assert not Import.objects.exists()


@pytest.mark.django_db
def test_a_live_pull_of_the_day_is_not_queued_twice_even_when_the_turn_is_given_back():
    target = scheduled()
    now = schedules.database_now()
    assert schedules.queue_pull(target, now).import_id is not None
    SiteTarget.objects.filter(pk=target.pk).update(pull_queued_at=None)  # an operator resetting it in SQL
    target.refresh_from_db()

    again = schedules.queue_pull(target, now)

    (job,) = pulls_of(target)
    assert again.reason == f"job {job.id} is still on it"
    assert Import.objects.count() == 1  # the second Import was rolled back with its enqueue
    target.refresh_from_db()
    assert target.pull_queued_at == now


@pytest.mark.django_db(transaction=True)
def test_two_runs_at_once_queue_one_pull():
    """The race on two connections: the second UPDATE waits for the first transaction, re-reads, takes nothing."""
    target = scheduled()
    now = schedules.database_now()
    second = {}

    def other_worker():
        try:
            second["outcome"] = schedules.queue_pull(SiteTarget.objects.select_related("site").get(pk=target.pk), now)
        finally:
            connection.close()

    with transaction.atomic():
        assert schedules.queue_pull(target, now).import_id is not None
        thread = threading.Thread(target=other_worker)
        thread.start()
        wait_for(lambda: lock_waits() > 0, timeout=10, message="the second run waiting for the first")
    thread.join(timeout=10)

    assert second["outcome"].reason == "already queued this period"
    assert len(pulls_of(target)) == 1 and Import.objects.count() == 1


@pytest.mark.django_db
def test_the_database_refuses_a_schedule_without_a_property():
    target = SiteTargetFactory()
    with pytest.raises(IntegrityError, match="sitetarget_schedule_needs_property"), transaction.atomic():
        SiteTarget.objects.filter(pk=target.pk).update(pull_schedule="daily")


@pytest.mark.django_db
@pytest.mark.parametrize("keyed, days, field, message", [
    (False, 10, "pull_schedule", "A scheduled pull needs the service-account key"),
    (True, 7, "pull_days", "A weekly pull must refresh at least 10 days"),
])
def test_a_schedule_that_could_not_run_as_asked_is_refused_in_words(keyed, days, field, message):
    target = scheduled(schedule="weekly", days=days, keyed=keyed)
    with pytest.raises(ValidationError) as caught:
        target.full_clean()
    assert list(caught.value.message_dict) == [field]
    assert message in " ".join(caught.value.message_dict[field])


# -- The admin ---------------------------------------------------------------------------------------------------


def target_page(client, target) -> str:
    return client.get(reverse("admin:seoinsight_sitetarget_change", args=[target.pk])).content.decode()


@pytest.fixture
def pulls_on(monkeypatch):
    """This deployment queues scheduled pulls (the test process registers no periodic type: it only says so)."""
    monkeypatch.setattr(seoinsight_models, "_scheduled_pulls_on", lambda: True)


@pytest.mark.django_db
def test_a_schedule_in_a_deployment_that_pulls_nothing_says_so(admin_client):
    page = target_page(admin_client, scheduled())
    assert "this deployment queues no scheduled pulls (IMPORT_SCHEDULED_PULLS_EVERY is 0)" in page


@pytest.mark.django_db
def test_the_target_page_sets_the_schedule_and_shows_the_last_and_next_pull(admin_client, pulls_on):
    target = scheduled(schedule="off")
    form = {"site": target.site_id, "url_prefix": target.url_prefix, "search_console_property": "sc-domain:x.example",
            "service_account_key": "", "pull_schedule": "weekly", "pull_days": "14"}

    assert admin_client.post(reverse("admin:seoinsight_sitetarget_change", args=[target.pk]), form).status_code == 302
    target.refresh_from_db()
    assert (target.pull_schedule, target.pull_days) == ("weekly", 14)
    assert "last queued never · next due now" in target_page(admin_client, target)

    now = schedules.database_now()
    schedules.queue_pull(SiteTarget.objects.select_related("site").get(pk=target.pk), now)
    monday = (now - timedelta(days=now.weekday())).date()
    shown = target_page(admin_client, target)
    assert f"last queued {now.strftime('%Y-%m-%d %H:%M')} UTC" in shown
    assert f"next from {(monday + timedelta(days=7)).isoformat()} 00:00 UTC" in shown


@pytest.mark.django_db
def test_the_list_and_the_sites_page_show_each_targets_schedule(admin_client, pulls_on):
    scheduled_one = scheduled()
    SiteTargetFactory(), scheduled(keyed=False)

    listing = admin_client.get(reverse("admin:seoinsight_sitetarget_changelist")).content.decode()
    assert "last queued never · next due now" in listing
    assert "not scheduled" in listing and "not pulled: no service-account key" in listing
    site_page = admin_client.get(reverse("admin:seoinsight_site_change", args=[scheduled_one.site_id]))
    assert "last queued never · next due now" in site_page.content.decode()


@pytest.mark.django_db
def test_a_form_posted_without_the_schedule_fields_keeps_the_targets_schedule(admin_client):
    """A page loaded before the fields existed, or a script: the schedule is kept, not reset nor refused."""
    target = scheduled(schedule="weekly", days=12)
    form = {"site": target.site_id, "url_prefix": target.url_prefix, "search_console_property": "sc-domain:x.example",
            "service_account_key": ""}

    assert admin_client.post(reverse("admin:seoinsight_sitetarget_change", args=[target.pk]), form).status_code == 302
    target.refresh_from_db()
    assert (target.pull_schedule, target.pull_days) == ("weekly", 12)

