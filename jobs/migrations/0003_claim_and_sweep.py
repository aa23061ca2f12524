"""Indexes that keep the guarded claim's cost flat (jobs.sql.claim_guarded).

- ``jobs_queued_type_created``: the oldest queued jobs of one type, so a type
  is never found by reading through another type's backlog.
- ``jobs_queued_guard_site_id``: queued jobs by (type, payload -> 'site_id'),
  the skip scan over distinct values that the one_running_per guard uses when
  a running site's backlog fills the front of the queue.

Both are partial (queued rows only): the table grows, the queue stays small.
Built CONCURRENTLY, so a large jobs table keeps taking writes meanwhile.
"""

from django.db import migrations

INDEXES = {
    "jobs_queued_type_created": "(type, created_at) WHERE status = 'queued'",
    "jobs_queued_guard_site_id": "(type, (payload -> 'site_id'), created_at) WHERE status = 'queued'",
}


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ('jobs', '0002_finish_and_fencing'),
    ]

    operations = [
        migrations.RunSQL(
            sql=f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON jobs {definition}",
            reverse_sql=f"DROP INDEX CONCURRENTLY IF EXISTS {name}",
        )
        for name, definition in INDEXES.items()
    ]
