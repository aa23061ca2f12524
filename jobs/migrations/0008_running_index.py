"""The live jobs' index holds running rows only (issue 22; docs/benchmarks.md measures it).

``jobs_live_status_created`` indexed every queued and running row: every enqueue wrote an entry
into it that no query of the queue reads, since queued rows are found through the ``jobs_queued_*``
indexes. ``jobs_running_type_started`` (type, started_at), partial on ``status = 'running'``,
serves what read it for running rows (the sweep, the outbox's running sender, the zombie list),
and an enqueue no longer writes to it: one index entry less per job, ~75 bytes of WAL.

A query for both live states spells them as ``status = 'queued' OR status = 'running'``
(``JobQuerySet.live``), so the planner combines a queued index and this one; an ``IN`` list
matches neither partial predicate. The new index is built CONCURRENTLY before the old one goes, so
the sweep keeps an index throughout and workers of the previous release keep working.
"""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models
from django.db.models import Q


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ("jobs", "0007_lean_indexes"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="job",
            index=models.Index(fields=["type", "started_at"], name="jobs_running_type_started",
                               condition=Q(status="running")),
        ),
        RemoveIndexConcurrently(model_name="job", name="jobs_live_status_created"),
    ]
