import pytest

from jobs.queue import enqueue
from jobs.models import Job


@pytest.mark.django_db
def test_enqueue_creates_a_queued_job_with_database_defaults():
    job = enqueue("noop", org_id="demo")
    fresh = Job.objects.get(pk=job.id)
    assert fresh.status == "queued"
    assert fresh.id.version == 7
    assert fresh.created_at is not None
