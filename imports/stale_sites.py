"""Whose data is stale: every site of the user's orgs with its newest data, on the admin's index.

A site's newest data is the latest ``period_end`` of its targets' metrics. A site whose newest data is more than
IMPORT_STALE_AFTER_DAYS days old, or that has none, is stale: stale sites come first, the oldest first, and are
the count of the index's "Waiting for you" row. Registered on ``seoinsight.waiting`` from this app's ``ready``:
the core's index knows nothing of imports.
"""

from __future__ import annotations

from datetime import date

from django.db import connection
from django.urls import reverse

from seoinsight import waiting
from seoinsight.orgscope import reachable_orgs

from . import conf

LABEL = "sites whose data is stale"
SHOWN = 50  # lines on the index; the rest are counted, and the label links to every site

# One statement: the sites grouped with their newest day, how many there are and how many are stale, the first
# SHOWN of them. Ordered by the newest day, no data first, the stale ones are exactly the first ``stale`` rows.
# The newest day is asked per target: urlmetric_site_days (site_target_id, period_end) answers each with one probe.
NEWEST_PER_SITE = """
SELECT id, domain, org_id, newest, current_date - newest AS age,
       count(*) OVER () AS sites,
       count(*) FILTER (WHERE newest IS NULL OR newest < current_date - %s) OVER () AS stale
FROM (
    SELECT s.id, s.domain, s.org_id, max(t.newest) AS newest
    FROM seoinsight_site AS s
    LEFT JOIN LATERAL (
        SELECT (SELECT max(m.period_end) FROM imports_urlmetric AS m WHERE m.site_target_id = st.id) AS newest
        FROM seoinsight_sitetarget AS st
        WHERE st.site_id = s.id
    ) AS t ON true
    WHERE {orgs}
    GROUP BY s.id
) AS site
ORDER BY newest ASC NULLS FIRST, domain, id
LIMIT %s
"""


def newest_per_site(orgs, stale_after: int, limit: int = SHOWN) -> tuple[list[tuple], int, int]:
    """(rows of (site id, domain, org id, newest day or None, its age in days), sites, stale sites) of ``orgs``.

    ``orgs`` is ``seoinsight.orgscope.reachable_orgs``: a subquery of org ids, or None for every org.
    """
    if orgs is None:
        where, params = "true", ()
    else:
        subquery, params = orgs.query.sql_with_params()
        where = f"s.org_id IN ({subquery})"
    with connection.cursor() as cursor:
        cursor.execute(NEWEST_PER_SITE.format(orgs=where), (stale_after, *params, limit))
        found = cursor.fetchall()
    sites, stale = (found[0][5], found[0][6]) if found else (0, 0)
    return [row[:5] for row in found], sites, stale


def note(newest: date | None, age: int | None, org_id: str) -> str:
    """What a site's line says of its data.

    >>> note(date(2026, 11, 20), 14, "acme")
    'acme · newest data 2026-11-20, 14 days ago'
    >>> note(None, None, "acme")
    'acme · no data yet'
    """
    if newest is None:
        return f"{org_id} · no data yet"
    ago = {0: "today", 1: "yesterday"}.get(age, f"{age} days ago")
    return f"{org_id} · newest data {newest.isoformat()}, {ago}"


def stale_sites(request) -> waiting.Listed | None:
    """Every site of the user's orgs with its newest data, stale ones first; None for a user who may not view sites."""
    if not request.user.has_perm("seoinsight.view_site"):
        return None
    days = conf.get("IMPORT_STALE_AFTER_DAYS")
    rows, sites, stale = newest_per_site(reachable_orgs(request), days)
    lines = tuple(
        waiting.Line(domain, reverse("admin:seoinsight_site_change", args=[site_id]), note(newest, age, org_id),
                     late=index < stale)
        for index, (site_id, domain, org_id, newest, age) in enumerate(rows))
    return waiting.Listed(f"Newest data per site (stale: older than {days} days)", lines, stale, sites - len(lines))


def register() -> None:
    waiting.register_listing(LABEL, lambda: reverse("admin:seoinsight_site_changelist"), stale_sites)
