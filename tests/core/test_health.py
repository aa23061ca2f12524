"""/health/live answers without the database; /health/ready names what keeps a replica from work."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models import F

from jobs import processes
from jobs.models import Process, ProcessKind
from seoinsight import health


def seen(kind: str, ago: float = 0.0) -> Process:
    entry = Process.objects.create(kind=kind, host="test-host", pid=4242)
    Process.objects.filter(pk=entry.pk).update(heartbeat_at=F("heartbeat_at") - timedelta(seconds=ago))
    return entry


@pytest.fixture
def no_processes(db):
    Process.objects.all().delete()  # rows committed by another test's process entry, if any


def test_live_answers_without_touching_the_database(client):
    response = client.get("/health/live")
    assert response.status_code == 200
    assert response.json() == {"status": "live"}


def test_ready_with_a_worker_and_a_poller_seen(client, no_processes):
    seen(ProcessKind.RUNJOBS)
    seen(ProcessKind.POLLMAIL, ago=processes.ALIVE_WITHIN / 2)

    response = client.get("/health/ready")

    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "ready"
    assert set(body["checks"]) == {"database", "migrations", "processes", "outbox"}
    assert all(check["ok"] for check in body["checks"].values())


@pytest.mark.parametrize(("present", "missing"), [
    ([], ["runjobs", "pollmail"]),
    ([ProcessKind.POLLMAIL], ["runjobs"]),
    ([ProcessKind.RUNJOBS], ["pollmail"]),
])
def test_a_kind_never_seen_makes_the_replica_not_ready(client, no_processes, present, missing):
    for kind in present:
        seen(kind)

    response = client.get("/health/ready")

    assert response.status_code == 503
    check = response.json()["checks"]["processes"]
    assert check["ok"] is False
    assert [problem.split()[1] for problem in check["problems"]] == missing


def test_a_process_silent_past_alive_within_does_not_count(client, no_processes):
    seen(ProcessKind.RUNJOBS, ago=processes.ALIVE_WITHIN + 5)
    seen(ProcessKind.POLLMAIL)

    response = client.get("/health/ready")

    assert response.status_code == 503
    assert response.json()["checks"]["processes"]["problems"] == [
        f"no runjobs process seen in the last {processes.ALIVE_WITHIN:g} s"]


def test_ready_answers_only_safe_methods_and_is_never_cached(client, no_processes):
    assert client.post("/health/ready").status_code == 405
    assert "no-cache" in client.get("/health/ready")["Cache-Control"]


def test_pending_migrations_are_reported_and_the_app_checks_wait(monkeypatch, no_processes):
    monkeypatch.setattr(health, "_migrated", False)
    monkeypatch.setattr(health.MigrationExecutor, "migration_plan", lambda self, targets: [("jobs", "0005_x")])

    ready, body = health.ready_report()

    assert ready is False
    assert body["checks"]["migrations"]["problems"] == ["1 migration(s) not applied (run manage.py migrate)"]
    assert "processes" not in body["checks"]  # its table may not exist yet


def full() -> bool:
    return True


def test_a_predicate_check_with_a_reason_refuses_when_true(monkeypatch, no_processes):
    seen(ProcessKind.RUNJOBS)
    seen(ProcessKind.POLLMAIL)
    monkeypatch.setattr(health, "READY_CHECKS", (
        *health.READY_CHECKS, ("queue", "tests.core.test_health.full", "the queue is full")))

    ready, body = health.ready_report()

    assert ready is False
    assert body["checks"]["queue"] == {"ok": False, "problems": ["the queue is full"]}
    assert body["checks"]["processes"]["ok"] is True


def hold(org, n: int) -> None:
    from outbox.models import Entry

    Entry.objects.bulk_create(Entry(org=org, document_ref=f"test:{i}", source="test", document={})
                              for i in range(n))


@pytest.mark.parametrize(("downstream", "held", "is_ready"), [
    ("http://127.0.0.1:9/", 2, False),  # at capacity: intake has stopped
    ("http://127.0.0.1:9/", 1, True),
    ("", 5, True),  # the outbox is off: never full
])
def test_an_outbox_at_capacity_makes_the_replica_not_ready(client, no_processes, settings, downstream, held,
                                                           is_ready):
    from tests.factories import OrgFactory

    settings.DOWNSTREAM_URL, settings.OUTBOX_CAPACITY = downstream, 2
    seen(ProcessKind.RUNJOBS)
    seen(ProcessKind.POLLMAIL)
    hold(OrgFactory(), held)

    response = client.get("/health/ready")

    assert response.status_code == (200 if is_ready else 503)
    assert response.json()["checks"]["outbox"] == {
        "ok": is_ready, "problems": [] if is_ready else ["the downstream outbox is full: intake waits until it drains"]}


@pytest.mark.parametrize(("due_minutes_ago", "state", "overdue"), [
    (10, "waiting", True),  # due 10 min ago, nobody sent it
    (1, "waiting", False),  # within OUTBOX_OVERDUE_SECONDS
    (-5, "waiting", False),  # due in 5 min
    (10, "sending", True),  # its claim ended 10 min ago and nobody took it over
    (-5, "sending", False),  # claimed, the lease still runs
])
def test_an_overdue_document_is_a_signal_that_does_not_make_the_replica_unready(
        client, no_processes, settings, due_minutes_ago, state, overdue):
    from django.utils import timezone

    from outbox.models import Entry
    from tests.factories import OrgFactory

    settings.DOWNSTREAM_URL, settings.OUTBOX_OVERDUE_SECONDS = "http://127.0.0.1:9/", 180
    seen(ProcessKind.RUNJOBS)
    seen(ProcessKind.POLLMAIL)
    hold(OrgFactory(), 1)
    due = timezone.now() - timedelta(minutes=due_minutes_ago)
    if state == "sending":
        Entry.objects.update(state="sending", claimed_by="w", claim_token="00000000-0000-0000-0000-000000000001",
                             lease_until=due)
    else:
        Entry.objects.update(next_attempt_at=due)

    response = client.get("/health/ready")

    assert response.status_code == 200
    signal = response.json()["signals"]["outbox_overdue"]
    assert signal["ok"] is not overdue
    assert bool(signal["problems"]) is overdue
