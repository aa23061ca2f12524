"""Fencing tokens and the attempt budget: every claim gets a token no earlier run had,
a requeue never gives back used attempts unless the operator says so, and a run the
database cut off is not charged like a crash."""

import pytest
from django.db import connection

from jobs import finish, operator_actions, queue
from jobs.models import Job, JobStatus
from tests.factories import JobFactory
from tests.support.processes import run_burst

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("zombies_possible", "test_types")]  # zombies: tests/conftest.py


def test_a_run_failed_by_an_operator_then_requeued_never_passes_the_new_runs_fence():
    """Mark failed, then Requeue: the old run is still alive and must lose every write to the new one."""
    queue.enqueue("noop", org_id="demo")
    old_run = queue.claim()
    queue.mark_failed([old_run.id], "marked failed by ops")
    assert queue.requeue([old_run.id]).requeued == [old_run.id]
    new_run = queue.claim()

    assert new_run.id == old_run.id and new_run.attempts != old_run.attempts
    with pytest.raises(queue.JobLost):
        old_run.report_progress(done=1)
    assert not queue.heartbeat(old_run)
    assert not queue.finish_done(old_run, {"from": "old"})
    assert not queue.finish_failed(old_run, "late failure")
    assert queue.interrupt(old_run, max_attempts=3) is None
    assert queue.finish_done(new_run, {"from": "new"})
    assert Job.objects.get(pk=new_run.id).report == {"from": "new"}


def test_a_fresh_budget_still_hands_out_a_fresh_token():
    queue.enqueue("noop", org_id="demo")
    tokens = []
    for _ in range(3):
        run = queue.claim()
        tokens.append(run.attempts)
        queue.mark_failed([run.id], "again")
        assert queue.requeue([run.id], fresh_budget=True).requeued == [run.id]
    assert tokens == sorted(set(tokens)), "a token was handed out twice"


def test_requeue_keeps_the_used_budget_and_refuses_a_job_without_attempts_left():
    spent = JobFactory(type="test_slow", failed=True, attempts=2)  # test_slow: max_attempts=2
    one_left = JobFactory(type="test_slow", failed=True, attempts=1)

    result = queue.requeue([spent.id, one_left.id])

    assert result.requeued == [one_left.id]
    assert result.refused == {spent.id: operator_actions.NO_BUDGET}
    assert Job.objects.get(pk=spent.id).status == JobStatus.FAILED
    again = Job.objects.get(pk=one_left.id)
    assert (again.status, again.attempts, again.counted_attempts) == (JobStatus.QUEUED, 1, 1)


def test_requeue_with_a_fresh_budget_forgives_the_earlier_attempts_only_when_asked():
    spent = JobFactory(type="test_slow", failed=True, attempts=2)

    assert queue.requeue([spent.id], fresh_budget=True).requeued == [spent.id]

    job = Job.objects.get(pk=spent.id)
    assert (job.status, job.attempts, job.uncounted_attempts) == (JobStatus.QUEUED, 2, 2)
    run = queue.claim()
    assert run.attempts == 3  # a new token
    assert queue.interrupt(run, max_attempts=2) == "queued"  # one counted attempt of two: retried
    run = queue.claim()
    assert queue.interrupt(run, max_attempts=2) == "failed"  # the fresh budget is spent


@pytest.mark.parametrize(
    "attempts, uncounted, outages, max_attempts, by_database, expected",
    [
        (1, 0, 0, 3, False, ("queued", False)),  # a crash, attempts left
        (3, 0, 0, 3, False, ("failed", False)),  # a crash, the last attempt
        (3, 0, 0, 3, True, ("queued", True)),    # the database cut off the last attempt: not counted
        (1, 0, 0, 1, True, ("queued", True)),    # a single-attempt type survives an outage
        (6, 5, 5, 1, True, ("failed", False)),   # the 6th outage counts: a job cannot kill its database forever
        (5, 2, 2, 3, False, ("failed", False)),  # earlier outages do not excuse a crash
        (5, 3, 0, 3, False, ("queued", False)),  # a fresh budget (3 forgiven): 2 of 3 counted
    ],
)
def test_after_interruption(attempts, uncounted, outages, max_attempts, by_database, expected):
    assert finish.after_interruption(attempts, uncounted, outages, max_attempts, by_database=by_database) == expected


@pytest.mark.parametrize(
    "status, counted, max_attempts, stale, fresh, expected",
    [
        ("failed", 1, 3, False, False, operator_actions.REQUEUE),
        ("failed", 3, 3, False, False, operator_actions.NO_BUDGET),
        ("failed", 3, 3, False, True, operator_actions.REQUEUE),
        ("running", 1, 3, True, False, operator_actions.REQUEUE),   # a zombie with attempts left: back now
        ("running", 3, 3, True, False, operator_actions.FAIL),      # out of attempts: failed, as the sweep does
        ("running", 3, 3, True, True, operator_actions.REQUEUE),
        ("running", 1, 3, False, False, operator_actions.NOT_REQUEUEABLE),  # alive
        ("running", 1, 3, False, True, operator_actions.NOT_REQUEUEABLE),
        ("queued", 0, 3, False, False, operator_actions.NOT_REQUEUEABLE),
        ("done", 1, 3, False, True, operator_actions.NOT_REQUEUEABLE),
    ],
)
def test_operator_requeue_rules(status, counted, max_attempts, stale, fresh, expected):
    assert operator_actions.operator_requeue(status, counted, max_attempts, stale=stale, fresh=fresh) == expected


# -- database outages and the budget ----------------------------------------------------

def kill_own_connection():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")


def test_runs_cut_off_by_the_database_do_not_use_up_the_budget(transactional_db, temporary_type):
    """Two outages during a single-attempt job: it still gets its one real run."""
    def cut_off_twice(job):
        if job.attempts <= 2:
            kill_own_connection()
        return {"run": job.attempts}

    temporary_type("test_outage_victim", cut_off_twice, max_attempts=1)
    job = queue.enqueue("test_outage_victim", org_id="demo")

    assert run_burst() == 3

    job = Job.objects.get(pk=job.id)
    assert (job.status, job.report, job.error) == (JobStatus.DONE, {"run": 3}, None)
    assert (job.attempts, job.outages, job.counted_attempts) == (3, 2, 1)


def test_a_job_that_keeps_losing_its_database_ends_failed_saying_why(transactional_db, temporary_type):
    def always_cut_off(job):
        kill_own_connection()

    temporary_type("test_outage_victim", always_cut_off, max_attempts=1)
    job = queue.enqueue("test_outage_victim", org_id="demo")

    run_burst()

    job = Job.objects.get(pk=job.id)
    outages = finish.FREE_OUTAGES + 1
    assert job.status == JobStatus.FAILED
    assert job.error == f"max attempts exceeded; interrupted by database outages ({outages})"
    assert (job.attempts, job.outages) == (outages, outages)


def test_a_zombie_is_charged_even_after_outages():
    """The sweep's put-back (a dead worker) always counts; outages only excuse themselves."""
    zombie = JobFactory(type="test_slow", stale=True, attempts=4, uncounted_attempts=2, outages=2)

    assert queue.interrupt(zombie, max_attempts=2) == "failed"

    assert Job.objects.get(pk=zombie.id).error == "max attempts exceeded; interrupted by database outages (2)"


def test_a_run_cut_off_inside_a_transaction_is_an_outage_not_a_failure(transactional_db, temporary_type):
    """Like an import's batch: leaving the atomic block, Django has already reconnected."""
    from django.db import transaction

    def cut_off_mid_batch(job):
        if job.attempts == 1:
            with transaction.atomic():
                kill_own_connection()
        return {"run": job.attempts}

    temporary_type("test_outage_victim", cut_off_mid_batch, max_attempts=1)
    job = queue.enqueue("test_outage_victim", org_id="demo")

    run_burst()

    job = Job.objects.get(pk=job.id)
    assert (job.status, job.report, job.outages) == (JobStatus.DONE, {"run": 2}, 1)
