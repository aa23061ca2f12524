"""The portfolio's statements: every figure of every site aggregated in PostgreSQL, in one statement.

They read the site page's precomputed day sums, never the metric rows: the view
``imports_sitepage_counted_day_sums`` (imports migration 0011: each day of a page counts once) for the
figures, and the table ``imports_sitepage_day_sums`` (0006) for the newest day with data, counted or
not. A row counts in a period when its whole period lies inside it, as on the site page. Each
statement's first line names it (``-- portfolio.FIGURES``), for pg_stat_activity and the benchmark.
"""

from insight.sitepage.sql import DAY_SUMS, resums

COUNTED = "imports_sitepage_counted_day_sums"
ALL_DAYS = "imports_sitepage_day_sums"

# The newest day with data of any site of the org, not after today: where the presets' "last N days" end.
# One probe of the day sums' key (site target, period_end, …) per target, read backwards.
NEWEST_DAY = f"""
-- portfolio.NEWEST_DAY
SELECT max(newest.period_end)
FROM seoinsight_sitetarget AS t
JOIN seoinsight_site AS s ON s.id = t.site_id AND s.org_id = %(org)s
CROSS JOIN LATERAL (
    SELECT m.period_end FROM {ALL_DAYS} AS m
    WHERE m.site_target_id = t.id AND m.period_end <= %(today)s
    ORDER BY m.period_end DESC LIMIT 1
) AS newest
"""

# The day sums of one period ({which}: true for the period shown) of the targets, per site.
_PERIOD_ROWS = f"""
    SELECT t.site_id, {{which}} AS current, m.period_start, m.period_end, {DAY_SUMS}
    FROM targets AS t
    JOIN {COUNTED} AS m ON m.site_target_id = t.id
    WHERE m.period_end BETWEEN %({{start}})s AND %({{end}})s AND m.period_start >= %({{start}})s"""

# Per site of the org whose domain matches %(pattern)s (NULL: every site), one row: its sums in the
# period shown and in the one compared with (``previous_*``: NULL without data), its daily clicks in
# the period shown (``days`` and ``day_clicks``, in day order; rows covering several days are in the
# sums but are no day), and its newest day with data (``newest``). Both periods are read apart (UNION
# ALL): a year before is not next to the period shown, and a long custom period may overlap it.
FIGURES = f"""
-- portfolio.FIGURES
WITH sites AS (
    SELECT s.id, s.domain FROM seoinsight_site AS s
    WHERE s.org_id = %(org)s AND (%(pattern)s::text IS NULL OR s.domain ILIKE %(pattern)s)
), targets AS (
    SELECT t.id, t.site_id FROM seoinsight_sitetarget AS t JOIN sites AS s ON s.id = t.site_id
), parts AS ({_PERIOD_ROWS.format(which="true", start="start", end="end")}
    UNION ALL{_PERIOD_ROWS.format(which="false", start="previous_start", end="previous_end")}
), sums AS (
    SELECT p.site_id, p.current, {resums("p")}
    FROM parts AS p
    GROUP BY p.site_id, p.current
), days AS (
    SELECT p.site_id, p.period_start AS day, sum(p.clicks) AS clicks
    FROM parts AS p
    WHERE p.current AND p.period_start = p.period_end
    GROUP BY p.site_id, p.period_start
), sparks AS (
    SELECT d.site_id, array_agg(d.day ORDER BY d.day) AS days, array_agg(d.clicks ORDER BY d.day) AS day_clicks
    FROM days AS d
    GROUP BY d.site_id
), newest AS (
    SELECT t.site_id, max(n.period_end) AS newest
    FROM targets AS t
    CROSS JOIN LATERAL (
        SELECT m.period_end FROM {ALL_DAYS} AS m
        WHERE m.site_target_id = t.id AND m.period_end <= %(today)s
        ORDER BY m.period_end DESC LIMIT 1
    ) AS n
    GROUP BY t.site_id
)
SELECT s.id AS site_id, s.domain, n.newest, k.days, k.day_clicks,
       c.clicks, c.impressions, c.rows,
       c.ctr_clicks::float8 / nullif(c.ctr_impressions, 0) AS ctr,
       (c.position_sum / nullif(c.position_weight, 0))::float8 AS position,
       p.clicks AS previous_clicks, p.impressions AS previous_impressions, p.rows AS previous_rows,
       p.ctr_clicks::float8 / nullif(p.ctr_impressions, 0) AS previous_ctr,
       (p.position_sum / nullif(p.position_weight, 0))::float8 AS previous_position
FROM sites AS s
LEFT JOIN sums AS c ON c.site_id = s.id AND c.current
LEFT JOIN sums AS p ON p.site_id = s.id AND NOT p.current
LEFT JOIN sparks AS k ON k.site_id = s.id
LEFT JOIN newest AS n ON n.site_id = s.id
ORDER BY s.domain, s.id
"""
