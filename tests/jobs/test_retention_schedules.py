"""A schedule's last job is a foreign key the database clears (ON DELETE SET NULL): a prune takes that job like any
other, and the migration that made the key clears the ids of jobs pruned before it."""

import importlib
import uuid

import pytest
from django.db import connection

from jobs import retention
from jobs.models import Job, Schedule
from tests.jobs.test_prune import finished, prune

pytestmark = pytest.mark.django_db

MIGRATION = importlib.import_module("jobs.migrations.0011_schedule_last_job_foreign_key")


def on_delete_of_last_job() -> str | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT confdeltype FROM pg_constraint WHERE conrelid = 'jobs_schedule'::regclass "
                       "AND confrelid = 'jobs'::regclass AND contype = 'f'")
        row = cursor.fetchone()
    return row and row[0]


def test_the_schedules_last_job_is_pruned_and_its_pointer_cleared_by_the_database():
    old = finished("done", days=15, type="test_every_minute")
    imported = finished("done", days=15, type="import_csv")
    Schedule.objects.create(name="test_every_minute", last_period=old.created_at, last_job_id=old.pk)

    assert on_delete_of_last_job() == "n"  # SET NULL
    assert ("jobs_schedule", "last_job_id") not in retention.referencing_columns()
    assert ("imports_import", "job_id") in retention.referencing_columns()
    run = prune()

    assert not Job.objects.filter(pk__in=[old.pk, imported.pk]).exists()
    assert run.deleted[("done", "test_every_minute")] == 1
    assert Schedule.objects.get(name="test_every_minute").last_job_id is None


def test_the_migration_clears_ids_of_jobs_already_pruned_then_adds_the_key():
    kept = finished("done", days=1)
    # The table as it was before the migration: a plain uuid column, one id of a job pruned long ago.
    with connection.cursor() as cursor:
        for statement in MIGRATION.BACKWARD:
            cursor.execute(statement)
        cursor.execute("INSERT INTO jobs_schedule (name, last_period, last_job_id) VALUES "
                       "('gone', now(), %s), ('alive', now(), %s), ('never', NULL, NULL)", [uuid.uuid4(), kept.pk])
    assert on_delete_of_last_job() is None

    with connection.cursor() as cursor:
        for statement in MIGRATION.FORWARD:
            cursor.execute(statement)

    assert dict(Schedule.objects.values_list("name", "last_job_id")) == {"gone": None, "alive": kept.pk,
                                                                         "never": None}
    assert on_delete_of_last_job() == "n"
