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

_SUMMED = ("clicks", "impressions", "rows", "ctr_clicks", "ctr_impressions", "position_sum", "position_weight")


def _per_period(prefix: str, which: str) -> str:
    """The sums of one period's row periods ``d`` (``which``: the filter that keeps them), named ``prefix``+figure."""
    return ",\n           ".join(f"sum(d.{name}) FILTER (WHERE {which}) AS {prefix}{name}" for name in _SUMMED)


def _ratios(prefix: str) -> str:
    return (f"f.{prefix}ctr_clicks::float8 / nullif(f.{prefix}ctr_impressions, 0) AS {prefix}ctr, "
            f"(f.{prefix}position_sum / nullif(f.{prefix}position_weight, 0))::float8 AS {prefix}position")


# Per site of the org whose domain matches %(pattern)s (NULL: every site), one row: its sums in the
# period shown and in the one compared with (``previous_*``: NULL without data), its daily clicks in
# the period shown (``days`` and ``day_clicks``, in day order; rows covering several days are in the
# sums but are no day), and its newest day with data (``newest``). Both periods are read apart (UNION
# ALL): a year before is not next to the period shown, and a long custom period may overlap it. The
# rows are summed per row period once (``days``), then per site in one pass: nothing is read twice.
FIGURES = f"""
-- portfolio.FIGURES
WITH sites AS (
    SELECT s.id, s.domain FROM seoinsight_site AS s
    WHERE s.org_id = %(org)s AND (%(pattern)s::text IS NULL OR s.domain ILIKE %(pattern)s)
), targets AS (
    SELECT t.id, t.site_id FROM seoinsight_sitetarget AS t JOIN sites AS s ON s.id = t.site_id
), days AS (
    SELECT p.site_id, p.current, p.period_start, p.period_end, {resums("p")}
    FROM ({_PERIOD_ROWS.format(which="true", start="start", end="end")}
          UNION ALL{_PERIOD_ROWS.format(which="false", start="previous_start", end="previous_end")}
    ) AS p
    GROUP BY p.site_id, p.current, p.period_start, p.period_end
), figures AS (
    SELECT d.site_id,
           {_per_period("", "d.current")},
           {_per_period("previous_", "NOT d.current")},
           array_agg(d.period_start ORDER BY d.period_start)
               FILTER (WHERE d.current AND d.period_start = d.period_end) AS days,
           array_agg(d.clicks ORDER BY d.period_start)
               FILTER (WHERE d.current AND d.period_start = d.period_end) AS day_clicks
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
SELECT s.id AS site_id, s.domain, n.newest, f.days, f.day_clicks,
       f.clicks, f.impressions, f.rows, {_ratios("")},
       f.previous_clicks, f.previous_impressions, f.previous_rows, {_ratios("previous_")}
FROM sites AS s
LEFT JOIN figures AS f ON f.site_id = s.id
LEFT JOIN newest AS n ON n.site_id = s.id
ORDER BY s.domain, s.id
"""
