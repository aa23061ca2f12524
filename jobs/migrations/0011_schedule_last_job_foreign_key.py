"""``jobs_schedule.last_job_id`` becomes a foreign key to ``jobs``, ON DELETE SET NULL in the database.

A prune deletes jobs with one SQL statement (``jobs.retention``), which Django's ``on_delete`` never
sees: the database's own action clears the pointer, so the Schedules page never links to a deleted job.
Django writes no ON DELETE clause, hence the constraint by hand; the model's field says the same for
the ORM's deletes.

Safe on a table with stale ids: both tables are locked first (in the order ``schedules.take_period``
takes them, so no deadlock with a worker), the ids of jobs already pruned are cleared, then the
constraint is added and checked. ``jobs_schedule`` holds a row per periodic type: all of it is brief.
"""

import django.db.models.deletion
from django.db import migrations, models

FORWARD = [
    "LOCK TABLE jobs_schedule, jobs IN SHARE ROW EXCLUSIVE MODE",
    """UPDATE jobs_schedule AS s SET last_job_id = NULL
       WHERE s.last_job_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM jobs AS j WHERE j.id = s.last_job_id)""",
    """ALTER TABLE jobs_schedule ADD CONSTRAINT jobs_schedule_last_job_id_fk_jobs_id
       FOREIGN KEY (last_job_id) REFERENCES jobs (id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED""",
    # Each job deleted looks its referrers up: by this index, not by a scan (Django indexes foreign keys).
    "CREATE INDEX jobs_schedule_last_job_id_idx ON jobs_schedule (last_job_id)",
]
BACKWARD = [
    "DROP INDEX jobs_schedule_last_job_id_idx",
    "ALTER TABLE jobs_schedule DROP CONSTRAINT jobs_schedule_last_job_id_fk_jobs_id",
]


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0010_state_rules_trigger"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(sql=FORWARD, reverse_sql=BACKWARD)],
            state_operations=[
                migrations.RemoveField(model_name="schedule", name="last_job_id"),
                migrations.AddField(
                    model_name="schedule",
                    name="last_job",
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                                            related_name="+", to="jobs.job"),
                ),
            ],
        ),
    ]
