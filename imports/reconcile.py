"""map_reconcile: make every metric of a target point at its Page.

Set-based and idempotent: a second run, or two runs at once on different
workers, find nothing left to do (ON CONFLICT and the page_id IS NULL filter).
"""

from django.db import connection, transaction

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

LINK_METRICS = """
UPDATE imports_urlmetric AS m
SET page_id = p.id
FROM seoinsight_page AS p
WHERE m.site_target_id = %(target)s AND m.page_id IS NULL
  AND p.site_target_id = m.site_target_id AND p.url_normalized = m.url_normalized
"""


def reconcile(site_target_id: int) -> dict:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(CREATE_MISSING_PAGES, {"target": site_target_id})
        pages_created = cursor.rowcount
        cursor.execute(LINK_METRICS, {"target": site_target_id})
        metrics_linked = cursor.rowcount
    return {"site_target_id": site_target_id, "pages_created": pages_created, "metrics_linked": metrics_linked}
