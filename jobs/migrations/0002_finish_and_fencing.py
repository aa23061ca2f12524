"""Fencing that survives a requeue, keys that come back with a job, tracebacks apart from reports.

- ``attempts`` stays the fencing token (never lowered again); ``uncounted_attempts``
  says how many claims the budget forgives, ``outages`` how many runs the
  database cut off.
- ``enqueued_key`` keeps the dedup key after it is released, so a job put back
  in the queue takes it back.
- ``traceback`` holds a failed run's traceback (staff only); existing failed
  jobs have theirs moved out of ``report``, which tenants see.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0001_initial'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='uncounted_attempts',
            field=models.IntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name='job',
            name='outages',
            field=models.IntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name='job',
            name='enqueued_key',
            field=models.TextField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='job',
            name='traceback',
            field=models.TextField(blank=True, null=True),
        ),
        migrations.AddConstraint(
            model_name='job',
            constraint=models.CheckConstraint(
                condition=models.Q(('outages__gte', 0), ('uncounted_attempts__gte', 0),
                                   ('uncounted_attempts__lte', models.F('attempts'))),
                name='jobs_uncounted_within_attempts',
            ),
        ),
        migrations.RunSQL(
            sql="UPDATE jobs SET enqueued_key = dedup_key WHERE dedup_key IS NOT NULL",
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.RunSQL(
            sql="""
                UPDATE jobs SET traceback = report ->> 'traceback', report = NULL
                WHERE status = 'failed' AND jsonb_typeof(report) = 'object' AND report ? 'traceback'
            """,
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]
