"""Retention on the real database (jobs.retention, manage.py prunejobs): what is deleted, what never is, in batches.

Old jobs are made as they would have been made then: their id is a UUIDv7 of their creation time
(``uuid7_at``), as uuidv7() gave it, since the prune looks for old jobs by id.
"""

import json
from datetime import timedelta
from io import StringIO

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from imports.models import Import
from jobs import duties, queue, retention
from jobs.models import Job, JobStatus
from tests.factories import ImportFactory, JobFactory
from tests.jobs.test_prune_rules import uuid7_at
from tests.support.processes import database_url, wait_for

pytestmark = pytest.mark.django_db


def finished(status: str = "done", *, days: float, type: str = "noop") -> Job:
    """A job of ``type`` that ended ``status`` ``days`` ago, after a two-second run, with the id it got then."""
    ended = retention.database_now() - timedelta(days=days)
    created = ended - timedelta(seconds=2)
    extra = {"error": "boom"} if status == "failed" else {"report": {}}
    return JobFactory(id=uuid7_at(created), type=type, status=status, attempts=1, created_at=created,
                      started_at=created, finished_at=ended, **extra)


def remaining(*jobs) -> set:
    return set(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("pk", flat=True))


def prune(done="14d", failed="90d", **kwargs) -> retention.Prune:
    run = retention.Prune.start(done_after=retention.parse_age(done), failed_after=retention.parse_age(failed),
                                **kwargs)
    run.run()
    return run


def test_old_finished_jobs_are_deleted_and_recent_ones_kept():
    old_done, recent_done = finished("done", days=15), finished("done", days=13)
    old_failed, recent_failed = finished("failed", days=91), finished("failed", days=30)
    just_now = JobFactory(done=True)  # its id made now

    run = prune()

    assert remaining(old_done, recent_done, old_failed, recent_failed, just_now) == {
        recent_done.pk, recent_failed.pk, just_now.pk}
    assert run.deleted == {("done", "noop"): 1, ("failed", "noop"): 1}


def test_queued_and_running_jobs_are_never_deleted_however_old():
    long_ago = retention.database_now() - timedelta(days=400)
    queued = JobFactory(id=uuid7_at(long_ago), created_at=long_ago)
    running = JobFactory(id=uuid7_at(long_ago), created_at=long_ago, running=True, started_at=long_ago)
    gone = finished("failed", days=400)

    prune(done="1s", failed="1s")

    assert remaining(queued, running, gone) == {queued.pk, running.pk}


def test_map_reconcile_and_the_configured_kept_types_are_spared(settings):
    settings.JOBS_PRUNE_KEEP_TYPES = ["audit_log"]
    events = [finished(status, days=400, type="map_reconcile") for status in ("done", "failed")]
    audit = finished("done", days=400, type="audit_log")
    other = finished("done", days=400, type="import_csv")

    prune()

    assert remaining(*events, audit, other) == {events[0].pk, events[1].pk, audit.pk}


def test_a_job_another_row_points_at_is_kept_while_it_does():
    imp = ImportFactory(done=True)
    old = finished("done", days=400, type="import_csv")
    Import.objects.filter(pk=imp.pk).update(job=old)
    loose = finished("done", days=400, type="import_csv")

    assert ("imports_import", "job_id") in retention.referencing_columns()
    prune()
    assert remaining(old, loose) == {old.pk}

    Import.objects.filter(pk=imp.pk).update(job=None)
    prune()
    assert remaining(old) == set()


def test_batches_walk_the_ids_in_order_until_a_short_one(settings):
    settings.JOBS_PRUNE_BATCH = 4
    jobs = [finished("done", days=20 + n) for n in range(10)]
    kept = finished("done", days=1)
    run = retention.Prune.start(done_after=timedelta(days=14), failed_after=timedelta(days=90))

    sizes = []
    while not run.finished:
        sizes.append(run.step())

    assert sizes == [4, 4, 2, 0]  # the done pass in three batches, then the failed pass's one, empty
    assert run.batches == 4 and run.total == 10
    assert remaining(*jobs, kept) == {kept.pk}


def test_a_prune_in_slices_resumes_where_it_stopped(settings):
    settings.JOBS_PRUNE_BATCH = 3
    jobs = [finished("done", days=20) for _ in range(7)]
    run = retention.Prune.start(done_after=timedelta(days=14), failed_after=None)

    assert run.run(budget=0) is False  # one batch, then the budget is spent
    assert run.total == 3 and len(remaining(*jobs)) == 4
    assert run.run(budget=0) is False
    assert run.run() is True
    assert run.total == 7 and remaining(*jobs) == set()


def nodes(plan):
    """Every node of an EXPLAIN (FORMAT JSON) plan, CTEs and subplans included."""
    stack = [plan[0]["Plan"]]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.get("Plans", []))


def test_a_batch_reads_only_ids_older_than_its_cutoff():
    """20,000 recent finished jobs (ids made now) and five old: the batch walks the primary key below the
    cutoff's first id, so it never reads the recent ones, and no plan scans the table."""
    with connection.cursor() as cursor:
        cursor.execute("""
            INSERT INTO jobs (org_id, type, status, attempts, started_at, finished_at, created_at)
            SELECT 'demo', 'noop', 'done', 1, now(), now(), now() FROM generate_series(1, 20000)
        """)
    old = [finished("done", days=30) for _ in range(5)]
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs")
    run = retention.Prune.start(done_after=timedelta(days=14), failed_after=None)
    statement, params = run.next_batch()
    with connection.cursor() as cursor:
        cursor.execute("SAVEPOINT explain")
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, params)
        (plan,) = cursor.fetchone()
        cursor.execute("ROLLBACK TO SAVEPOINT explain")
    plan = plan if isinstance(plan, list) else json.loads(plan)
    text = json.dumps(plan, indent=1)
    top = plan[0]["Plan"]
    buffers = top["Shared Hit Blocks"] + top["Shared Read Blocks"]
    scanned = {(node.get("Node Type"), node.get("Relation Name"), node.get("Index Name")) for node in nodes(plan)}
    assert ("Seq Scan", "jobs", None) not in scanned, text[:4000]
    assert any(index == "jobs_pkey" for _n, _r, index in scanned), text[:4000]
    # Reading the 20,000 recent rows would be 150+ pages; the five old ones are a few index and heap pages.
    assert buffers < 120, f"the batch touched {buffers} buffers:\n{text[:4000]}"
    assert len(remaining(*old)) == 5  # rolled back
    run.run()
    assert remaining(*old) == set()


def test_a_dry_run_deletes_nothing_and_prints_counts_by_status_and_type():
    jobs = [finished("done", days=20), finished("done", days=20), finished("done", days=20, type="import_csv"),
            finished("failed", days=100), finished("done", days=20, type="map_reconcile")]
    out = StringIO()

    call_command("prunejobs", "--dry-run", stdout=out)

    text = out.getvalue()
    assert remaining(*jobs) == {j.pk for j in jobs}
    lines = [line.split() for line in text.splitlines()]
    assert ["done:", "3", "would", "be", "deleted"] in lines
    assert ["noop", "2"] in lines and ["import_csv", "1"] in lines
    assert ["failed:", "1", "would", "be", "deleted"] in lines
    assert "map_reconcile" not in {line[0] for line in lines if len(line) == 2}
    assert "dry run: 4 job(s) would be deleted; nothing was" in text


def test_the_command_deletes_with_the_ages_it_is_given_and_says_how_many():
    a, b, c = finished("done", days=3), finished("done", days=1), finished("failed", days=3)
    out = StringIO()

    call_command("prunejobs", "--done-older-than", "2d", "--failed-older-than", "never", stdout=out)

    assert remaining(a, b, c) == {b.pk, c.pk}
    assert "deleted 1 job(s) (done 1, failed 0) in 1 batch(es)" in out.getvalue()
    assert "failed jobs finished before" not in out.getvalue()


def test_the_command_defaults_come_from_the_settings(settings):
    settings.JOBS_PRUNE_DONE_AFTER = "2d"
    settings.JOBS_PRUNE_FAILED_AFTER = "5d"
    jobs = [finished("done", days=3), finished("done", days=1), finished("failed", days=4), finished("failed", days=6)]

    call_command("prunejobs", stdout=StringIO())

    assert remaining(*jobs) == {jobs[1].pk, jobs[2].pk}


@pytest.mark.parametrize(("args", "setting", "says"), [
    (["--done-older-than", "14"], None, "--done-older-than: '14' is not an age"),
    (["--failed-older-than", "0d"], None, "--failed-older-than: '0d' is no age"),
    (["--done-older-than", "never", "--failed-older-than", "never"], None, "nothing to prune"),
    (["--batch-size", "0"], None, "--batch-size must be at least 1"),
    ([], "fortnight", "JOBS_PRUNE_DONE_AFTER: 'fortnight' is not an age"),
    ([], 0, "JOBS_PRUNE_BATCH: the batch size must be at least 1"),
])
def test_bad_input_is_a_clear_error_and_deletes_nothing(settings, args, setting, says):
    if isinstance(setting, str):
        settings.JOBS_PRUNE_DONE_AFTER = setting
    elif setting is not None:
        settings.JOBS_PRUNE_BATCH = setting
    job = finished("done", days=400)
    with pytest.raises(CommandError, match=says):
        call_command("prunejobs", *args, stdout=StringIO())
    assert remaining(job) == {job.pk}


# -- the periodic prune, in this process ---------------------------------------------------------

def holds_prune_lock(pid: int) -> bool:
    """Read live (pg_locks, unlike pg_stat_activity, is not a snapshot kept for the transaction)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = %s AND locktype = 'advisory' "
                       "AND classid = %s::int::oid AND objid = %s::int::oid AND objsubid = 2)",
                       [pid, retention.LOCK_NAMESPACE, retention.LOCK_KEY])
        return cursor.fetchone()[0]


@pytest.fixture
def periodic():
    duty = retention.PeriodicPrune()
    yield duty
    duty.release()


def test_the_periodic_prune_is_registered_as_a_duty():
    assert "jobs.prune" in {d.name for d in duties.all_duties()}


def test_the_periodic_prune_does_nothing_unless_enabled(settings, periodic):
    settings.JOBS_PRUNE_EVERY = 0
    job = finished("done", days=400)

    assert periodic() == 0
    assert remaining(job) == {job.pk}
    assert periodic.holding is False
    assert periodic.interval() == retention.OFF_RECHECK_SECONDS

    settings.JOBS_PRUNE_EVERY = 3600
    assert periodic() == 1
    assert remaining(job) == set()
    assert periodic.holding is True and periodic.interval() == 3600


def test_a_long_periodic_prune_comes_back_at_the_next_tick_until_it_is_through(settings, periodic, monkeypatch):
    settings.JOBS_PRUNE_EVERY = 3600
    settings.JOBS_PRUNE_BATCH = 2
    settings.JOBS_PRUNE_FAILED_AFTER = "never"
    monkeypatch.setattr(retention, "SLICE_SECONDS", 0)  # one batch per turn
    jobs = [finished("done", days=20) for _ in range(5)]

    turns = []
    while True:
        turns.append(periodic())
        if periodic.current is None:
            break
        assert duties.Duty("jobs.prune", periodic, periodic.interval).interval() == duties.TICK
    assert turns == [2, 2, 1]
    assert remaining(*jobs) == set() and periodic.interval() == 3600


def test_while_another_session_holds_the_lock_the_periodic_prune_waits_its_turn(settings, periodic):
    settings.JOBS_PRUNE_EVERY = 3600
    job = finished("done", days=400)
    with psycopg.connect(database_url(), autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s, %s)", [retention.LOCK_NAMESPACE, retention.LOCK_KEY])
        assert periodic() == 0
        assert periodic.holding is False and remaining(job) == {job.pk}
        holder = other.info.backend_pid
    # The holder's session ended (its backend exits a moment after the client closed): the next turn takes the lock.
    wait_for(lambda: not holds_prune_lock(holder), timeout=10, message="the holder's lock released")
    assert periodic() == 1 and periodic.holding is True


# -- locks: a prune and the queue never wait on each other ----------------------------------------

@pytest.mark.django_db(transaction=True)
def test_a_row_someone_holds_is_skipped_not_waited_on():
    held, free = finished("failed", days=400), finished("failed", days=400)
    with psycopg.connect(database_url()) as operator:
        operator.execute("SELECT 1 FROM jobs WHERE id = %s FOR UPDATE", [held.pk])  # an admin action, say
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '2s'")  # a wait would fail the test, not hang it
        try:
            prune()
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")
        operator.rollback()
    assert remaining(held, free) == {held.pk}


@pytest.mark.django_db(transaction=True)
def test_a_batch_in_progress_does_not_hold_up_a_claim():
    old = [finished("done", days=400) for _ in range(3)]
    waiting = JobFactory(type="noop")
    run = retention.Prune.start(done_after=timedelta(days=14), failed_after=None)
    with psycopg.connect(database_url()) as pruner:
        # The batch has locked and deleted its rows and not committed: as long as it takes.
        deleted = pruner.execute(*run.next_batch()).fetchall()
        assert sum(n for _t, n, _m in deleted) == 3
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '2s'")
        try:
            claimed = queue.claim()
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")
        assert claimed is not None and claimed.id == waiting.pk
        pruner.commit()
    assert remaining(*old) == set()
    assert Job.objects.get(pk=waiting.pk).status == JobStatus.RUNNING
