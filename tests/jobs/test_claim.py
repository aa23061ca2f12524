"""The claim: registered types only, the one_running_per guard as jsonb, flat cost under blocked work."""

from __future__ import annotations

import json
from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from jobs import queue, registry, sql
from jobs.models import Job, JobStatus
from tests.factories import JobFactory
from tests.support.job_rows import add_finished_jobs
from tests.support.processes import database_url

pytestmark = pytest.mark.django_db
guarded = pytest.mark.usefixtures("guarded_type")  # test_guarded registered: the claim takes the guarded path


def queued(type="test_guarded", age=0.0, **payload) -> Job:
    """A queued job created ``age`` seconds ago (older ones are claimed first)."""
    return JobFactory(type=type, payload=payload, created_at=timezone.now() - timedelta(seconds=age))


# -- item 5: a worker claims only the types it knows ----------------------------------

def test_a_job_of_a_type_this_worker_does_not_know_stays_queued_for_a_worker_that_does():
    newer_type = queued(type="shipped_in_the_next_release", age=10)
    known = queued(type="noop", age=5)
    claimed = queue.claim()
    assert claimed.id == known.id
    assert queue.claim() is None
    newer_type.refresh_from_db()
    assert (newer_type.status, newer_type.attempts, newer_type.error) == (JobStatus.QUEUED, 0, None)


@guarded
def test_the_guarded_claim_also_skips_unknown_types():
    assert any(t.one_running_per for t in registry.all_types().values())  # test_guarded is registered
    queued(type="shipped_in_the_next_release", age=10, site_id="a")
    known = queued(age=5, site_id="a")
    assert queue.claim().id == known.id
    assert queue.claim() is None


# -- item 4: values compare as jsonb ---------------------------------------------------

VALUES = [
    pytest.param(True, True, id="boolean"),
    pytest.param(1e-7, 1e-7, id="float"),
    pytest.param({"host": "a.example", "port": 443}, {"port": 443, "host": "a.example"}, id="nested"),
    pytest.param(1, 1.0, id="1-and-1.0"),
]


@guarded
@pytest.mark.parametrize("running_value, queued_value", VALUES)
def test_a_running_value_blocks_the_same_value_queued(running_value, queued_value):
    JobFactory(type="test_guarded", running=True, payload={"site_id": running_value})
    queued(age=5, site_id=queued_value)
    other = queued(age=1, site_id="elsewhere")
    assert queue.claim().id == other.id
    assert queue.claim() is None


class ConcurrentClaimer:
    """Marks a job running from another connection just before our claim takes the guard's lock.

    That is a claim by another worker committed after our claim statement's
    snapshot: only the re-check under the advisory lock can see it.
    """

    def __init__(self, job_ids):
        self.pending = list(job_ids)
        self.other = psycopg.connect(database_url(), autocommit=True)

    def __call__(self, execute, statement, params, many, context):
        if "pg_advisory_xact_lock" in statement and self.pending:
            self.other.execute("UPDATE jobs SET status = 'running', started_at = now(), attempts = 1 WHERE id = %s",
                               [self.pending.pop(0)])
        return execute(statement, params, many, context)


@guarded
@pytest.mark.parametrize("first_value, second_value", VALUES)
def test_the_guard_recheck_sees_a_concurrent_claim_of_an_equal_value(transactional_db, first_value, second_value):
    mine = queued(age=10, site_id=first_value)
    theirs = queued(age=5, site_id=second_value)
    claimer = ConcurrentClaimer([theirs.id])
    try:
        with connection.execute_wrapper(claimer):
            claimed = queue.claim()
    finally:
        claimer.other.close()
    assert claimed is None, f"claimed {claimed} while the same site_id ran in job {theirs.id}"
    assert Job.objects.get(pk=mine.id).status == JobStatus.QUEUED
    assert list(Job.objects.running().values_list("pk", flat=True)) == [theirs.id]


@guarded
@pytest.mark.parametrize("payload", [{}, {"site_id": None}], ids=["missing", "null"])
def test_without_a_value_the_guard_does_not_apply(payload):
    JobFactory(type="test_guarded", running=True, payload=payload)
    waiting = JobFactory(type="test_guarded", payload=payload)
    assert queue.claim().id == waiting.id


# -- item 11: a blocked backlog costs nothing, and a lost race is not "nothing to do" ---

@guarded
def test_a_claim_that_loses_guard_races_looks_again_instead_of_giving_up(transactional_db):
    """Three races lost in a row (sites a, b, c), with site d claimable: the claim must return d."""
    firsts = {}
    seconds = []
    for n, site in enumerate("abc"):
        firsts[site] = queued(age=100 - n * 10, site_id=site)
        seconds.append(queued(age=95 - n * 10, site_id=site).id)
    free = queued(age=1, site_id="d")
    claimer = ConcurrentClaimer(seconds)
    try:
        with connection.execute_wrapper(claimer):
            claimed = queue.claim()
    finally:
        claimer.other.close()
    assert claimer.pending == [], "the test did not make the claim lose three races"
    assert claimed is not None, "the claim gave up with a claimable job queued"
    assert claimed.id == free.id
    assert all(Job.objects.get(pk=j.id).status == JobStatus.QUEUED for j in firsts.values())


def fill_blocked_backlog(n: int) -> None:
    """A running test_guarded job for site 'busy' and ``n`` queued behind it, all older than anything else."""
    JobFactory(type="test_guarded", running=True, payload={"site_id": "busy"})
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO jobs (org_id, type, payload, created_at)
            SELECT 'demo', 'test_guarded', jsonb_build_object('site_id', 'busy', 'n', g),
                   now() - interval '1 day' + g * interval '1 millisecond'
            FROM generate_series(1, %s) AS g
            """,
            [n],
        )
        cursor.execute("ANALYZE jobs")


def claim_buffers() -> tuple[int, str]:
    """Shared buffers a guarded claim's statements touch (the front of the queue, then type by type),
    run for real under EXPLAIN ANALYZE and rolled back."""
    claim = queue.claim_plan()
    assert claim.guarded is not None  # test_guarded is registered
    total, plans = 0, []
    for statement in (sql.CLAIM_WINDOWED, claim.guarded):
        with connection.cursor() as cursor:
            cursor.execute("SAVEPOINT explain")
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, claim.params)
            (plan,) = cursor.fetchone()
            cursor.execute("ROLLBACK TO SAVEPOINT explain")
        plan = plan if isinstance(plan, list) else json.loads(plan)
        top = plan[0]["Plan"]
        total += top["Shared Hit Blocks"] + top["Shared Read Blocks"]
        plans.append(json.dumps(plan, indent=1)[:3000])
    return total, "\n".join(plans)


@guarded
@pytest.mark.parametrize("backlog", [2_000, 20_000])
def test_a_blocked_backlog_does_not_make_the_claim_read_it(backlog):
    fill_blocked_backlog(backlog)
    other_site = queued(age=0, site_id="idle")
    plain = queued(type="test_record", age=0)
    buffers, plan = claim_buffers()
    # Buffer accesses, counted per row fetched: reading the backlog costs two
    # or more per blocked job; the indexes' way is a window of GUARD_WINDOW rows
    # and a few probes per distinct site, whatever the backlog.
    assert buffers < 500, f"the claim touched {buffers} buffers with {backlog} blocked jobs:\n{plan}"
    claimed = {queue.claim().id, queue.claim().id}
    assert claimed == {other_site.id, plain.id}
    assert queue.claim() is None


@guarded
def test_with_nothing_blocked_the_guarded_claim_takes_jobs_in_order():
    jobs = [queued(age=50 - n, site_id=f"site-{n % 7}") for n in range(30)]
    jobs += [queued(type="test_record", age=35 - n) for n in range(5)]
    order = sorted(jobs, key=lambda j: j.created_at)
    taken = []
    while (job := queue.claim()) is not None:
        taken.append(job.id)
        queue.finish_done(job, None)
    assert taken == [j.id for j in order]


@guarded
def test_a_site_behind_a_full_window_of_blocked_jobs_is_still_found_in_created_order():
    fill_blocked_backlog(sql.GUARD_WINDOW * 3)
    older = queued(age=20, site_id="second")
    newer = queued(age=10, site_id="third")
    no_site = queued(age=15)
    assert [queue.claim().id for _ in range(3)] == [older.id, no_site.id, newer.id]
    assert queue.claim() is None


def test_the_claim_production_uses_reads_the_partial_index_not_the_table():
    """The apps register no guarded type, so their workers claim with CLAIM_UNGUARDED alone:
    on a table of finished jobs it must read the small partial index of queued jobs in claim order."""
    add_finished_jobs()
    queued(type="noop")
    plan = queue.claim_plan()
    assert plan.guarded is None, "an app registered a guarded type: this test no longer checks production's claim"
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql.CLAIM_UNGUARDED, plan.params)
        explained = "\n".join(row[0] for row in cursor.fetchall())
    assert "jobs_queued_claim_order" in explained, explained
    assert "Seq Scan on jobs" not in explained, explained
