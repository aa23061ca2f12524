"""A worker's claim cursor (jobs.claim_cursor): exact claims while they are fast, claims after its mark while a held
snapshot makes them slow, and the queue's bounded claims (jobs.sql._choice_after) take only what the exact claim
could, in claim order."""

from __future__ import annotations

import json
import math
import time
from datetime import datetime, timedelta, UTC
from uuid import UUID

import psycopg
import pytest
from django.db import connection

from jobs import queue, sql
from jobs.claim_cursor import ClaimCursor, claim_key
from jobs.models import Job
from tests.factories import JobFactory
from tests.jobs.test_lean_path import generic_plan
from tests.support.job_rows import add_finished_jobs
from tests.support.processes import database_url

T0 = datetime(2026, 1, 1, tzinfo=UTC)
KEY = (0, T0, UUID(int=5))


# -- the decisions, without a database ---------------------------------------------------------------------------

FAST = 0.0001  # a plain exact claim's time on the server, seconds

# (exact claims' server times in seconds, each at the time given; the time asked; bounded after?)
@pytest.mark.parametrize("rounds, asked_at, bounded", [
    ([], 0.0, False),                                                    # no claim yet: exact
    ([(FAST, 0.5)], 0.6, False),                                         # fast: exact
    ([(FAST, 0.5), (0.002, 1.0)], 1.1, False),                           # one slow claim: a busy machine as likely
    ([(FAST, 0.5), (0.002, 1.0), (0.002, 1.01)], 1.1, True),             # two in a row: bounded
    ([(FAST, 0.5), (0.002, 1.0), (0.002, 1.01)], 2.02, False),           # ... until the next exact claim (1 s)
    ([(FAST, 0.5), (0.002, 1.0), (FAST, 1.01), (0.002, 1.02)], 1.1, False),  # a fast one in between: count again
    ([(FAST, 0.5), (0.002, 1.0), (0.002, 1.01), (FAST, 2.1)], 2.2, False),   # the snapshot is gone: exact again
    ([(FAST, 0.5), (0.002, 1.0), (0.002, 1.01), (0.002, 2.1)], 3.0, True),   # still slow a second later: bounded
    ([(FAST, 0.5), (0.00031, 1.0), (0.00031, 1.01)], 1.1, True),         # three times the fastest is slow
    ([(FAST, 0.5), (0.00029, 1.0), (0.00029, 1.01)], 1.1, False),        # under three times is not
    ([(0.00005, 0.5), (0.0002, 1.0), (0.0002, 1.01)], 1.1, False),       # nor anything under the floor (0.3 ms)
    ([(0.001, 0.5), (0.0012, 1.0), (0.0012, 1.01)], 1.1, False),         # a slower server is not a snapshot
    ([(0.0015, 0.5), (0.0015, 1.0)], 1.1, False),                        # slow from the start: nothing to compare
    ([(0.003, 0.5), (0.003, 1.0)], 1.1, True),                           # ... unless over 2 ms on the server
    # The fastest claim is forgotten after two baseline windows (600 s each): slow becomes the new normal.
    ([(FAST, 0.0), (0.0015, 700.0), (0.0015, 1400.0), (0.0015, 1400.01)], 1400.1, False),
    ([(FAST, 0.0), (0.0015, 700.0), (0.0015, 700.01)], 700.1, True),
])
def test_when_claims_start_after_the_mark(rounds, asked_at, bounded):
    cursor = ClaimCursor()
    cursor.claimed(KEY)
    for seconds, at in rounds:
        cursor.exact_claim_took(seconds, at)
    assert cursor.bound(asked_at) == (KEY if bounded else None)
    assert cursor.exact_claims == len(rounds)


def test_the_changes_are_reported_once_each():
    cursor = ClaimCursor()
    changes = [cursor.exact_claim_took(seconds, at) for seconds, at in
               ((FAST, 0.5), (0.002, 1.0), (0.002, 1.01), (0.002, 2.1), (FAST, 3.2), (FAST, 3.3))]
    assert changes == [None, None, "bounded", None, "exact", None]
    assert cursor.fastest_known == FAST


@pytest.mark.django_db
def test_a_worker_turning_to_the_bounded_claim_says_so_and_why(caplog):
    """The operator's clue: the log names the slow claim and the likely cause."""
    queue.enqueue_many("noop", org_id="demo", items=[({"n": n}, None) for n in range(3)])
    cursor = ClaimCursor(slow_always=0.0)  # every claim slow: the third claim is bounded
    with caplog.at_level("INFO", logger="jobs.queue"):
        for _ in range(2):
            queue.claim(worker_id="t:1", cursor=cursor)
    assert cursor.bound(time.monotonic()) is not None
    (record,) = [r for r in caplog.records if "claims are slow" in r.getMessage()]
    assert "ms on the server" in record.getMessage() and "backend_xmin" in record.getMessage()
    assert record.levelname == "WARNING"  # over 0 s (slow_always here): a held snapshot's size, not a fast drain's


def test_no_bound_without_a_mark_however_slow_the_claims():
    cursor = ClaimCursor()
    for seconds, at in ((FAST, 0.5), (0.05, 1.0), (0.05, 1.01), (0.05, 1.02)):  # slow, but nothing claimed
        cursor.exact_claim_took(seconds, at)
        cursor.claimed(None)  # they found nothing
    assert cursor.bound(1.03) is None


def test_the_mark_is_the_last_job_claimed_and_stays_when_a_claim_takes_none():
    cursor = ClaimCursor(after=KEY, bounded_until=math.inf)
    later = (0, T0 + timedelta(seconds=1), UUID(int=1))
    cursor.claimed(later)
    cursor.claimed(None)
    assert cursor.bound(0.0) == later


# -- the queue's bounded claims -----------------------------------------------------------------------------------

def bounded_after(job: Job) -> ClaimCursor:
    """A cursor whose claims start after ``job`` (as after two slow exact claims) for the rest of the test."""
    return ClaimCursor(after=claim_key(job), bounded_until=math.inf)


def jobs_in_claim_order(**kinds) -> dict[str, Job]:
    """One queued noop job per name, each given its priority and age (seconds before now), by name."""
    now = datetime.now(UTC)
    return {name: JobFactory(type="noop", priority=priority, created_at=now - timedelta(seconds=age))
            for name, (priority, age) in kinds.items()}


@pytest.mark.django_db
def test_a_bounded_claim_takes_the_jobs_after_the_mark_then_lower_priorities_and_only_then_the_rest():
    made = jobs_in_claim_order(behind=(0, 50), mark=(0, 40), after1=(0, 30), after2=(0, 20), low=(-3, 60))
    mark = made.pop("mark")
    Job.objects.filter(pk=mark.pk).update(status="done", finished_at=mark.created_at)  # the mark was claimed
    cursor = bounded_after(mark)
    taken = [queue.claim(worker_id="t:1", cursor=cursor).id for _ in range(3)]
    assert taken == [made[name].id for name in ("after1", "after2", "low")]
    # Only now, with nothing after the mark, the exact claim: the job behind it is not lost.
    assert queue.claim(worker_id="t:1", cursor=cursor).id == made["behind"].id
    assert queue.claim(worker_id="t:1", cursor=cursor) is None
    assert cursor.after == claim_key(Job.objects.get(pk=made["behind"].id))


@pytest.mark.django_db
def test_a_higher_priority_comes_first_and_moves_the_mark_up():
    """From a mark at a higher priority the lower ones are read from their start: claim order again."""
    made = jobs_in_claim_order(behind=(0, 50), mark=(0, 40), after=(0, 30), urgent=(5, 10))
    mark = made.pop("mark")
    Job.objects.filter(pk=mark.pk).delete()
    cursor = bounded_after(mark)
    taken = [queue.claim(worker_id="t:1", cursor=cursor).id for _ in range(3)]
    assert taken == [made[name].id for name in ("urgent", "behind", "after")]


@pytest.mark.django_db
def test_ties_in_age_are_broken_by_id_so_the_mark_is_exact():
    """enqueue_many gives a batch one created_at: the id orders it, in the index and after the mark alike."""
    queue.enqueue_many("noop", org_id="demo", items=[({"n": n}, None) for n in range(5)])
    batch = list(Job.objects.all())
    assert len(batch) == 5 and len({job.created_at for job in batch}) == 1
    in_order = sorted(batch, key=lambda job: job.id)
    first = queue.claim(worker_id="t:1")
    assert first.id == in_order[0].id
    cursor = bounded_after(first)
    assert [job.id for job in queue.claim_many(3, worker_id="t:1", cursor=cursor)] == [j.id for j in in_order[1:4]]
    assert cursor.after == claim_key(Job.objects.get(pk=in_order[3].id))


@pytest.mark.django_db
def test_a_bounded_claim_of_several_crosses_the_branches_in_claim_order():
    made = jobs_in_claim_order(mark=(2, 40), higher=(4, 5), same=(2, 30), lower=(1, 90), behind=(2, 45))
    mark = made.pop("mark")
    Job.objects.filter(pk=mark.pk).delete()
    claimed = queue.claim_many(3, worker_id="t:1", cursor=bounded_after(mark))
    assert [job.id for job in claimed] == [made[name].id for name in ("higher", "same", "lower")]
    assert Job.objects.get(pk=made["behind"].id).status == "queued"


@pytest.mark.django_db
def test_a_bounded_turn_records_its_finishes_and_falls_back_to_the_exact_claim():
    running = JobFactory(type="noop", running=True)
    made = jobs_in_claim_order(behind=(0, 50), mark=(0, 40))
    mark = made.pop("mark")
    Job.objects.filter(pk=mark.pk).delete()
    cursor = bounded_after(mark)
    recorded, claimed = queue.finish_and_claim([(running, None)], 2, worker_id="t:1", cursor=cursor)
    assert recorded == {running.id}
    assert [job.id for job in claimed] == [made["behind"].id]
    assert Job.objects.get(pk=running.pk).status == "done"
    # And when something is after the mark, one statement does both.
    after = jobs_in_claim_order(after=(0, 1))["after"]
    also_running = claimed[0]
    recorded, claimed = queue.finish_and_claim([(also_running, None)], 2, worker_id="t:1", cursor=cursor)
    assert (recorded, [job.id for job in claimed]) == ({also_running.id}, [after.id])


@pytest.mark.django_db
def test_a_bounded_claim_keeps_to_the_workers_queues_and_types_and_due_jobs():
    now = datetime.now(UTC)
    mark = JobFactory(type="noop", created_at=now - timedelta(seconds=60))
    Job.objects.filter(pk=mark.pk).delete()
    JobFactory(type="noop", queue_name="other", created_at=now - timedelta(seconds=30))
    JobFactory(type="noop", run_after=now + timedelta(hours=1), created_at=now - timedelta(seconds=20))
    JobFactory(type="no_such_type", created_at=now - timedelta(seconds=10))
    wanted = JobFactory(type="noop", queue_name="mine", created_at=now - timedelta(seconds=5))
    cursor = bounded_after(mark)
    assert queue.claim(["mine"], "t:1", cursor).id == wanted.id
    assert queue.claim(["mine"], "t:1", cursor) is None


@pytest.mark.django_db
def test_the_bounded_claims_generic_plans_descend_the_claim_index_to_the_mark():
    """Prepared statements run on a plan made for no particular values: the branch after the mark must still be
    an index condition on jobs_queued_claim_order (one descent), not a filter over the entries before it."""
    add_finished_jobs()
    JobFactory.create_batch(3, type="noop")
    params = {**queue.claim_plan().params, "queues": None, "worker_id": "t:1", "limit": 8,
              "finish_ids": [], "finish_attempts": [], "finish_reports": [],
              "after_priority": 0, "after_created": T0, "after_id": UUID(int=1)}
    for statement in (sql.CLAIM_UNGUARDED_AFTER, sql.CLAIM_MANY_UNGUARDED_AFTER, sql.FINISH_AND_CLAIM_AFTER):
        explained = generic_plan(statement, params)
        assert "Index Cond: ((priority = $" in explained and "ROW(created_at, id) > ROW(" in explained, explained
        assert "Seq Scan on jobs" not in explained, explained


# -- under a snapshot held open -----------------------------------------------------------------------------------

def buffers(statement: str, params: dict) -> int:
    """Shared buffers (hit + read) the statement touches, run under EXPLAIN ANALYZE and rolled back."""
    with connection.cursor() as cursor:
        cursor.execute("BEGIN")
        try:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, params)
            plan = cursor.fetchone()[0]
        finally:
            cursor.execute("ROLLBACK")
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return plan[0]["Plan"]["Shared Hit Blocks"] + plan[0]["Plan"]["Shared Read Blocks"]


@pytest.mark.django_db(transaction=True)
def test_under_a_held_snapshot_a_worker_turns_to_the_bounded_claim_which_does_not_walk_what_was_claimed_since():
    """A snapshot held open keeps the entries of every row claimed since: the exact claim walks them all, the
    bounded one starts past them. Buffers, not times, for the statements: they do not depend on the load."""
    cursor = ClaimCursor()
    queue.enqueue_many("noop", org_id="demo", items=[({"n": n}, None) for n in range(5)])
    for _ in range(5):  # before the snapshot: fast, the worker's measure of a plain claim
        queue.claim(worker_id="t:1", cursor=cursor)
    held = psycopg.connect(database_url(), autocommit=False)
    try:
        held.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        held.execute("SELECT count(*) FROM jobs").fetchone()  # the snapshot, taken before any of the churn
        queue.enqueue_many("noop", org_id="demo", items=[({"n": n}, None) for n in range(20_000)])
        while claimed := queue.claim_many(100, worker_id="t:2"):  # other workers, say
            queue.finish_and_claim([(job, None) for job in claimed], 0)
        queue.enqueue_many("noop", org_id="demo", items=[({"n": n}, None) for n in range(10)])
        with connection.cursor() as analyze:
            analyze.execute("ANALYZE jobs")  # as autovacuum would: the planner's choice of index, not a guess

        # Two exact claims walk 20,000 entries each, far past three times the plain ones: the third is bounded.
        taken = [queue.claim(worker_id="t:1", cursor=cursor) for _ in range(3)]
        assert cursor.exact_claims == 7, cursor
        assert cursor.bound(time.monotonic()) == claim_key(taken[-1])
        assert [job.id for job in taken] == sorted(job.id for job in taken)  # claim order all the same

        params = {**queue.claim_plan().params, "queues": None, "worker_id": "t:1"}
        after = cursor.after
        exact = buffers(sql.CLAIM_UNGUARDED, params)
        bounded = buffers(sql.CLAIM_UNGUARDED_AFTER, {**params, "after_priority": after[0],
                                                      "after_created": after[1], "after_id": after[2]})
    finally:
        held.close()
    # The exact one fetches a heap page for each run of entries on one page (ids grow in insertion order, so
    # a batch's entries follow the heap): ~330 pages for 20,000 rows, against the bounded one's few.
    assert exact > 8 * bounded, (exact, bounded)
    assert bounded < 50, bounded  # what a claim costs on a table this size (17-21 buffers on an empty one)
