"""map_reconcile: make every metric of a target point at its Page.

Set-based and idempotent: a second run, or two runs at once on different
workers, find nothing left to do (ON CONFLICT and the page_id IS NULL filter).

Both statements take their locks in natural-key order, the order an import's
upsert takes them in: a reconcile running beside imports (or beside another
reconcile) of the same target waits for them, and never deadlocks with them.
A deadlock or serialization failure all the same rolls the pass back and runs
it again (``conflicts.retry_conflicts``).
"""

from django.db import connection

from .conflicts import retry_conflicts

# Pages for normalized URLs that have metrics but no page yet. DISTINCT ON keeps
# the first-seen spelling of the URL as the page's display URL.
CREATE_MISSING_PAGES = """
INSERT INTO seoinsight_page (site_target_id, url, url_normalized, created_at)
SELECT DISTINCT ON (m.url_normalized) m.site_target_id, m.url, m.url_normalized, now()
FROM imports_urlmetric AS m
WHERE m.site_target_id = %(target)s AND m.page_id IS NULL
ORDER BY m.url_normalized, m.id
ON CONFLICT (site_target_id, url_normalized) DO NOTHING
"""

# The rows to link are locked first, sorted (a locking SELECT locks in its
# output order); an UPDATE … FROM alone would lock them in whatever order its
# join produces. A row another transaction linked meanwhile is re-checked after
# the wait and left out (page_id IS NULL no longer holds).
LINK_METRICS = """
WITH todo AS (
    SELECT m.id, p.id AS page_id
    FROM imports_urlmetric AS m
    JOIN seoinsight_page AS p ON p.site_target_id = m.site_target_id AND p.url_normalized = m.url_normalized
    WHERE m.site_target_id = %(target)s AND m.page_id IS NULL
    ORDER BY m.url_normalized, m.period_start, m.period_end
    FOR UPDATE OF m
)
UPDATE imports_urlmetric AS m
SET page_id = todo.page_id
FROM todo
WHERE m.id = todo.id
"""


def reconcile(site_target_id: int, *, job_id=None) -> dict:
    def link() -> dict:
        with connection.cursor() as cursor:
            cursor.execute(CREATE_MISSING_PAGES, {"target": site_target_id})
            pages_created = cursor.rowcount
            cursor.execute(LINK_METRICS, {"target": site_target_id})
            metrics_linked = cursor.rowcount
        return {"site_target_id": site_target_id, "pages_created": pages_created, "metrics_linked": metrics_linked}

    return retry_conflicts(link, what=f"the map update of site target {site_target_id}", job_id=job_id)
