"""The claim's index once it orders by priority (the claim's choice of rows, now jobs.sql._choice).

``jobs_queued_priority_created``: queued rows in claim order, priority
descending then created_at, so the claim reads the first due row off the index
instead of sorting the queue. ``jobs_queued_run_after``: the soonest scheduled
job, which bounds an idle worker's wait (jobs.sql.NEXT_DUE). Partial (queued rows only), like 0003's indexes,
and built CONCURRENTLY so a large jobs table keeps taking writes meanwhile.
jobs_live_status_created stays: the sweep and the admin read running rows by it.
"""

from django.db import migrations

INDEXES = {
    "jobs_queued_priority_created": "(priority DESC, created_at) WHERE status = 'queued'",
    "jobs_queued_run_after": "(run_after) WHERE status = 'queued' AND run_after IS NOT NULL",
}


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ('jobs', '0005_run_after_priority_queue_cancel_schedule'),
    ]

    operations = [
        migrations.RunSQL(
            sql=f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON jobs {definition}",
            reverse_sql=f"DROP INDEX CONCURRENTLY IF EXISTS {name}",
        )
        for name, definition in INDEXES.items()
    ]
