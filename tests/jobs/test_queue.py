"""enqueue / claim / dedup scopes (README, "Enqueueing"), against the real database."""

import threading

import psycopg
import pytest
from django.db import connection, transaction

from jobs import finish, queue, registry
from jobs import sql as jobs_sql
from jobs.models import Job, JobStatus
from tests.factories import JobFactory
from tests.support.processes import database_url, wait_for

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("zombies_possible", "test_types")]  # zombies: tests/conftest.py


def test_second_enqueue_with_same_key_returns_the_existing_job():
    first = queue.enqueue("noop", org_id="demo", dedup_key="noop:site-1")
    second = queue.enqueue("noop", org_id="demo", dedup_key="noop:site-1")
    assert second.id == first.id
    assert Job.objects.count() == 1


def test_jobs_without_key_never_conflict():
    queue.enqueue("noop", org_id="demo")
    queue.enqueue("noop", org_id="demo")
    assert Job.objects.count() == 2


def test_enqueue_rejects_an_unknown_type_in_the_caller():
    with pytest.raises(registry.UnknownJobType, match="nope"):
        queue.enqueue("nope", org_id="demo")
    assert not Job.objects.exists()


def test_enqueue_many_queues_each_item_and_skips_keys_held_by_live_jobs():
    held = queue.enqueue("noop", org_id="demo", dedup_key="noop:2")
    queued = queue.enqueue_many("noop", org_id="demo", items=[
        ({"n": 1}, "noop:1"), ({"n": 2}, "noop:2"), ({"n": 3}, None), ({"n": 4}, None),
    ])
    assert queued == 3
    jobs = Job.objects.all()
    assert sorted(job.payload.get("n", 0) for job in jobs) == [0, 1, 3, 4]
    assert Job.objects.get(dedup_key="noop:2").id == held.id
    assert all(job.status == JobStatus.QUEUED and job.org_id == "demo" and job.type == "noop" for job in jobs)


def test_enqueue_many_checks_its_type_and_accepts_nothing():
    with pytest.raises(registry.UnknownJobType):
        queue.enqueue_many("nope", org_id="demo", items=[({}, None)])
    assert queue.enqueue_many("noop", org_id="demo", items=[]) == 0
    assert not Job.objects.exists()


def test_enqueue_inside_a_rolled_back_transaction_leaves_no_job():
    with pytest.raises(RuntimeError), transaction.atomic():
        queue.enqueue("noop", org_id="demo")
        raise RuntimeError("the business write failed")
    assert not Job.objects.exists()


def test_queue_scope_releases_the_key_at_claim_so_no_wakeup_is_lost():
    """Scenario A/B: a run in progress does not swallow a new request for the same work."""
    a = queue.enqueue("noop", org_id="demo", dedup_key="map_reconcile:7")
    claimed = queue.claim()
    assert claimed.id == a.id and claimed.dedup_key is None

    b = queue.enqueue("noop", org_id="demo", dedup_key="map_reconcile:7")
    assert b.id != a.id and b.status == JobStatus.QUEUED
    assert queue.finish_done(claimed, None)
    assert queue.claim().id == b.id


def test_active_scope_holds_the_key_until_finished():
    a = queue.enqueue("test_active", org_id="demo", dedup_key="crawl:site-1")
    claimed = queue.claim()
    assert claimed.id == a.id and claimed.dedup_key == "crawl:site-1"

    assert queue.enqueue("test_active", org_id="demo", dedup_key="crawl:site-1").id == a.id
    assert queue.finish_done(claimed, {"ok": True})

    again = queue.enqueue("test_active", org_id="demo", dedup_key="crawl:site-1")
    assert again.id != a.id


def test_reinserts_when_the_key_holder_finishes_between_conflict_and_reread(transactional_db):
    """The residual race of an enqueue with a key: the conflict's winner frees its key before we re-read it."""
    holder = queue.enqueue("noop", org_id="demo", dedup_key="k")
    other = psycopg.connect(database_url(), autocommit=True)
    seen = []

    def finish_holder_after_conflict(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if sql.lstrip().startswith("INSERT INTO jobs") and context["cursor"].rowcount == 0:
            seen.append("conflict")
            other.execute(
                "UPDATE jobs SET status='done', started_at=now(), finished_at=now(), dedup_key=NULL WHERE id=%s",
                [holder.id],
            )
        return result

    with connection.execute_wrapper(finish_holder_after_conflict):
        job = queue.enqueue("noop", org_id="demo", dedup_key="k")
    other.close()
    assert seen == ["conflict"]
    assert job.id != holder.id
    assert Job.objects.get(dedup_key="k").id == job.id


def test_claim_takes_the_oldest_and_marks_it_running():
    first = queue.enqueue("noop", org_id="demo")
    queue.enqueue("noop", org_id="demo")
    job = queue.claim()
    assert job.id == first.id
    fresh = Job.objects.get(pk=job.id)
    assert (fresh.status, fresh.attempts) == (JobStatus.RUNNING, 1)
    assert fresh.started_at is not None


def test_claim_returns_none_on_an_empty_queue():
    JobFactory(done=True)
    assert queue.claim() is None


def test_concurrent_claims_take_different_jobs(transactional_db):
    """A claim in progress holds its row; a second claimer skips it instead of waiting."""
    ids = {queue.enqueue("noop", org_id="demo").id for _ in range(2)}
    holding, release = threading.Event(), threading.Event()
    claimed = {}

    def hold_a_claim_open():
        try:
            with transaction.atomic():
                claimed["a"] = queue.claim()
                holding.set()
                release.wait(10)
        finally:
            connection.close()

    thread = threading.Thread(target=hold_a_claim_open)
    thread.start()
    assert holding.wait(10)
    claimed["b"] = queue.claim()
    release.set()
    thread.join()
    assert {claimed["a"].id, claimed["b"].id} == ids
    assert queue.claim() is None


def test_one_running_per_skips_jobs_whose_key_is_already_running(guarded_type):
    JobFactory(type="test_guarded", running=True, payload={"site_id": "1"})
    JobFactory(type="test_guarded", payload={"site_id": "1"})
    other_site = JobFactory(type="test_guarded", payload={"site_id": "2"})
    assert queue.claim().id == other_site.id
    assert queue.claim() is None


def test_report_progress_merges_fields_and_stamps_a_heartbeat():
    queue.enqueue("noop", org_id="demo")
    job = queue.claim()
    job.report_progress(done=5, total=10, cursor="row-5")
    job.report_progress(done=7)
    progress = Job.objects.get(pk=job.id).progress
    assert progress["done"] == 7 and progress["total"] == 10 and progress["cursor"] == "row-5"
    assert "updated_at" in progress


def test_report_progress_raises_job_lost_once_the_job_is_taken_away():
    queue.enqueue("noop", org_id="demo")
    job = queue.claim()
    queue.mark_failed([job.id], "marked failed by ops")
    with pytest.raises(queue.JobLost):
        job.report_progress(done=1)
    # and the run's late result does not overwrite the operator's decision
    assert not queue.finish_done(job, {"late": True})
    assert Job.objects.get(pk=job.id).error == "marked failed by ops"


def test_a_stale_run_cannot_finish_a_job_reclaimed_by_a_later_attempt():
    queue.enqueue("noop", org_id="demo")
    first_run = queue.claim()
    assert queue.interrupt(first_run, max_attempts=3) == "queued"
    second_run = queue.claim()
    assert second_run.attempts == 2
    assert not queue.finish_done(first_run, {"from": "first"})
    assert queue.finish_done(second_run, {"from": "second"})
    assert Job.objects.get(pk=second_run.id).report == {"from": "second"}


@pytest.mark.parametrize(
    "attempts, max_attempts, expected",
    [(1, 3, "queued"), (2, 3, "queued"), (3, 3, "failed"), (4, 3, "failed"), (1, 1, "failed"), (1, 2, "queued")],
)
def test_retry_or_fail(attempts, max_attempts, expected):
    assert finish.retry_or_fail(attempts, max_attempts) == expected


def test_database_enforces_the_state_machine_columns():
    from django.db import IntegrityError

    with pytest.raises(IntegrityError), transaction.atomic():
        JobFactory(status="paused")
    with pytest.raises(IntegrityError), transaction.atomic():
        JobFactory(status=JobStatus.DONE)  # a finished job needs finished_at
    with pytest.raises(IntegrityError), transaction.atomic():
        JobFactory(status=JobStatus.RUNNING)  # a running job needs started_at


def test_operator_requeue_leaves_a_zombie_that_was_reclaimed_meanwhile(transactional_db):
    """The zombie seen by the admin was swept and re-claimed before the click landed: a live run now."""
    zombie = JobFactory(stale=True)
    other = psycopg.connect(database_url(), autocommit=True)

    def reclaim_before_the_requeue(execute, sql, params, many, context):
        if sql == jobs_sql.OPERATOR_INSPECT:
            other.execute("UPDATE jobs SET attempts = attempts + 1, started_at = now() WHERE id = %s", [zombie.id])
        return execute(sql, params, many, context)

    with connection.execute_wrapper(reclaim_before_the_requeue):
        result = queue.requeue([zombie.id])
    other.close()
    assert result.requeued == [] and zombie.id in result.refused
    fresh = Job.objects.get(pk=zombie.id)
    assert (fresh.status, fresh.attempts) == (JobStatus.RUNNING, 2)


def test_operator_requeue_moves_a_zombie_back_now():
    zombie = JobFactory(stale=True)
    assert queue.requeue([zombie.id]).requeued == [zombie.id]
    assert Job.objects.get(pk=zombie.id).status == JobStatus.QUEUED


def test_without_guarded_types_a_claim_is_one_statement():
    """The common case pays no BEGIN/COMMIT: the claim statement is its own transaction."""
    from django.test.utils import CaptureQueriesContext

    job = queue.enqueue("noop", org_id="demo")
    with CaptureQueriesContext(connection) as queries:
        claimed = queue.claim()
    assert claimed.id == job.id and claimed.status == JobStatus.RUNNING
    assert isinstance(claimed.payload, dict) and claimed.attempts == 1
    assert len(queries) == 1, [q["sql"] for q in queries]


# -- requeues and the dedup scopes: never two queued jobs with one key; for 'active',
# -- never two live ones --------------------------------------------------------------

def live_with_key(key):
    return list(Job.objects.filter(enqueued_key=key, status__in=[JobStatus.QUEUED, JobStatus.RUNNING])
                .values_list("status", flat=True))


def test_a_queue_scope_job_put_back_by_the_sweep_takes_its_key_back():
    job = queue.enqueue("noop", org_id="demo", dedup_key="map_reconcile:1")
    run = queue.claim()
    assert run.dedup_key is None  # released at claim

    assert queue.interrupt(run, max_attempts=3) == "queued"

    assert Job.objects.get(pk=job.id).dedup_key == "map_reconcile:1"
    assert queue.enqueue("noop", org_id="demo", dedup_key="map_reconcile:1").id == job.id
    assert live_with_key("map_reconcile:1") == [JobStatus.QUEUED]


def test_a_queue_scope_job_put_back_while_a_newer_one_is_queued_folds_into_it():
    job = queue.enqueue("noop", org_id="demo", dedup_key="map_reconcile:2")
    run = queue.claim()
    newer = queue.enqueue("noop", org_id="demo", dedup_key="map_reconcile:2")  # accepted: no lost wake-up

    assert queue.interrupt(run, max_attempts=3) == "done"

    folded = Job.objects.get(pk=job.id)
    assert (folded.status, folded.report, folded.dedup_key) == (JobStatus.DONE, {"superseded_by": str(newer.id)}, None)
    assert live_with_key("map_reconcile:2") == [JobStatus.QUEUED]
    assert Job.objects.get(pk=newer.id).dedup_key == "map_reconcile:2"


def test_an_active_scope_zombie_keeps_its_key_through_the_put_back():
    job = queue.enqueue("test_active", org_id="demo", dedup_key="crawl:1")
    run = queue.claim()
    assert queue.enqueue("test_active", org_id="demo", dedup_key="crawl:1").id == job.id

    assert queue.interrupt(run, max_attempts=3) == "queued"

    assert Job.objects.get(pk=job.id).dedup_key == "crawl:1"
    assert live_with_key("crawl:1") == [JobStatus.QUEUED]


def fail_it(job_id):
    assert queue.mark_failed([job_id], "gave up") == [job_id]


def test_requeue_of_a_failed_active_job_is_refused_while_another_live_job_holds_its_key():
    first = queue.enqueue("test_active", org_id="demo", dedup_key="crawl:7")
    fail_it(first.id)
    holder = queue.enqueue("test_active", org_id="demo", dedup_key="crawl:7")
    queue.claim()  # the holder runs, and keeps the key ('active')

    result = queue.requeue([first.id])

    assert result.requeued == []
    assert result.refused == {first.id: f"job {holder.id} holds its key 'crawl:7' and covers the same work"}
    assert Job.objects.get(pk=first.id).status == JobStatus.FAILED
    assert live_with_key("crawl:7") == [JobStatus.RUNNING]


def test_requeue_of_a_failed_queue_scope_job_is_refused_while_a_queued_job_holds_its_key():
    first = queue.enqueue("noop", org_id="demo", dedup_key="map_reconcile:7")
    fail_it(first.id)
    holder = queue.enqueue("noop", org_id="demo", dedup_key="map_reconcile:7")

    result = queue.requeue([first.id])

    assert first.id in result.refused and str(holder.id) in result.refused[first.id]
    assert live_with_key("map_reconcile:7") == [JobStatus.QUEUED]


def test_requeue_of_a_failed_queue_scope_job_takes_its_key_back_beside_a_running_one():
    first = queue.enqueue("noop", org_id="demo", dedup_key="map_reconcile:8")
    fail_it(first.id)
    queue.enqueue("noop", org_id="demo", dedup_key="map_reconcile:8")
    queue.claim()  # running, key released: a queued copy beside it is the 'queue' scope's point

    assert queue.requeue([first.id]).requeued == [first.id]

    assert Job.objects.get(pk=first.id).dedup_key == "map_reconcile:8"
    assert queue.enqueue("noop", org_id="demo", dedup_key="map_reconcile:8").id == first.id
    assert sorted(live_with_key("map_reconcile:8")) == [JobStatus.QUEUED, JobStatus.RUNNING]


def test_a_requeued_failed_job_holds_its_key_and_shows_nothing_of_its_old_failure():
    job = queue.enqueue("test_fail", org_id="demo", dedup_key="fail:1")
    run = queue.claim()
    assert queue.finish_failed(run, "ValueError: bad", traceback="Traceback (most recent call last): ...")

    assert queue.requeue([job.id]).requeued == [job.id]

    again = Job.objects.get(pk=job.id)
    assert (again.status, again.error, again.report, again.traceback) == (JobStatus.QUEUED, None, None, None)
    assert again.dedup_key == "fail:1"
    assert queue.enqueue("test_fail", org_id="demo", dedup_key="fail:1").id == job.id


def test_a_put_back_racing_an_enqueue_of_its_key_folds_into_the_winner(transactional_db):
    """The enqueue's INSERT is uncommitted when the put-back tries to take the key: it waits, then folds."""
    job = queue.enqueue("noop", org_id="demo", dedup_key="map_reconcile:9")
    run = queue.claim()
    other = psycopg.connect(database_url())  # a transaction of its own, left open
    ((winner,),) = other.execute(
        "INSERT INTO jobs (org_id, type, dedup_key, enqueued_key) VALUES ('demo', 'noop', %s, %s) RETURNING id",
        ["map_reconcile:9", "map_reconcile:9"]).fetchall()
    outcome = {}

    def put_back():
        try:
            outcome["status"] = queue.interrupt(run, max_attempts=3)
        finally:
            connection.close()

    watcher = psycopg.connect(database_url(), autocommit=True)
    lock_waits = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
    thread = threading.Thread(target=put_back)
    thread.start()
    wait_for(lambda: not thread.is_alive() or watcher.execute(lock_waits).fetchone()[0] == 1, timeout=10,
             message="the put-back to wait for a lock")
    watcher.close()
    assert thread.is_alive(), "the put-back should wait for the uncommitted holder of its key"
    other.commit()
    other.close()
    thread.join(10)

    assert outcome == {"status": "done"}
    folded = Job.objects.get(pk=job.id)
    assert folded.report == {"superseded_by": str(winner)}
    assert live_with_key("map_reconcile:9") == [JobStatus.QUEUED]
