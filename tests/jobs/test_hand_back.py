"""finish.hand_back: a run its worker gives up for another run's fault (it exits for a handler it cannot stop)
goes back to the queue uncharged — its attempt not counted, no on_fail — by the fenced put-back statement."""

import pytest

from jobs import cancellation, finish, queue, registry
from jobs.models import Job, JobStatus

pytestmark = pytest.mark.django_db

TYPE = "test_hand_back"


@pytest.fixture
def on_fail_calls(temporary_type):
    calls = []
    temporary_type(TYPE, lambda job: None, max_attempts=1, on_fail=lambda job: calls.append(job.id))
    return calls


def claimed() -> Job:
    job = queue.claim(worker_id="test:1")
    assert job is not None and job.type == TYPE
    return job


def test_a_handed_back_run_is_queued_with_its_attempt_not_counted_and_no_on_fail(on_fail_calls):
    queue.enqueue(TYPE, org_id="demo")
    run = claimed()

    assert finish.hand_back(run) == "queued"

    job = Job.objects.get(pk=run.pk)
    assert (job.status, job.attempts, job.uncounted_attempts, job.outages, job.error) == (JobStatus.QUEUED, 1, 1,
                                                                                          0, None)
    assert on_fail_calls == []
    # Its one attempt is still to run: a crash of that next run is what spends it.
    again = claimed()
    assert finish.interrupt(again, registry.get(TYPE).max_attempts) == "failed"
    assert on_fail_calls == [run.pk]


def test_a_handed_back_run_whose_cancel_was_requested_fails_cancelled(on_fail_calls):
    queue.enqueue(TYPE, org_id="demo")
    run = claimed()
    cancellation.cancel(run.pk)  # running: asked to stop, not yet told

    assert finish.hand_back(run) == "failed"

    job = Job.objects.get(pk=run.pk)
    assert (job.status, job.error) == (JobStatus.FAILED, "cancelled")
    assert on_fail_calls == [run.pk]


def test_handing_back_a_run_that_lost_its_job_changes_nothing(on_fail_calls):
    queue.enqueue(TYPE, org_id="demo")
    run = claimed()
    assert finish.hand_back(run) == "queued"
    newer = claimed()

    assert finish.hand_back(run) is None  # the older run's fence: the job is the newer run's

    job = Job.objects.get(pk=run.pk)
    assert (job.status, job.attempts, job.uncounted_attempts) == (JobStatus.RUNNING, newer.attempts, 1)
