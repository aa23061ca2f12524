"""The queue's hot path stays lean: only indexes a query reads, prepared statements, and plans that use the index.

docs/benchmarks.md measures what each of these saves per job; these tests keep them from coming back.
"""

from __future__ import annotations

import re
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs import queue, sql
from jobs.models import Job, JobStatus
from tests.factories import JobFactory
from tests.support.job_rows import add_finished_jobs

pytestmark = pytest.mark.django_db

# Every index of jobs, and what reads it. A new one costs every job an entry at each of its writes
# (a claim or a finish is never a HOT update): add it here with its reader, measured (make bench-profile).
READERS = {
    "jobs_pkey": "every fenced write (WHERE id = …)",
    "jobs_dedup_key_live": "enqueue's ON CONFLICT arbiter, FIND_BY_DEDUP_KEY",
    "jobs_org_type_created": "the admin and the API: an org's jobs of a type, newest first",
    "jobs_running_type_started": "the sweep, the zombie list, a type's running jobs (running rows only)",
    "jobs_queued_claim_order": "the claim, in claim order",
    "jobs_queued_type_created": "the guarded claim, type by type",
    "jobs_queued_guard_site_id": "the guarded claim's skip scan over sites",
    "jobs_queued_run_after": "an idle worker's wait for the next scheduled job",
}


def indexes() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index "
                       "WHERE indrelid = 'jobs'::regclass")
        return dict(cursor.fetchall())


def prepared_claims() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE '%%FOR UPDATE SKIP LOCKED%%'")
        return cursor.fetchone()[0]


def test_every_index_of_jobs_has_a_reader():
    assert set(indexes()) == set(READERS)


def test_the_dedup_key_is_unique_among_live_keys_only():
    definition = indexes()["jobs_dedup_key_live"]
    assert definition.startswith("CREATE UNIQUE INDEX") and "WHERE (dedup_key IS NOT NULL)" in definition
    first = queue.enqueue("noop", org_id="demo", dedup_key="noop:one")
    assert queue.enqueue("noop", org_id="demo", dedup_key="noop:one").id == first.id
    keyless = [queue.enqueue("noop", org_id="demo") for _ in range(2)]
    assert len({job.id for job in keyless}) == 2


@pytest.mark.django_db(transaction=True)  # a fresh connection: none of its statements prepared yet
def test_the_queue_prepares_its_statements_once_per_connection():
    connection.close()
    JobFactory.create_batch(3, type="noop")
    with CaptureQueriesContext(connection) as captured:
        claimed = [queue.claim() for _ in range(3)]
    assert all(claimed)
    # Through Django's cursor wrapper still: the run fences (execute_wrappers) and query logging see them.
    assert sum("FOR UPDATE SKIP LOCKED" in q["sql"] for q in captured.captured_queries) == 3
    assert prepared_claims() == 1
    assert queue.finish_done(claimed[0], {"ok": True})
    assert Job.objects.get(pk=claimed[0].pk).status == JobStatus.DONE


@pytest.mark.django_db(transaction=True)
def test_with_prepared_statements_off_nothing_is_prepared(settings):
    settings.JOBS_PREPARED_STATEMENTS = False
    connection.close()
    JobFactory(type="noop")
    assert queue.claim() is not None
    assert prepared_claims() == 0


def generic_plan(statement: str, params: dict) -> str:
    """EXPLAIN of ``statement`` prepared with a plan made for no particular values (plan_cache_mode)."""
    names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", statement)))
    numbered = re.sub(r"%\((\w+)\)s", lambda m: f"${names.index(m.group(1)) + 1}", statement)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(f"PREPARE generic_statement AS {numbered}")
        cursor.execute("EXPLAIN EXECUTE generic_statement(" + ", ".join(["%s"] * len(names)) + ")",
                       [params[name] for name in names])
        explained = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("DEALLOCATE generic_statement")
    return explained


def test_the_prepared_claims_generic_plan_reads_the_partial_index():
    """A prepared statement may be run with a plan made for no particular values: it must still take
    the first due row off the queued index, not scan a table of finished jobs."""
    add_finished_jobs()
    JobFactory(type="noop")
    plan = queue.claim_plan()
    assert plan.guarded is None
    explained = generic_plan(sql.CLAIM_UNGUARDED, {**plan.params, "queues": None, "worker_id": "test:1"})
    assert "jobs_queued_claim_order" in explained, explained
    assert "Seq Scan on jobs" not in explained, explained


@pytest.mark.parametrize("statement", ["CLAIM_MANY_UNGUARDED", "FINISH_AND_CLAIM"])
def test_a_claim_of_several_finds_its_rows_by_primary_key_in_the_generic_plan(statement):
    """The generic plan cannot see the LIMIT: it must not scan the whole table to hash it and find the rows
    it chose (2.5 ms instead of 0.05 on 5,000 jobs), nor to find the finished ones."""
    add_finished_jobs()
    JobFactory.create_batch(3, type="noop")
    params = {**queue.claim_plan().params, "queues": None, "worker_id": "test:1", "limit": 8,
              "finish_ids": [], "finish_attempts": [], "finish_reports": []}
    explained = generic_plan(getattr(sql, statement), params)
    assert "jobs_queued_claim_order" in explained, explained
    assert "Index Cond: (id = ANY" in explained, explained
    assert "Seq Scan on jobs" not in explained, explained


def test_an_enqueue_writes_no_entry_into_the_running_index():
    """Queued rows are outside jobs_running_type_started (migration 0008): an enqueue pays no entry there."""
    definition = indexes()["jobs_running_type_started"]
    assert "WHERE (status = 'running'::text)" in definition, definition
    queue.enqueue("noop", org_id="demo")
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM jobs WHERE status = 'running'")
        assert cursor.fetchone()[0] == 0


def test_the_live_jobs_are_read_off_the_two_states_indexes_not_the_table():
    """``Job.objects.live()`` (the metrics, the admin's filters) on a table of finished jobs: an OR of the two
    states, which the planner answers from the queued and the running partial indexes; the IN list it replaced
    implies neither index's predicate."""
    add_finished_jobs()
    JobFactory.create_batch(2, type="noop")
    running = JobFactory(type="noop", running=True)
    assert set(Job.objects.live().values_list("status", flat=True)) == {"queued", "running"}
    assert Job.objects.live().count() == 3 and running in Job.objects.live()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a seq scan then shows only if no index can serve it
    explained = Job.objects.live().values("type").explain()
    assert "jobs_running_type_started" in explained, explained
    assert "jobs_queued_" in explained, explained
    assert "Seq Scan on jobs" not in explained, explained


FENCED = ["PROGRESS", "FINISH_DONE", "FINISH_FAILED", "FINISH_RETRY", "INTERRUPTED_RUN", "REQUEUE_INTERRUPTED",
          "SUPERSEDE", "FAIL_EXHAUSTED", "OPERATOR_REQUEUE_STALE", "FINISH_AND_CLAIM"]


@pytest.mark.parametrize("statement", FENCED)
def test_a_fenced_write_finds_its_row_by_primary_key_not_by_a_scan_of_the_running_rows(statement):
    """The running rows' index is small, and the planner would scan it whole for the one id: a scan that grows
    with every running job and every dead entry a held snapshot keeps there. The fence's collation keeps it out."""
    add_finished_jobs()
    JobFactory.create_batch(3, type="noop", running=True)
    text = getattr(sql, statement)
    params = dict.fromkeys(re.findall(r"%\((\w+)\)s", text))
    params.update(id=uuid.uuid4(), attempt=1, finish_ids=[uuid.uuid4()], finish_attempts=[1], finish_reports=[None],
                  **{**queue.claim_plan().params, "queues": None, "worker_id": "test:1", "limit": 0})
    explained = generic_plan(text, {name: params[name] for name in params})
    assert "jobs_running_type_started" not in explained, explained
    assert "Index Scan using jobs_pkey on jobs" in explained, explained
