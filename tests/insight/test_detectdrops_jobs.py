"""The alerts' jobs: the daily type (off unless INSIGHT_DETECT_DROPS_CRON), one detect_drops per org and day, its
report and the digests it queues; a wrong cron expression stops the daily run only, said by insight.E001."""

from datetime import date

import pytest

from insight import checks
from insight.alerts import jobs
from insight.models import DigestOptIn
from jobs.models import Job, JobStatus
from jobs.queue import enqueue
from jobs.system import SYSTEM_ORG
from seoinsight.models import Membership
from tests.factories import OrgFactory, UserFactory
from tests.insight.test_detectdrops import daily
from tests.support.processes import run_burst

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]


@pytest.mark.parametrize(("cron", "expected"), [("", None), ("   ", None), ("0 6 * * *", "0 6 * * *"),
                                                ("every day", None), ("61 * * * *", None)])
def test_the_daily_type_is_registered_only_with_a_valid_cron(settings, cron, expected):
    settings.INSIGHT_DETECT_DROPS_CRON = cron
    found = jobs.periodic_type()
    assert (found and found.cron) == expected
    wrong = [e.id for e in checks.check_settings()]
    assert wrong == (["insight.E001"] if cron.strip() and expected is None else [])


def test_a_link_base_that_is_not_an_address_is_an_error(settings):
    settings.INSIGHT_LINK_BASE_URL = "seo.agency.test"
    assert [e.id for e in checks.check_settings()] == ["insight.E002"]


def test_the_daily_job_queues_one_detection_per_org_for_its_day(acme):
    OrgFactory(id="globex")
    daily_job = Job(id=None, org_id=SYSTEM_ORG, type=jobs.DAILY, payload={"period": "2026-12-08T06:00:00+00:00"})

    report = jobs.queue_detections(daily_job)
    again = jobs.queue_detections(daily_job)  # a second worker, or a requeue, while those are queued

    detections = Job.objects.filter(type=jobs.DETECT).order_by("org_id")
    orgs = list(detections.values_list("org_id", flat=True))
    assert "acme" in orgs and "globex" in orgs and len(orgs) == len(set(orgs)) == report["orgs"]
    assert report["queued"] == len(orgs) and again["queued"] == 0
    acme_job = detections.get(org_id="acme")
    assert (acme_job.payload, acme_job.dedup_key) == ({"day": "2026-12-08"}, "detect_drops:acme:2026-12-08")


def test_detect_drops_records_the_orgs_alerts_and_queues_the_opted_in_members_digests(acme, target):
    daily(target, "https://acme.example/a", 100, 10)
    ana = UserFactory(username="ana", email="ana@agency.test", org=acme)
    UserFactory(username="bob", email="bob@agency.test", org=acme)  # did not ask
    DigestOptIn.objects.create(membership=Membership.objects.get(user=ana))
    job = enqueue(jobs.DETECT, org_id="acme", payload={"day": "2026-12-08"},
                  dedup_key=jobs.detect_key("acme", date(2026, 12, 8)))

    run_burst(max_jobs=1)  # the detection only: its digest job stays queued

    job.refresh_from_db()
    assert job.status == JobStatus.DONE
    assert len(job.report["recorded"]) == 2 and job.report["digests_queued"] == 1
    (digest_job,) = Job.objects.filter(type="send_alert_digest")
    assert (digest_job.org_id, digest_job.payload) == ("acme", {"user": ana.pk, "day": "2026-12-08"})
    assert digest_job.dedup_key == f"send_alert_digest:acme:{ana.pk}:2026-12-08"
