"""The jobs table's state rules, enforced by PostgreSQL (the trigger jobs_state_rules, migration 0010).

Each rule broken by an INSERT and by an UPDATE must be refused as a CHECK constraint would refuse it:
an IntegrityError (SQLSTATE 23514) naming the rule, and nothing written.
"""

from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from jobs.models import Job, JobStatus
from jobs.registry import MAX_PRIORITY, MIN_PRIORITY
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db

NOW = timezone.now()

# (rule, fields of a queued job changed so that only this rule is broken)
BROKEN = [
    # An unknown status breaks jobs_status_valid and, always, jobs_finished_at_matches_status
    # (neither of its cases): the latter's name comes first, so it is the one named.
    ("jobs_finished_at_matches_status", {"status": "paused"}),
    ("jobs_finished_at_matches_status", {"status": JobStatus.DONE, "started_at": NOW}),
    ("jobs_finished_at_matches_status", {"finished_at": NOW}),
    ("jobs_running_has_started_at", {"status": JobStatus.RUNNING, "attempts": 1}),
    ("jobs_attempts_non_negative", {"attempts": -1, "uncounted_attempts": -1}),
    ("jobs_priority_in_range", {"priority": MIN_PRIORITY - 1}),
    ("jobs_priority_in_range", {"priority": MAX_PRIORITY + 1}),
    ("jobs_queue_name_not_empty", {"queue_name": ""}),
    ("jobs_uncounted_within_attempts", {"attempts": 1, "uncounted_attempts": 2}),
    ("jobs_uncounted_within_attempts", {"uncounted_attempts": -1}),
    ("jobs_uncounted_within_attempts", {"outages": -1}),
]

# Rows on the edge of every rule, which must be accepted.
ACCEPTED = [
    {"priority": MIN_PRIORITY},
    {"priority": MAX_PRIORITY},
    {"attempts": 2, "uncounted_attempts": 2, "outages": 5},
    {"status": JobStatus.RUNNING, "attempts": 1, "started_at": NOW},
    {"status": JobStatus.DONE, "attempts": 1, "started_at": NOW, "finished_at": NOW},
    {"status": JobStatus.FAILED, "attempts": 1, "finished_at": NOW},
]


def refused_by(fields: dict, update: bool) -> str:
    """The rule PostgreSQL names when the row is written with ``fields``, by INSERT or by UPDATE."""
    with pytest.raises(IntegrityError) as refused, transaction.atomic():
        if update:
            Job.objects.filter(pk=JobFactory().pk).update(**fields)
        else:
            JobFactory(**fields)
    cause = refused.value.__cause__
    assert cause.sqlstate == "23514", cause
    assert cause.diag.table_name == "jobs"
    return cause.diag.constraint_name


@pytest.mark.parametrize("rule, fields", BROKEN)
@pytest.mark.parametrize("update", [False, True], ids=["insert", "update"])
def test_each_rule_refuses_the_row_and_names_itself(rule, fields, update):
    before = Job.objects.count()
    assert refused_by(fields, update) == rule
    assert Job.objects.count() == before


@pytest.mark.parametrize("fields", ACCEPTED)
def test_rows_on_the_edge_of_every_rule_are_accepted(fields):
    job = JobFactory(**fields)
    Job.objects.filter(pk=job.pk).update(**fields)
    assert Job.objects.filter(pk=job.pk, **fields).exists()


def test_a_row_breaking_two_rules_names_the_first_by_name_as_postgresql_did_for_checks():
    # PostgreSQL tried a table's CHECKs in the order of their names.
    assert refused_by({"queue_name": "", "priority": MAX_PRIORITY + 1}, update=False) == "jobs_priority_in_range"
    assert refused_by({"queue_name": "", "outages": -1}, update=True) == "jobs_queue_name_not_empty"


def test_the_message_is_the_one_a_check_constraint_gives():
    with pytest.raises(IntegrityError) as refused, transaction.atomic():
        JobFactory(queue_name="")
    assert str(refused.value).startswith(
        'new row for relation "jobs" violates check constraint "jobs_queue_name_not_empty"')


def test_the_rules_are_the_tables_trigger_and_it_is_enabled():
    """What enforces the rules exists and fires: not disabled (ALTER TABLE … DISABLE TRIGGER) nor a replica's."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT tgenabled, tgtype FROM pg_trigger WHERE tgrelid = 'jobs'::regclass"
                       " AND tgname = 'jobs_state_rules'")
        enabled, kind = cursor.fetchone()
    assert enabled == "O"  # fires in origin and local sessions
    # row level (1), before (2), insert (4), update (16)
    assert kind == 1 | 2 | 4 | 16


def test_a_finished_job_moved_back_to_queued_without_clearing_finished_at_is_refused():
    job = JobFactory(done=True)
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.filter(pk=job.pk).update(status=JobStatus.QUEUED, started_at=None,
                                             run_after=timezone.now() + timedelta(seconds=1))
    assert Job.objects.get(pk=job.pk).status == JobStatus.DONE
