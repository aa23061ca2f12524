"""The daily alerts digest through Django's SMTP backend to a real SMTP server on loopback (aiosmtpd).

One digest per member, org and day, of that org's new alerts only, with links to the site page; a refused send is
retried (the error on the job) and one mail arrives; a second job of the day, or a retry after the send, sends
nothing more.
"""

import time
from datetime import date, timedelta

import pytest
from django.utils import timezone

from insight.alerts import digest
from insight.alerts.jobs import DETECT, detect_key
from insight.models import Alert, AlertKind, DigestOptIn, DigestSent, DigestStatus
from jobs.models import Job, JobStatus
from jobs.queue import enqueue
from seoinsight.models import Membership
from tests.factories import OrgFactory, SiteFactory, UserFactory
from tests.insight.smtp_server import SmtpServer
from tests.support.processes import run_burst

pytestmark = pytest.mark.django_db(transaction=True)

DAY = date(2026, 12, 8)


@pytest.fixture
def smtp(settings):
    server = SmtpServer().start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", server.port
    settings.DEFAULT_FROM_EMAIL = "alerts@seoinsight.test"
    settings.INSIGHT_LINK_BASE_URL = "https://seo.agency.test"
    settings.JOBS_RETRY_BASE, settings.JOBS_RETRY_MAX = 0.001, 0.002
    yield server
    server.stop()


def member(org, name, *, opted_in=True, email=True):
    user = UserFactory(username=name, email=f"{name}@agency.test" if email else "", org=org)
    if opted_in:
        DigestOptIn.objects.create(membership=Membership.objects.get(user=user, org=org))
    return user


def alert(site, kind=AlertKind.CLICKS_DROP, **extra):
    fields = {"period_start": date(2026, 11, 30), "period_end": date(2026, 12, 6), "before": 700, "after": 70}
    if kind == AlertKind.PAGE_DROP:
        extra.setdefault("page_url", f"https://{site.domain}/pricing")
    return Alert.objects.create(site=site, kind=kind, **{**fields, **extra})


def run_until_done(limit: int = 100) -> None:
    for _ in range(limit):
        run_burst()
        if not Job.objects.filter(status=JobStatus.QUEUED).exists():
            return
        time.sleep(0.05)  # a retry's run_after
    raise AssertionError("jobs still queued")


def test_each_opted_in_member_gets_one_digest_of_their_org_only(smtp, acme):
    site = SiteFactory(org=acme, domain="acme.example")
    dropped, page = alert(site), alert(site, AlertKind.PAGE_DROP)
    alert(site, period_start=date(2026, 11, 1), period_end=date(2026, 11, 7), acknowledged_at=timezone.now())
    globex = OrgFactory(id="globex")
    theirs = alert(SiteFactory(org=globex, domain="globex.example"))
    ana, _bob = member(acme, "ana"), member(acme, "bob", opted_in=False)
    member(globex, "gil")

    enqueue(DETECT, org_id="acme", payload={"day": DAY.isoformat()}, dedup_key=detect_key("acme", DAY))
    run_until_done()

    (mail,) = smtp.received
    assert mail["To"] == "ana@agency.test" and mail["From"] == "alerts@seoinsight.test"
    assert mail["Subject"] == "Acme Corp: 2 new alerts (2026-12-08)"
    text = mail.get_body(("plain",)).get_content()
    html = mail.get_body(("html",)).get_content()
    assert "acme.example · Clicks dropped · 2026-11-30 → 2026-12-06" in text
    assert "Clicks fell −90.0% (700 → 70 in 7 days)" in text
    assert f"https://seo.agency.test/imports/sites/{site.pk}/?org=acme" in text
    assert (f"https://seo.agency.test/imports/sites/{site.pk}/?url=https%3A%2F%2Facme.example%2Fpricing&amp;org=acme"
            in html)
    assert "globex" not in text.lower() and "globex" not in html.lower()
    sent = DigestSent.objects.get()
    assert (sent.user, sent.org_id, sent.day, sent.status) == (ana, "acme", DAY, DigestStatus.SENT)
    assert set(sent.alerts.all()) == {dropped, page}
    assert theirs not in sent.alerts.all()


def test_a_refused_send_is_retried_with_its_error_and_one_mail_arrives(smtp, acme, settings):
    smtp.mailbox.refuse = 1
    settings.JOBS_RETRY_BASE, settings.JOBS_RETRY_MAX = 0.5, 1.0  # the retry waits: the burst ends before it
    alert(SiteFactory(org=acme, domain="acme.example"))
    ana = member(acme, "ana")
    job = enqueue(digest.JOB_TYPE, org_id="acme", payload={"user": ana.pk, "day": DAY.isoformat()},
                  dedup_key=digest.dedup_key("acme", ana.pk, DAY))

    run_burst()
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED and job.attempts == 1
    assert "Refused for this test" in job.error
    assert smtp.received == []

    run_until_done()
    job.refresh_from_db()
    assert (job.status, job.attempts, job.report["sent"]) == (JobStatus.DONE, 2, True)
    assert len(smtp.received) == 1
    assert DigestSent.objects.get().attempts == 2


def test_a_second_job_of_the_day_sends_nothing_and_the_next_day_only_what_is_new(smtp, acme):
    site = SiteFactory(org=acme, domain="acme.example")
    first = alert(site)
    ana = member(acme, "ana")
    payload = {"user": ana.pk, "day": DAY.isoformat()}

    enqueue(digest.JOB_TYPE, org_id="acme", payload=payload, dedup_key=digest.dedup_key("acme", ana.pk, DAY))
    run_until_done()
    alert(site, AlertKind.PAGE_DROP)  # recorded later that day: tomorrow's news
    again = enqueue(digest.JOB_TYPE, org_id="acme", payload=payload, dedup_key=digest.dedup_key("acme", ana.pk, DAY))
    run_until_done()
    again.refresh_from_db()
    assert again.report == {"sent": False, "reason": "already sent", "digest": DigestSent.objects.get().pk}
    assert len(smtp.received) == 1

    tomorrow = DAY + timedelta(days=1)
    enqueue(digest.JOB_TYPE, org_id="acme", payload={"user": ana.pk, "day": tomorrow.isoformat()},
            dedup_key=digest.dedup_key("acme", ana.pk, tomorrow))
    run_until_done()
    assert len(smtp.received) == 2
    assert "A top page dropped" in smtp.received[1].get_body(("plain",)).get_content()
    assert first not in DigestSent.objects.get(day=tomorrow).alerts.all()


def test_a_digest_taken_but_not_marked_sent_is_sent_again_with_the_same_alerts(smtp, acme):
    """The send-then-crash window: the row still says sending, so the retry sends (the same Message-ID)."""
    site = SiteFactory(org=acme, domain="acme.example")
    taken = alert(site)
    ana = member(acme, "ana")
    crashed = DigestSent.objects.create(user=ana, org=acme, day=DAY, recipient=ana.email, attempts=1)
    crashed.alerts.set([taken])
    alert(site, AlertKind.PAGE_DROP)  # new since: not in this digest

    job = enqueue(digest.JOB_TYPE, org_id="acme", payload={"user": ana.pk, "day": DAY.isoformat()})
    run_until_done()

    job.refresh_from_db()
    assert job.report == {"sent": True, "digest": crashed.pk, "alerts": 1}
    (mail,) = smtp.received
    assert mail["Message-ID"] == f"<alert-digest-{crashed.pk}@seoinsight>"
    assert "A top page dropped" not in mail.get_body(("plain",)).get_content()


def test_nothing_new_no_email_address_or_opted_out_send_nothing(smtp, acme):
    site = SiteFactory(org=acme, domain="acme.example")
    quiet = member(acme, "quiet")
    noaddress = member(acme, "noaddress", email=False)
    gone = member(acme, "gone")
    DigestOptIn.objects.filter(membership__user=gone).delete()
    alert(site, created_at=None)
    Alert.objects.update(created_at=timezone.now() - timedelta(days=8))  # older than the digest looks back

    reports = {}
    for user in (quiet, noaddress, gone):
        job = enqueue(digest.JOB_TYPE, org_id="acme", payload={"user": user.pk, "day": DAY.isoformat()})
        run_until_done()
        job.refresh_from_db()
        reports[user.username] = job.report["reason"]

    assert reports == {"quiet": "no new alerts", "noaddress": "the member has no email address",
                       "gone": "no longer a member, or no longer asks for the digest"}
    assert smtp.received == [] and not DigestSent.objects.exists()


def test_the_alerts_of_a_digest_that_was_never_sent_are_news_the_next_day(smtp, acme):
    site = SiteFactory(org=acme, domain="acme.example")
    lost = alert(site)
    ana = member(acme, "ana")
    given_up = DigestSent.objects.create(user=ana, org=acme, day=DAY, recipient=ana.email, attempts=5)
    given_up.alerts.set([lost])  # its job failed after its last attempt: still sending

    tomorrow = DAY + timedelta(days=1)
    enqueue(digest.JOB_TYPE, org_id="acme", payload={"user": ana.pk, "day": tomorrow.isoformat()})
    run_until_done()

    (mail,) = smtp.received
    assert "Clicks fell −90.0%" in mail.get_body(("plain",)).get_content()
    assert list(DigestSent.objects.get(day=tomorrow).alerts.all()) == [lost]
