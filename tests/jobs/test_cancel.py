"""Cancellation (issue 21 §2): jobs.cancel and the admin's Cancel, in this process.

A queued job fails at once with on_fail; a running one is asked and told at its next
report_progress or heartbeat; a finished one is left alone. Real worker processes:
tests/jobs/test_cancel_processes.py.
"""

from __future__ import annotations

import threading
import uuid

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.urls import reverse

import jobs
from jobs import cancellation, queue, timeouts
from jobs.models import Job, JobStatus
from tests.factories import JobFactory, OrgFactory, UserFactory
from tests.support.processes import run_burst, wait_for

pytestmark = pytest.mark.usefixtures("test_types")

JOBS_URL = reverse("admin:jobs_job_changelist")
# The factory's jobs are of the internal noop type, which the list hides unless shown.
ALL_JOBS_URL = f"{JOBS_URL}?internal=shown"


@pytest.fixture
def failures(temporary_type):
    """A type ``test_cancellable`` whose on_fail appends the job's id to the returned list."""
    seen = []
    temporary_type("test_cancellable", lambda job: None, on_fail=lambda job: seen.append(job.id))
    return seen


def test_jobs_cancel_stays_the_verb_once_its_module_is_imported():
    # Imported above (and by jobs.admin): a module of that name would have replaced the verb.
    assert jobs.cancel is cancellation.cancel


@pytest.mark.django_db
def test_a_queued_job_is_failed_cancelled_at_once_its_key_released_and_on_fail_run(failures):
    job = queue.enqueue("test_cancellable", org_id="demo", dedup_key="cancel:1")

    assert jobs.cancel(job.id) is True

    job.refresh_from_db()
    assert (job.status, job.error, job.attempts, job.dedup_key) == (JobStatus.FAILED, "cancelled", 0, None)
    assert job.finished_at is not None and job.cancel_requested_at is not None
    assert failures == [job.id]
    assert run_burst() == 0  # never claimed
    assert queue.enqueue("test_cancellable", org_id="demo", dedup_key="cancel:1").id != job.id


@pytest.mark.django_db
def test_a_running_job_is_only_asked_and_asking_again_keeps_the_first_request(failures):
    job = JobFactory(running=True, type="test_cancellable")

    assert cancellation.cancel(job.id) is True
    job.refresh_from_db()
    first = job.cancel_requested_at
    assert cancellation.cancel(str(job.id)) is True

    job.refresh_from_db()
    assert (job.status, job.error, job.finished_at) == (JobStatus.RUNNING, None, None)
    assert first is not None and job.cancel_requested_at == first
    assert failures == []  # on_fail runs when the run ends


@pytest.mark.django_db
@pytest.mark.parametrize("state", ["done", "failed"])
def test_a_finished_job_is_left_alone_and_the_cancel_says_so(state, failures):
    job = JobFactory(type="test_cancellable", **{state: True})
    before = Job.objects.values().get(pk=job.pk)

    result = cancellation.cancel_jobs([job.id])

    assert cancellation.cancel(job.id) is False
    assert result.refused == {job.id: cancellation.NOT_LIVE} and not result.cancelled and not result.asked
    assert Job.objects.values().get(pk=job.pk) == before
    assert failures == []


@pytest.mark.django_db
def test_an_unknown_or_malformed_id_is_refused_with_its_reason():
    missing = uuid.uuid4()
    result = cancellation.cancel_jobs([missing, "not-a-uuid"])
    assert result.refused == {missing: cancellation.NO_SUCH_JOB, "not-a-uuid": cancellation.NO_SUCH_JOB}
    assert jobs.cancel(missing) is False


@pytest.mark.django_db
def test_a_cancel_that_comes_after_the_finish_changes_nothing_and_one_before_it_leaves_the_finish_standing():
    # The worker's finish and the cancel are each one fenced statement: whichever commits first decides.
    queue.enqueue("noop", org_id="demo")
    finished_first = queue.claim()
    assert queue.finish_done(finished_first, {"ok": True})
    assert jobs.cancel(finished_first.id) is False

    queue.enqueue("noop", org_id="demo")
    asked_first = queue.claim()
    assert jobs.cancel(asked_first.id) is True
    assert queue.finish_done(asked_first, {"ok": True})  # it finished before it was told: done stays done
    assert Job.objects.get(pk=asked_first.id).status == JobStatus.DONE


@pytest.mark.django_db
def test_report_progress_of_a_cancelled_run_keeps_its_checkpoint_then_raises_job_cancelled():
    queue.enqueue("noop", org_id="demo")
    run = queue.claim()
    run.report_progress(done=1)
    jobs.cancel(run.id)

    with pytest.raises(jobs.JobCancelled):
        run.report_progress(done=2)

    assert Job.objects.get(pk=run.id).progress["done"] == 2


def cancels_itself(job):
    """Asks for its own cancel, then reports: what another process would do, in one thread."""
    jobs.cancel(job.id)
    job.report_progress(done=1)
    return {"not": "reached"}


@pytest.mark.django_db
def test_the_worker_fails_a_cancelled_run_with_error_cancelled_runs_on_fail_and_never_retries_it(temporary_type):
    failed = []
    # retry_on=(Exception,) would retry a JobCancelled if the worker let it through as an ordinary error.
    temporary_type("test_cancels_itself", cancels_itself, retry_on=(Exception,), max_attempts=3,
                   on_fail=lambda job: failed.append(job.id))
    job = queue.enqueue("test_cancels_itself", org_id="demo")

    assert run_burst() == 1

    job.refresh_from_db()
    assert (job.status, job.error, job.attempts) == (JobStatus.FAILED, "cancelled", 1)
    assert "JobCancelled" in job.traceback
    assert failed == [job.id]


@pytest.mark.django_db
@pytest.mark.parametrize("then, status, error", [
    ("raise", JobStatus.FAILED, "cancelled"),  # told, whatever it raises on its way out ends it as told
    ("return", JobStatus.DONE, None),  # told, but it finished its work: its result stands
])
def test_a_handler_that_catches_the_cancel(temporary_type, then, status, error):
    def handler(job):
        try:
            cancels_itself(job)
        except jobs.JobCancelled:
            if then == "raise":
                raise ValueError("cleanup failed") from None
        return {"finished": True}

    temporary_type("test_catches_cancel", handler, on_fail=lambda job: None)
    job = queue.enqueue("test_catches_cancel", org_id="demo")
    assert run_burst() == 1
    job.refresh_from_db()
    assert (job.status, job.error) == (status, error)


@pytest.mark.django_db(transaction=True)
def test_a_heartbeat_that_finds_the_cancel_raises_job_cancelled_in_the_handlers_thread():
    """The heartbeat runs in a thread of its own; the handler, never reporting, is told asynchronously."""
    queue.enqueue("noop", org_id="demo")
    job = queue.claim()
    jobs.cancel(job.id)
    run = timeouts.watch(job, None)
    beats = []

    def beat():
        beats.append(queue.heartbeat(job))
        connection.close()  # this thread's own

    heartbeat = threading.Thread(target=beat)

    def handler(job):
        # Pure Python, no report: only an exception raised into this thread ends it.
        heartbeat.start()
        wait_for(lambda: False, timeout=30, interval=0.01, message="the cancel to arrive")

    with pytest.raises(jobs.JobCancelled):
        run.call(handler, job)

    heartbeat.join(10)
    assert beats == [True]  # still this run's job: it is cancelled, not lost
    assert job.cancel_requested.is_set() and run.told == timeouts.CANCELLED
    assert timeouts.watched(job) is None


# -- the admin's Cancel ------------------------------------------------------------------------------------------


def run_action(client, jobs_selected):
    return client.post(ALL_JOBS_URL, {"action": "cancel_selected_jobs",
                                  "_selected_action": [str(j.pk) for j in jobs_selected]}, follow=True)


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


@pytest.mark.django_db
def test_the_admin_cancel_fails_queued_jobs_asks_running_ones_and_skips_finished_ones(admin_client, failures):
    queued = JobFactory(type="test_cancellable")
    running = JobFactory(running=True, type="test_cancellable")
    done = JobFactory(done=True, type="test_cancellable")

    response = run_action(admin_client, [queued, running, done])

    statuses = {j.pk: (j.status, j.error, j.cancel_requested_at is not None) for j in Job.objects.all()}
    assert statuses == {queued.pk: (JobStatus.FAILED, "cancelled", True),
                        running.pk: (JobStatus.RUNNING, None, True),
                        done.pk: (JobStatus.DONE, None, False)}
    assert failures == [queued.pk]
    assert messages_of(response) == [
        "1 job cancelled before starting; 1 job running asked to stop (at the next heartbeat or progress report); "
        f"1 skipped ({cancellation.NOT_LIVE})"
    ]


@pytest.mark.django_db
def test_the_admin_cancel_never_reaches_another_orgs_job(client):
    user = UserFactory(is_staff=True, org=OrgFactory(id="alpha"))
    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_job", "change_job"]))
    client.force_login(user)
    ours = JobFactory(org_id="alpha")
    theirs = JobFactory(org_id="bravo")

    response = run_action(client, [ours, theirs])

    assert Job.objects.get(pk=ours.pk).status == JobStatus.FAILED
    assert Job.objects.get(pk=theirs.pk).status == JobStatus.QUEUED
    assert Job.objects.get(pk=theirs.pk).cancel_requested_at is None
    assert messages_of(response) == ["1 job cancelled before starting"]
    assert client.get(reverse("admin:jobs_job_change", args=[theirs.pk])).status_code == 404


@pytest.mark.django_db
def test_the_admin_cancel_needs_the_change_permission(client):
    user = UserFactory(is_staff=True, org=OrgFactory(id="demo"))
    user.user_permissions.add(Permission.objects.get(codename="view_job"))
    client.force_login(user)
    queued = JobFactory()

    response = client.get(ALL_JOBS_URL)
    run_action(client, [queued])

    assert "cancel_selected_jobs" not in response.content.decode()
    assert Job.objects.get(pk=queued.pk).status == JobStatus.QUEUED


@pytest.mark.django_db
@pytest.mark.parametrize("ending", ["retry", "swept", "database lost"])
def test_a_run_asked_to_stop_that_ends_before_it_is_told_is_not_put_back(ending, failures):
    """A retry, the sweep or a lost connection would queue the job again: asked to stop, it fails 'cancelled'."""
    from jobs import finish

    job = JobFactory(running=True, type="test_cancellable")
    assert cancellation.cancel(job.id) is True

    if ending == "retry":
        status = finish.finish_retry(job, 3, "remote busy")
    else:
        status = finish.interrupt(job, 3, by_database=ending == "database lost")

    job.refresh_from_db()
    assert status == "failed"
    assert (job.status, job.error, job.run_after) == (JobStatus.FAILED, "cancelled", None)
    assert failures == [job.id]
    assert run_burst() == 0
