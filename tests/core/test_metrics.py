"""/metrics: operator-only Prometheus text, read from the database at scrape time, no org's data in it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from jobs.models import Process, ProcessKind
from seoinsight import metrics
from tests.factories import JobFactory
from tests.mailpoll.factories import MailboxFactory

TOKEN = "metrics-test-token-7f3a"


def scrape(client, token=TOKEN) -> dict:
    """{(family name, sorted labels): value} of one authorized scrape."""
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


@pytest.fixture
def token(settings):
    settings.METRICS_TOKEN = TOKEN


def test_without_a_token_configured_metrics_do_not_exist(client, settings):
    settings.METRICS_TOKEN = ""
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 404


@pytest.mark.parametrize("header", [None, "Bearer wrong-token", f"Basic {TOKEN}", TOKEN, f"Bearer {TOKEN}x"])
def test_a_missing_or_wrong_token_is_refused(client, token, header):
    extra = {"HTTP_AUTHORIZATION": header} if header is not None else {}
    response = client.get("/metrics", **extra)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"seoinsight_" not in response.content


def test_jobs_by_type_and_status_oldest_queued_zombies_and_durations(client, token, db, zombies_possible):
    JobFactory.create_batch(2, type="noop")
    JobFactory(type="noop", created_at=timezone.now() - timedelta(minutes=10))
    JobFactory(type="noop", running=True)
    JobFactory(type="noop", stale=True)
    now = timezone.now()
    for seconds in (1, 2, 3):
        JobFactory(type="noop", done=True, started_at=now - timedelta(seconds=seconds), finished_at=now)
    JobFactory(type="noop", failed=True, started_at=now - timedelta(seconds=4), finished_at=now)

    samples = scrape(client)

    assert samples[("seoinsight_jobs", (("status", "queued"), ("type", "noop")))] == 3
    assert samples[("seoinsight_jobs", (("status", "running"), ("type", "noop")))] == 2
    assert samples[("seoinsight_jobs_oldest_queued_age_seconds", (("type", "noop"),))] > 590
    assert samples[("seoinsight_jobs_zombies", (("type", "noop"),))] == 1
    assert samples[("seoinsight_jobs_finished", (("status", "done"), ("type", "noop")))] == 3
    done = (("status", "done"), ("type", "noop"))
    assert samples[("seoinsight_job_duration_seconds", (("quantile", "0.5"), *done))] == pytest.approx(2)
    assert samples[("seoinsight_job_duration_seconds", (("quantile", "1"), *done))] == pytest.approx(3)
    assert samples[("seoinsight_metrics_source_up", (("source", "jobs.metrics.collect"),))] == 1


def test_mailboxes_by_id_with_no_name_address_or_org_in_the_text(client, token, db):
    failing = MailboxFactory(username="ana@secret-client.example", consecutive_failures=3,
                             last_error="LOGIN failed for ana@secret-client.example")
    healthy = MailboxFactory(last_success_at=timezone.now() - timedelta(seconds=120))
    MailboxFactory(enabled=False)

    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    samples = scrape(client)

    assert samples[("seoinsight_mailbox_consecutive_failures", (("mailbox", str(failing.pk)),))] == 3
    assert samples[("seoinsight_mailbox_last_success_age_seconds", (("mailbox", str(healthy.pk)),))] > 110
    assert samples[("seoinsight_mailboxes", (("health", "failing"),))] == 1
    assert samples[("seoinsight_mailboxes", (("health", "disabled"),))] == 1
    text = response.content.decode()
    for private in ("secret-client", failing.org.name, healthy.name, "LOGIN failed"):
        assert private not in text


def test_processes_seen_by_kind(client, token, db):
    Process.objects.all().delete()
    Process.objects.create(kind=ProcessKind.RUNJOBS, host="h", pid=1)
    Process.objects.create(kind=ProcessKind.RUNJOBS, host="h", pid=2)

    samples = scrape(client)

    assert samples[("seoinsight_processes", (("kind", "runjobs"),))] == 2
    assert samples[("seoinsight_processes", (("kind", "pollmail"),))] == 0


def test_a_failing_source_is_left_out_and_reported_down():
    collector = metrics.DatabaseCollector(sources=("seoinsight.metrics.no_such_source",))
    (up,) = list(collector.collect())
    assert up.name == "seoinsight_metrics_source_up"
    assert [(s.labels["source"], s.value) for s in up.samples] == [("seoinsight.metrics.no_such_source", 0)]


def test_live_mailboxes_wanted_and_watched_with_each_watch_since_its_last_event(client, token, db):
    from mailpoll.models import LiveWatch

    watched = MailboxFactory(live=True)
    MailboxFactory(live=True)
    MailboxFactory(live=True, enabled=False)
    LiveWatch.objects.create(mailbox=watched, host="h", pid=1, since=timezone.now() - timedelta(minutes=30),
                             last_event_at=timezone.now() - timedelta(seconds=300), last_event="EXISTS")

    samples = scrape(client)

    assert samples[("seoinsight_live_mailboxes", (("state", "wanted"),))] == 2
    assert samples[("seoinsight_live_mailboxes", (("state", "watched"),))] == 1
    assert samples[("seoinsight_live_watch_last_event_age_seconds", (("mailbox", str(watched.pk)),))] > 290


def test_the_outbox_depth_capacity_and_oldest_age(client, token, db, settings):
    from outbox.models import Entry
    from tests.factories import OrgFactory

    settings.DOWNSTREAM_URL, settings.OUTBOX_CAPACITY = "http://127.0.0.1:9/", 50
    org = OrgFactory()
    Entry.objects.bulk_create(Entry(org=org, document_ref=f"test:{i}", source="test", document={})
                              for i in range(3))
    Entry.objects.filter(document_ref="test:0").update(created_at=timezone.now() - timedelta(minutes=5))

    samples = scrape(client)

    assert samples[("seoinsight_outbox_depth", ())] == 3
    assert samples[("seoinsight_outbox_capacity", ())] == 50
    assert samples[("seoinsight_outbox_oldest_age_seconds", ())] > 290


def test_overdue_outbox_documents_and_the_oldest_overdue_age(client, token, db, settings):
    from outbox.models import Entry
    from tests.factories import OrgFactory

    settings.DOWNSTREAM_URL, settings.OUTBOX_OVERDUE_SECONDS = "http://127.0.0.1:9/", 180
    org = OrgFactory()
    Entry.objects.bulk_create(Entry(org=org, document_ref=f"test:{i}", source="test", document={})
                              for i in range(4))
    now = timezone.now()
    Entry.objects.filter(document_ref="test:0").update(next_attempt_at=now - timedelta(minutes=10))
    Entry.objects.filter(document_ref="test:1").update(next_attempt_at=now - timedelta(minutes=5))
    Entry.objects.filter(document_ref="test:3").update(next_attempt_at=now + timedelta(minutes=5))

    samples = scrape(client)

    assert samples[("seoinsight_outbox_overdue", ())] == 2
    assert 590 < samples[("seoinsight_outbox_oldest_overdue_seconds", ())] < 700
