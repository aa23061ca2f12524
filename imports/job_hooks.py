"""What both import jobs (``import_csv``, ``import_api``) share: the hooks that keep
an Import in step with its job, how a run that read every row ends (``mark_done``), and
the ``map_reconcile`` queued once rows are written.

Below ``handlers`` and ``searchconsole_api``, which both register with these, so
neither imports the other for them.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import transaction
from django.utils import timezone

from jobs.queue import enqueue

from .models import Import, ImportOutcome, ImportStatus, UrlMetric
from .outcomes import decide_outcome

# Called with a done Import that wrote rows, in the transaction that marks it done. The apps that read the
# rows add theirs (insight refreshes the site page's precomputed top pages); imports knows none of them.
AFTER_ROWS_WRITTEN: list[Callable[[Import], None]] = []


def import_failed(job) -> None:
    """on_fail: the Import shows the job's error, whoever failed it (worker, sweep, operator).

    The batches it committed stay (each is whole, and a later import of the
    file updates them): map_reconcile is queued for them as after a success,
    in the same transaction as the failure when the queue runs on_fail inside it.
    """
    import_id = job.payload.get("import_id")
    with transaction.atomic():
        failed = Import.objects.filter(pk=import_id).exclude(status=ImportStatus.DONE).update(
            status=ImportStatus.FAILED, error=job.error or "failed", finished_at=timezone.now()
        )
        site_target_id = job.payload.get("site_target_id")
        if failed and UrlMetric.objects.filter(site_target_id=site_target_id, page__isnull=True,
                                               source_import_id=import_id).exists():
            enqueue_reconcile(job.org_id, site_target_id)


def import_requeued(job) -> None:
    """on_requeue: an operator requeued the failed job, so its Import is queued again."""
    Import.objects.filter(pk=job.payload.get("import_id"), status=ImportStatus.FAILED).update(
        status=ImportStatus.QUEUED, error="", finished_at=None
    )


def mark_done(imp: Import, counts, report: dict) -> dict:
    """Every row was read: the Import is done with its final counts and outcome, and map_reconcile is queued
    for the rows it wrote (none: no map update).

    Returns the job's report, with the outcome in it.
    """
    outcome = decide_outcome(read=counts.read, skipped=counts.skipped, errors=counts.errors)
    with transaction.atomic():
        Import.objects.filter(pk=imp.pk).update(
            status=ImportStatus.DONE, outcome=outcome, read=counts.read, inserted=counts.inserted,
            updated=counts.updated, skipped=counts.skipped, errors=counts.errors, error="",
            finished_at=timezone.now(),
        )
        if outcome != ImportOutcome.NOTHING_IMPORTED:
            enqueue_reconcile(imp.org_id, imp.site_target_id)
            for hook in AFTER_ROWS_WRITTEN:
                hook(imp)
    return {**report, "outcome": outcome.value}


def enqueue_reconcile(org_id: str, site_target_id: int):
    return enqueue("map_reconcile", org_id=org_id, payload={"site_target_id": site_target_id},
                   dedup_key=f"map_reconcile:{site_target_id}")
