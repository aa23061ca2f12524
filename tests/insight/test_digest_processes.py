"""The daily run end to end on two real ``runjobs`` workers: the periodic type queues each org's detection once,
the detection records the alerts and queues the member's digest, the SMTP server refuses it once, and one mail
arrives. A rerun of the day's detection afterwards records and sends nothing more."""

from datetime import timedelta

import pytest
from django.utils import timezone

from insight.alerts.jobs import DAILY, DETECT, detect_key
from insight.models import Alert, AlertKind, DigestOptIn, DigestSent, DigestStatus
from jobs.models import Job, JobStatus
from jobs.queue import enqueue
from seoinsight.models import Membership
from tests.factories import UserFactory
from tests.insight.smtp_server import SmtpServer
from tests.insight.test_detectdrops import daily
from tests.support.processes import runjobs, wait_for

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def smtp():
    server = SmtpServer(refuse=1).start()
    yield server
    server.stop()


def settled() -> bool:
    return not Job.objects.filter(status__in=[JobStatus.QUEUED, JobStatus.RUNNING]).exists()


def test_two_workers_one_detection_per_org_and_day_one_digest_after_a_refusal(smtp, acme, target, processes):
    today = timezone.now().date()
    daily(target, "https://acme.example/a", 100, 10, newest=today - timedelta(days=2))
    ana = UserFactory(username="ana", email="ana@agency.test", org=acme)
    DigestOptIn.objects.create(membership=Membership.objects.get(user=ana, org=acme))
    env = {"INSIGHT_DETECT_DROPS_CRON": "0 0 * * *", "EMAIL_URL": smtp.url, "JOBS_RETRY_BASE": "0.2",
           "JOBS_SCHEDULE_CHECK_INTERVAL": "0.5"}
    for _ in range(2):
        processes(runjobs, **env)

    wait_for(lambda: smtp.received and settled(), timeout=90, message="the digest mailed and every job finished")

    assert Job.objects.filter(type=DAILY).count() == 1
    (detection,) = Job.objects.filter(type=DETECT, org_id="acme")
    assert detection.status == JobStatus.DONE and detection.report["digests_queued"] == 1
    assert {a.kind for a in Alert.objects.all()} == {AlertKind.CLICKS_DROP, AlertKind.PAGE_DROP}
    (send,) = Job.objects.filter(type="send_alert_digest")
    assert (send.status, send.attempts, send.report["sent"]) == (JobStatus.DONE, 2, True)
    assert smtp.mailbox.refused == 1 and len(smtp.received) == 1
    assert DigestSent.objects.get().status == DigestStatus.SENT

    # The day's detection run again (a requeue, a second period): nothing new recorded, no second mail.
    rerun = enqueue(DETECT, org_id="acme", payload={"day": today.isoformat()}, dedup_key=detect_key("acme", today))
    wait_for(lambda: settled() and Job.objects.filter(type="send_alert_digest").count() == 2, timeout=60,
             message="the rerun and its digest job finished")
    rerun.refresh_from_db()
    assert rerun.report["recorded"] == []
    assert Job.objects.filter(type="send_alert_digest").latest("created_at").report["reason"] == "already sent"
    assert len(smtp.received) == 1
