"""Scheduling, priorities and queues in the claim (issue 21 §2), against the real database."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from django.db import connection

from jobs import queue, sql
from jobs.models import Job

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("test_types")]


def db_now() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


def test_a_job_is_not_claimed_before_its_run_after_and_is_claimed_once_it_is_due():
    later = queue.enqueue("noop", org_id="demo", run_after=db_now() + timedelta(hours=1))
    assert queue.claim() is None
    # Due on the database's clock: move run_after into its past, as time passing would.
    Job.objects.filter(pk=later.pk).update(run_after=db_now() - timedelta(seconds=1))
    assert queue.claim().id == later.id


def test_a_due_job_is_claimed_before_a_future_one_that_is_older():
    future = queue.enqueue("noop", org_id="demo", run_after=db_now() + timedelta(hours=1))
    due = queue.enqueue("noop", org_id="demo", run_after=db_now() - timedelta(minutes=1))
    now = queue.enqueue("noop", org_id="demo")
    assert [queue.claim().id, queue.claim().id] == [due.id, now.id]
    assert queue.claim() is None
    future.refresh_from_db()
    assert future.status == "queued"


def test_higher_priority_is_claimed_first_and_equals_in_created_order():
    low = queue.enqueue("noop", org_id="demo", priority=-5)
    first_high = queue.enqueue("noop", org_id="demo", priority=10)
    normal = queue.enqueue("noop", org_id="demo")
    second_high = queue.enqueue("noop", org_id="demo", priority=10)
    claimed = [queue.claim().id for _ in range(4)]
    assert claimed == [first_high.id, second_high.id, normal.id, low.id]


def test_a_worker_given_queues_claims_only_jobs_in_them():
    mail = queue.enqueue("noop", org_id="demo", queue_name="mail")
    imports = queue.enqueue("noop", org_id="demo", queue_name="imports")
    default = queue.enqueue("noop", org_id="demo")
    assert queue.claim(["imports"]).id == imports.id
    assert queue.claim(["imports"]) is None
    assert queue.claim(["mail", "default"]).id == mail.id
    assert queue.claim().id == default.id  # None: every queue


def test_the_defaults_are_the_types_and_the_claim_records_the_worker():
    job = queue.enqueue("noop", org_id="demo")
    stored = Job.objects.values_list("priority", "queue_name", "run_after").get(pk=job.pk)
    assert stored == (0, "default", None)
    queue.claim(worker_id="host-a:12")
    job.refresh_from_db()
    assert job.worker_ids == ["host-a:12"]


def test_enqueue_many_places_every_item():
    when = db_now() + timedelta(hours=1)
    assert queue.enqueue_many("noop", org_id="demo", items=[({}, None), ({}, None)],
                              run_after=when, priority=7, queue_name="bulk") == 2
    assert set(Job.objects.values_list("run_after", "priority", "queue_name")) == {(when, 7, "bulk")}


@pytest.mark.parametrize("kwargs", [
    {"run_after": datetime(2030, 1, 1)},  # naive: which zone?
    {"run_after": "2030-01-01T00:00:00Z"},
    {"priority": 101},
    {"priority": True},
    {"queue_name": ""},
    {"queue_name": "a,b"},
])
def test_a_bad_placement_is_refused_before_anything_is_queued(kwargs):
    with pytest.raises(ValueError):
        queue.enqueue("noop", org_id="demo", **kwargs)
    with pytest.raises(ValueError):
        queue.enqueue_many("noop", org_id="demo", items=[({}, None)], **kwargs)
    assert not Job.objects.exists()


def _plan_nodes(plan: dict):
    yield plan
    for child in plan.get("Plans", ()):
        yield from _plan_nodes(child)


def test_the_claim_reads_its_index_without_scanning_or_sorting_the_table():
    with connection.cursor() as cursor:
        cursor.execute("""
            INSERT INTO jobs (org_id, type, status, payload, run_after, priority, created_at, finished_at)
            SELECT 'demo', 'noop', s.status, '{}'::jsonb,
                   CASE WHEN s.status = 'queued' AND n % 2 = 0 THEN now() + interval '1 hour' END,
                   (n % 5) - 2, now() - make_interval(secs => n),
                   CASE WHEN s.status = 'done' THEN now() END
            FROM generate_series(1, 3000) AS n
            CROSS JOIN LATERAL (SELECT CASE WHEN n % 3 = 0 THEN 'done' ELSE 'queued' END AS status) AS s
        """)
        cursor.execute("ANALYZE jobs")
        params = {**queue.claim_plan().params, "queues": None, "worker_id": "h:1"}
        assert queue.claim_plan().guarded is None
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql.CLAIM_UNGUARDED, params)
        raw = cursor.fetchone()[0]
    plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
    nodes = list(_plan_nodes(plan))
    kinds = {node["Node Type"] for node in nodes}
    assert "Seq Scan" not in kinds and "Sort" not in kinds, kinds
    assert "jobs_queued_claim_order" in {node.get("Index Name") for node in nodes}, nodes
    assert not Job.objects.filter(status="running").exists()
