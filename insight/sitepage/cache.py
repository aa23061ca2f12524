"""The top pages of the site page's presets, precomputed per site target: the ``refresh_site_page`` job.

Summing a period's rows per URL is what a large site's page spends its time on (two million rows
for the last 90 days and the 90 before). The job sums them once per target and preset period into
``imports_sitepage_url_sums`` (migration 0006), together with the target's data version read in the
same snapshot. A trigger gives a target a new version in the transaction that changes its rows, so
the page (``figures.stale_targets``) reads the sums only while nothing has changed since; otherwise
it sums the rows itself, exactly, and queues this job: one queued per target at a time. Both sum the
rows the "counted once" rule keeps (``sql.COUNTED``); a change of which rows it keeps gives a new version too.
"""

from __future__ import annotations

from contextlib import contextmanager

from django.db import DatabaseError, connection
from django.utils import timezone

import jobs
from imports.conflicts import transient_conflict
from jobs.queue import enqueue
from jobs.registry import register
from seoinsight import periods
from seoinsight.models import Site, SiteTarget

from . import figures, sql

JOB_TYPE = "refresh_site_page"


def refresh_later(site: Site, targets: list[int]) -> None:
    """Queue the refresh of each target's top pages; a target's refresh already queued covers it."""
    for target in targets:
        enqueue(JOB_TYPE, org_id=site.org_id, payload={"site_id": site.pk, "site_target_id": target},
                dedup_key=f"{JOB_TYPE}:{target}")


def refresh_after_import(imp) -> None:
    """imports' hook for a done import that wrote rows: its target's top pages are refreshed."""
    refresh_later(imp.site_target.site, [imp.site_target_id])


def refresh(target: SiteTarget, wanted: list[periods.Period] | None = None) -> list[periods.Period]:
    """Replace the target's precomputed top pages by those of ``wanted`` (default: every preset's period).

    The presets' periods are those of the site's targets together and of this one alone: they may
    end on different days. Read and written in one snapshot, with the version that snapshot sees.
    """
    with figures.snapshot(writes=True), connection.cursor() as cursor:
        if wanted is None:
            today = timezone.localdate()
            site_targets = list(SiteTarget.objects.filter(site_id=target.site_id).values_list("pk", flat=True))
            wanted = periods.preset_periods(today, [figures.newest_day(site_targets, today),
                                                    figures.newest_day([target.pk], today)])
        # The version before the sums: a change committed after this read gives the target a newer one, so these
        # sums are never taken for current ones (even where the caller's transaction is READ COMMITTED).
        cursor.execute(sql.VERSION, {"target": target.pk})
        found = cursor.fetchone()
        cursor.execute(sql.CLEAR_CACHED, {"target": target.pk})
        for period in wanted:
            choice = periods.Choice("custom", period, period.previous())
            cursor.execute(sql.CACHE_PERIOD, figures.statement_params(
                [target.pk], choice, target=target.pk, version=found and found[0]))
    return wanted


# The advisory-lock namespace of a target's refresh (key: the target's id).
LOCK_NAMESPACE = 0x1A01


@contextmanager
def one_refresh_at_a_time(target_id: int):
    """Two refreshes of one target would replace each other's rows: the second waits for the first.

    A session lock taken before the refresh's snapshot, so the one that waited reads what the first wrote;
    a worker that dies releases it with its connection. (Not the queue's ``one_running_per`` guard: a
    guarded type puts every claim of every worker on the slower, guarded path.)
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s, %s)", [LOCK_NAMESPACE, target_id])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_NAMESPACE, target_id])


@register(JOB_TYPE)
def refresh_site_page(job):
    """Precompute one target's top pages for every preset; a target deleted since needs nothing."""
    target = SiteTarget.objects.filter(pk=job.payload["site_target_id"], site__org_id=job.org_id).first()
    if target is None:
        return {"site_target_id": job.payload["site_target_id"], "periods": []}
    try:
        with one_refresh_at_a_time(target.pk):
            done = refresh(target)
    except DatabaseError as exc:
        # The target's rows were deleted while this read them: nothing is lost by reading again.
        if transient_conflict(exc) is None:
            raise
        raise jobs.Retry(f"refreshing site target {target.pk} collided with a change of its rows") from exc
    return {"site_target_id": target.pk, "periods": [str(period) for period in done]}
