"""Indexes every job paid for at each of its writes and no query reads (issue 22; docs/benchmarks.md measures them).

- ``jobs_org_id_…`` and its ``text_pattern_ops`` twin (``…_like``): Django's default for
  ``TextField(db_index=True)``. ``jobs_org_type_created`` (org_id, type, created_at DESC) starts
  with org_id and serves every lookup by org.
- ``jobs_dedup_key_…_like``: Django's LIKE twin of the unique dedup_key; no key is matched by pattern.
- ``jobs_dedup_key_key``, unique over every row (NULLs included: a btree holds them), becomes
  ``jobs_dedup_key_live``, unique WHERE dedup_key IS NOT NULL: most jobs never hold a key and a
  finished one has released it, so the index holds the live keys only.

A claim or a finish is never a HOT update (status is in every partial index's predicate), so each
writes a new entry into every full index: the three dropped here were a third of them. The new
unique index is built CONCURRENTLY before the old one goes, so enqueues are arbitrated throughout;
``ON CONFLICT (dedup_key) WHERE dedup_key IS NOT NULL`` infers either index, so workers of the
previous release keep working during a rolling deploy.
"""

from django.db import migrations, models
from django.db.models import Q

DEDUP_LIKE = "jobs_dedup_key_ac143bf5_like"  # Django's name for it: derived from table and column, so fixed


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ("jobs", "0006_claim_priority_index"),
    ]

    operations = [
        migrations.AlterField(model_name="job", name="org_id", field=models.TextField()),
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    sql="CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS jobs_dedup_key_live ON jobs (dedup_key) "
                        "WHERE dedup_key IS NOT NULL",
                    reverse_sql="DROP INDEX CONCURRENTLY IF EXISTS jobs_dedup_key_live",
                ),
                migrations.RunSQL(
                    sql="ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_dedup_key_key",
                    reverse_sql="ALTER TABLE jobs ADD CONSTRAINT jobs_dedup_key_key UNIQUE (dedup_key)",
                ),
                migrations.RunSQL(
                    sql=f"DROP INDEX CONCURRENTLY IF EXISTS {DEDUP_LIKE}",
                    reverse_sql=f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {DEDUP_LIKE} ON jobs "
                                "(dedup_key text_pattern_ops)",
                ),
            ],
            state_operations=[
                migrations.AlterField(model_name="job", name="dedup_key",
                                      field=models.TextField(blank=True, null=True)),
                migrations.AddConstraint(
                    model_name="job",
                    constraint=models.UniqueConstraint(condition=Q(dedup_key__isnull=False), fields=["dedup_key"],
                                                       name="jobs_dedup_key_live"),
                ),
            ],
        ),
    ]
