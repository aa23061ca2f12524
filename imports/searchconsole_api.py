"""Search Console Search Analytics into ``UrlMetric``: the ``import_api`` job.

One API import pulls ``searchanalytics.query`` for a site target's property over
the Import's period, by page (and by date unless ``by_date`` is false), page after
page of ``row_limit`` rows until a page comes back short. ``startRow`` is the
checkpoint: each page's rows and ``progress.start_row`` (with the running counts)
commit in one transaction, so a run killed at any point resumes at the first page
not yet written, and the natural key keeps a re-fetched page from doubling rows.

The HTTP and token side (retries, errors, the test hooks) is ``searchconsole_client``.
"""

from __future__ import annotations

import logging
from datetime import date, timedelta
from uuid import uuid4

from django.db import transaction

from jobs.queue import enqueue
from jobs.registry import register
from seoinsight.models import SEARCH_CONSOLE_SETTLING_DAYS

from . import ingest
from .job_hooks import import_failed, import_requeued, mark_done
from .models import Import, ImportKind, ImportOrigin, ImportStatus
from .searchconsole_client import API_MAX_ROWS, SearchAnalytics, SearchConsoleError

log = logging.getLogger(__name__)

ROW_LIMIT = API_MAX_ROWS
# Search Console data settles after about two days; the default period ends before that.
DEFAULT_DAYS = 28
SETTLING_DAYS = SEARCH_CONSOLE_SETTLING_DAYS


def settled_period(start: date | None = None, end: date | None = None) -> tuple[date, date]:
    """The period a pull covers by default: up to the last settled day, DEFAULT_DAYS long (both ends included)."""
    end = end or date.today() - timedelta(days=SETTLING_DAYS)
    start = start or end - timedelta(days=DEFAULT_DAYS - 1)
    return start, end


def parsed_rows(rows: list[dict], first_row: int):
    """API rows as ``ingest.prepare`` reads them; ``number`` counts from 1 over the whole result."""
    for offset, row in enumerate(rows):
        keys = row["keys"]
        yield ingest.ParsedRow(
            number=first_row + offset + 1,
            url=keys[0],
            date=date.fromisoformat(keys[1]) if len(keys) > 1 else None,
            clicks=int(row.get("clicks", 0)),
            impressions=int(row.get("impressions", 0)),
            ctr=float(row["ctr"]) if "ctr" in row else None,  # already a fraction
            position=float(row["position"]) if "position" in row else None,
        )


class PullAlreadyQueued(Exception):
    """A live pull holds the dedup key asked for: nothing was queued (the transaction is rolled back)."""

    def __init__(self, job):
        super().__init__(f"job {job.id} holds the key {job.dedup_key!r}")
        self.job = job


def create_api_import(site_target, period_start: date, period_end: date, *, created_by=None,
                      by_date: bool = True, row_limit: int = ROW_LIMIT, dedup_key: str | None = None) -> Import:
    """Create an API Import and its job, in one transaction.

    ``dedup_key`` (default: the Import's own) lets a caller say which pulls are one: while a live job holds
    it, ``PullAlreadyQueued`` is raised and neither the Import nor a job is left behind.
    """
    with transaction.atomic():
        imp = Import.objects.create(
            org_id=site_target.org_id, site_target=site_target, kind=ImportKind.API,
            origin=ImportOrigin.API, uid=uuid4().hex, period_start=period_start, period_end=period_end,
            created_by=created_by,
        )
        enqueue_api_import(imp, by_date=by_date, row_limit=row_limit, dedup_key=dedup_key)
    return imp


def enqueue_api_import(imp: Import, *, by_date: bool = True, row_limit: int = ROW_LIMIT,
                       dedup_key: str | None = None):
    """Queue the job for an API Import; call inside the transaction that created it."""
    job = enqueue("import_api", org_id=imp.org_id,
                  payload={"import_id": imp.pk, "site_target_id": imp.site_target_id,
                           "by_date": by_date, "row_limit": row_limit},
                  dedup_key=dedup_key or f"import_api:{imp.pk}")
    if job.payload.get("import_id") != imp.pk:
        raise PullAlreadyQueued(job)
    Import.objects.filter(pk=imp.pk).update(job=job)
    imp.job = job
    return job


@register("import_api", dedup_scope="active", on_fail=import_failed, on_requeue=import_requeued)
def import_api(job):
    """Pull Search Analytics for the Import's period into UrlMetric, page by page, resumably."""
    imp = Import.objects.select_related("site_target").get(pk=job.payload["import_id"], org_id=job.org_id)
    target = imp.site_target
    if imp.kind != ImportKind.API:
        raise SearchConsoleError(f"import {imp.pk} is a {imp.get_kind_display()} import, not an API pull")
    if imp.period_start is None or imp.period_end is None:
        raise SearchConsoleError("an API import needs a period (period_start and period_end)")
    if not target.search_console_property:
        raise SearchConsoleError(f"site target {target.pk} ({target}) has no Search Console property")
    account_info = target.service_account_info()
    if account_info is None:
        raise SearchConsoleError(f"site target {target.pk} ({target}) has no Search Console credentials")
    by_date = bool(job.payload.get("by_date", True))
    row_limit = int(job.payload.get("row_limit", ROW_LIMIT))
    if not 1 <= row_limit <= ROW_LIMIT:
        raise SearchConsoleError(f"row_limit must be between 1 and {ROW_LIMIT}, not {row_limit}")

    Import.objects.filter(pk=imp.pk, status=ImportStatus.QUEUED).update(status=ImportStatus.RUNNING)
    checkpoint = job.progress or {}
    start_row = int(checkpoint.get("start_row", 0))
    counts = ingest.Counts.from_dict(checkpoint.get("counts"))
    scope = ingest.Scope(
        url_prefix=target.url_prefix,
        search_console_property=target.search_console_property,
        period=(imp.period_start, imp.period_end),  # for rows without a date (by_date false)
    )
    if start_row:
        log.info("job=%s import=%s resuming at startRow %s", job.id, imp.pk, start_row)

    client = SearchAnalytics.connect(target.search_console_property, account_info, job_id=job.id)
    pages = client.pages(imp.period_start, imp.period_end, by_date=by_date, row_limit=row_limit,
                         start_row=start_row)
    for first_row, rows in pages:
        if not rows:
            break
        next_row = first_row + len(rows)

        def write_page(rows=rows, first_row=first_row, next_row=next_row):  # bound now: B023
            # One upsert for the page: one statement takes its locks in key order (see ingest).
            records = ingest.prepare(parsed_rows(rows, first_row), scope, counts)
            ingest.write(imp.site_target_id, imp.pk, records, counts, scope)
            # Same transaction as the rows: the checkpoint never runs ahead of the data.
            job.report_progress(done=next_row, start_row=next_row, counts=counts.as_dict())

        ingest.write_batch(write_page, counts, job_id=job.id, what=f"API rows {first_row + 1} to {next_row}")
        log.info("job=%s import=%s startRow %s: %s rows", job.id, imp.pk, first_row, len(rows))

    return mark_done(imp, counts, counts.as_dict())
