"""Job types of the Imports module: import_csv, map_reconcile (import_api lives in searchconsole_api.py)."""

from __future__ import annotations

import logging

from jobs.queue import enqueue
from jobs.registry import register
from seoinsight import storage

from . import column_mapping, conf, ingest, reconcile
from . import searchconsole_api  # noqa: F401  (registers import_api, the Search Console pull)
from .formats import UnreadableFile, open_source
from .job_hooks import import_failed, import_requeued, mark_done
from .models import Import, ImportStatus

log = logging.getLogger(__name__)


class ImportRejected(Exception):
    """The file cannot be an import at all; the message is for the operator."""


def enqueue_import(imp: Import):
    """Queue the job for an Import; call inside the transaction that created it."""
    job = enqueue("import_csv", org_id=imp.org_id, payload={"import_id": imp.pk,
                                                              "site_target_id": imp.site_target_id},
                  dedup_key=f"import_csv:{imp.pk}")
    Import.objects.filter(pk=imp.pk).update(job=job)
    imp.job = job
    return job


@register("import_csv", dedup_scope="active", on_fail=import_failed, on_requeue=import_requeued)
def import_csv(job):
    """Stream a CSV / Excel / Search Console export into UrlMetric, resumably."""
    imp = Import.objects.select_related("site_target").get(pk=job.payload["import_id"], org_id=job.org_id)
    Import.objects.filter(pk=imp.pk, status=ImportStatus.QUEUED).update(status=ImportStatus.RUNNING)
    try:
        # A truncated or altered copy is refused, never read as "empty" or as other data.
        storage.check_stored(imp.file.name, imp.size, imp.sha256 or None)
        # The org's saved column mappings decide the columns of a header row nobody recognises (column_mapping).
        with column_mapping.applied(imp.org_id) as mappings:
            source = open_source(imp.file.path, imp.original_filename, sheet=imp.sheet or None,
                                 date_order=imp.date_order or None, default_date_order=conf.get("IMPORT_DATE_ORDER"),
                                 max_unzipped_bytes=conf.get("IMPORT_MAX_UNZIPPED_BYTES"))
    except storage.DamagedFile as exc:
        raise ImportRejected(f"{exc}: upload the file again") from None
    except UnreadableFile as exc:
        raise ImportRejected(str(exc)) from None
    except FileNotFoundError:
        raise ImportRejected("the uploaded file is missing from storage") from None

    period = source.period or ((imp.period_start, imp.period_end) if imp.period_start else None)
    if "date" not in source.columns and period is None:
        raise ImportRejected("the file has no Date column and no period was given for it")

    checkpoint = job.progress or {}
    done = int(checkpoint.get("done", 0))
    counts = ingest.Counts.from_dict(checkpoint.get("counts"))
    total = source.total_rows()
    scope = ingest.Scope(
        url_prefix=imp.site_target.url_prefix,
        search_console_property=imp.site_target.search_console_property,
        period=period,
        keyword_rows="keyword" in source.columns,
    )
    if done:
        log.info("job=%s import=%s resuming after row %s", job.id, imp.pk, done)
    for rows in ingest.batched(source.rows(skip=done), conf.get("IMPORT_BATCH_SIZE")):
        end = done + len(rows)

        def write_rows(rows=rows, end=end):  # bound now: ruff cannot see it runs within this iteration
            ingest.write(imp.site_target_id, imp.pk, ingest.prepare(rows, scope, counts), counts, scope)
            # Same transaction as the rows: the checkpoint never runs ahead of the data.
            job.report_progress(done=end, total=max(total, end), counts=counts.as_dict())

        ingest.write_batch(write_rows, counts, job_id=job.id, what=f"rows {done + 1} to {end}")
        done = end

    # What was read (columns, sheet, period, date order) and what it brought in.
    # A Search Console export's other tables (queries, devices, countries), beside its pages' rows.
    summary = source.summary()
    if (saved := mappings.used_for(source.headers)) is not None:
        summary["mapped_by"] = column_mapping.mapped_by(saved)
    report = {**counts.as_dict(), "source": summary,
              **ingest.write_dimensions(imp.site_target_id, imp.pk, source, period, job_id=job.id)}
    return mark_done(imp, counts, report)


@register("map_reconcile", dedup_scope="queue")
def map_reconcile(job):
    return reconcile.reconcile(int(job.payload["site_target_id"]), job_id=job.id)
