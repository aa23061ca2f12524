"""The outbox's periodic duty (outbox.watch.wake_if_due): a sender is woken when an entry is claimable and
none is queued or running — and only then; its statement is served by indexes."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from jobs.models import Job
from outbox import sql, watch
from outbox.models import Entry
from outbox.wake import DEDUP_KEY, JOB_TYPE
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db

NOW, PAST, FUTURE = "now", "past", "future"


def entry_in(state, when):
    at = {NOW: timezone.now(), PAST: timezone.now() - timedelta(minutes=5),
          FUTURE: timezone.now() + timedelta(minutes=5)}[when]
    if state == "waiting":
        Entry.objects.update(next_attempt_at=at)
    else:
        Entry.objects.update(state="sending", claimed_by="w", claim_token="00000000-0000-0000-0000-000000000001",
                             lease_until=at)


@pytest.mark.parametrize(("state", "when", "sender", "woken"), [
    ("waiting", PAST, None, True),  # due, nobody sends it: the stall of issue 19
    ("waiting", FUTURE, None, False),  # its retry is not due yet
    ("sending", PAST, None, True),  # its sender died: the lease is over
    ("sending", FUTURE, None, False),  # its sender holds it
    ("waiting", PAST, "queued", False),  # a sender will run
    ("waiting", PAST, "running", False),  # a sender runs and will claim it
    ("waiting", PAST, "done", True),  # an old sender is no sender
])
def test_a_sender_is_woken_only_for_a_claimable_entry_nobody_is_sending(downstream, held, state, when, sender,
                                                                        woken):
    held(1)
    Job.objects.filter(type=JOB_TYPE).delete()
    entry_in(state, when)
    if sender == "queued":
        JobFactory(type=JOB_TYPE, dedup_key=DEDUP_KEY)
    elif sender is not None:
        JobFactory(type=JOB_TYPE, **{sender: True})

    assert watch.wake_if_due() is woken
    queued = Job.objects.filter(type=JOB_TYPE, status="queued").count()
    assert queued == (1 if woken or sender == "queued" else 0)


def test_with_the_outbox_off_the_duty_asks_nothing(settings, django_assert_num_queries):
    settings.DOWNSTREAM_URL = ""
    with django_assert_num_queries(0):
        assert watch.wake_if_due() is False


def test_its_statement_reads_indexes_not_the_jobs_table(downstream):
    """With the history a deployment has (thousands of finished senders), the running-sender check is
    served by the running jobs' partial index; on a near-empty table the planner may take any index."""
    org_id = JobFactory(type=JOB_TYPE, done=True).org_id
    with connection.cursor() as cursor:
        cursor.execute("""
            INSERT INTO jobs (org_id, type, status, attempts, started_at, finished_at, created_at)
            SELECT %s, %s, 'done', 1, now(), now(), now() FROM generate_series(1, 5000)
        """, [org_id, JOB_TYPE])
        cursor.execute("ANALYZE jobs")
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql.SENDER_WANTED, {"dedup_key": DEDUP_KEY, "job_type": JOB_TYPE})
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Seq Scan on jobs" not in plan, plan
    assert "jobs_dedup_key" in plan and "jobs_running_type_started" in plan, plan
