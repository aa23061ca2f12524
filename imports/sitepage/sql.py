"""The site page's statements: every figure is aggregated in PostgreSQL, one statement per block.

They read imports_urlmetric through ``urlmetric_site_days`` (migration 0004):
(site_target_id, period_end) INCLUDE (period_start, import_id, url_normalized and
the figures), so a period is one index range read without touching the table (an
index-only scan once autovacuum has marked the pages all-visible).

A row counts in a period when its whole period lies inside it; a row straddling an
edge counts in neither and is listed by ``EDGE_ROWS``.
Each statement's first line names it (``-- sitepage.FIGURES``), for pg_stat_activity and
the benchmark. Parameters: ``targets`` (the site's target ids), ``start``/``end`` (the
period shown), ``previous_start``/``previous_end`` (the one it is compared with).
"""

# What a row's position counts for in an average: ingest.position_weight stored it (its
# impressions, 1 without any); rows written before that column existed have it computed here.
_WEIGHT = "coalesce(m.position_weight, nullif(m.impressions, 0), 1)"

# The sums behind every figure, over metric rows ``m``. CTR is clicks over impressions of the
# rows that have both; the average position is weighted by impressions, as Search Console's.
SUMS = f"""
    sum(m.clicks) AS clicks,
    sum(m.impressions) AS impressions,
    sum(m.clicks) FILTER (WHERE m.impressions IS NOT NULL) AS ctr_clicks,
    sum(m.impressions) FILTER (WHERE m.clicks IS NOT NULL) AS ctr_impressions,
    sum(m.position * {_WEIGHT}) AS position_sum,
    sum({_WEIGHT}) FILTER (WHERE m.position IS NOT NULL) AS position_weight,
    count(*) AS rows"""

# The same sums added up again, over rows ``s`` of partial sums.
RESUMS = """
    sum(s.clicks) AS clicks, sum(s.impressions) AS impressions,
    sum(s.ctr_clicks) AS ctr_clicks, sum(s.ctr_impressions) AS ctr_impressions,
    sum(s.position_sum) AS position_sum, sum(s.position_weight) AS position_weight,
    sum(s.rows) AS rows"""

RATIOS = """
    ctr_clicks::float8 / nullif(ctr_impressions, 0) AS ctr,
    position_sum / nullif(position_weight, 0) AS position"""

# The newest day with data of the site's targets, not after today: where "last N days" end.
# One index probe per target (ORDER BY … LIMIT 1 reads the index backwards).
NEWEST_DAY = """
-- sitepage.NEWEST_DAY
SELECT max(newest.period_end)
FROM unnest(%(targets)s::bigint[]) AS t (id)
CROSS JOIN LATERAL (
    SELECT m.period_end FROM imports_urlmetric AS m
    WHERE m.site_target_id = t.id AND m.period_end <= %(today)s
    ORDER BY m.period_end DESC LIMIT 1
) AS newest
"""

# Totals, the chart and the imports behind them, in one read of both periods: rows are first
# summed per (row period, import) — a few hundred groups —, then rolled up three ways:
# level 3 the totals of each period, level 1 one point per row period (a day, or the period a
# row covers), level 2 per import with the days it covers. ``current`` tells the periods apart.
# {url} narrows it to one page (its history), read by the natural key's index.
FIGURES = f"""
-- sitepage.FIGURES
WITH parts AS (
    SELECT m.period_start, m.period_end, m.import_id, m.period_start >= %(start)s AS current, {SUMS}
    FROM imports_urlmetric AS m
    WHERE m.site_target_id = ANY(%(targets)s::bigint[])
      AND m.period_end BETWEEN %(previous_start)s AND %(end)s
      AND (m.period_start >= %(start)s
           OR m.period_start >= %(previous_start)s AND m.period_end <= %(previous_end)s)
      {{url}}
    GROUP BY m.period_start, m.period_end, m.import_id
)
SELECT r.*, {RATIOS}
FROM (
    SELECT GROUPING(s.period_start, s.import_id) AS level, s.current, s.period_start, s.period_end, s.import_id,
           min(s.period_start) AS first_day, max(s.period_end) AS last_day, {RESUMS}
    FROM parts AS s
    GROUP BY GROUPING SETS ((s.current), (s.current, s.period_start, s.period_end), (s.current, s.import_id))
) AS r
ORDER BY r.level DESC, r.current DESC, r.period_start, r.period_end, r.first_day, r.import_id
"""
ONE_PAGE = "AND m.url_normalized = %(url)s"

# Rows covering several days that cross an edge of either period, so count in neither, per
# import. Read through the partial index of such rows (``urlmetric_site_periods``): daily data has none.
EDGE_ROWS = """
-- sitepage.EDGE_ROWS
SELECT m.import_id, count(*) AS rows, min(m.period_start) AS first_day, max(m.period_end) AS last_day
FROM imports_urlmetric AS m
WHERE m.site_target_id = ANY(%(targets)s::bigint[]) AND m.period_end > m.period_start
  AND m.period_end >= %(previous_start)s AND m.period_start <= %(end)s
  AND NOT (m.period_start >= %(start)s AND m.period_end <= %(end)s)
  AND NOT (m.period_start >= %(previous_start)s AND m.period_end <= %(previous_end)s)
  {url}
GROUP BY m.import_id
ORDER BY first_day, m.import_id
"""

# Per normalized URL, the sums of the period shown; {search} narrows it to the URLs matching %(pattern)s.
_PER_URL = f"""
    SELECT m.url_normalized, {SUMS}
    FROM imports_urlmetric AS m
    WHERE m.site_target_id = ANY(%(targets)s::bigint[])
      AND m.period_end BETWEEN %(start)s AND %(end)s AND m.period_start >= %(start)s
      {{search}}
    GROUP BY m.url_normalized"""
SEARCH = "AND m.url_normalized ILIKE %(pattern)s"
_CHANGE = "(l.clicks - b.clicks)::float8 / nullif(b.clicks, 0) AS change"

# One page of the top pages (every page when %(limit)s is NULL) in {order} by a figure of the
# period shown, with how many match (``total``). The previous period's clicks are read for the
# listed URLs only, by the natural key's index: a page of 25 costs 25 short index ranges.
TOP_PAGES = f"""
-- sitepage.TOP_PAGES
WITH current AS ({_PER_URL}
), listed AS (
    SELECT c.*, {RATIOS}, count(*) OVER () AS total
    FROM current AS c
    ORDER BY {{order}} LIMIT %(limit)s OFFSET %(offset)s
), before AS (
    SELECT m.url_normalized, sum(m.clicks) AS clicks
    FROM imports_urlmetric AS m
    WHERE m.site_target_id = ANY(%(targets)s::bigint[]) AND m.url_normalized IN (SELECT url_normalized FROM listed)
      AND m.period_start >= %(previous_start)s AND m.period_end <= %(previous_end)s
    GROUP BY m.url_normalized
)
SELECT l.*, b.clicks AS previous_clicks, {_CHANGE}
FROM listed AS l LEFT JOIN before AS b USING (url_normalized)
ORDER BY {{order}}
"""

# The same with the previous period's clicks of every URL, both periods read in full and
# joined by hash: what an order by the change in clicks needs, and every row at once (the CSV),
# where TOP_PAGES would probe the natural key's index once per URL.
TOP_PAGES_ALL_PREVIOUS = f"""
-- sitepage.TOP_PAGES_ALL_PREVIOUS
WITH current AS ({_PER_URL}
), before AS (
    SELECT m.url_normalized, sum(m.clicks) AS clicks
    FROM imports_urlmetric AS m
    WHERE m.site_target_id = ANY(%(targets)s::bigint[])
      AND m.period_end BETWEEN %(previous_start)s AND %(previous_end)s AND m.period_start >= %(previous_start)s
      {{search}}
    GROUP BY m.url_normalized
), joined AS (
    SELECT l.*, {RATIOS}, b.clicks AS previous_clicks, {_CHANGE}
    FROM current AS l LEFT JOIN before AS b USING (url_normalized)
)
SELECT j.*, count(*) OVER () AS total
FROM joined AS j
ORDER BY {{order}} LIMIT %(limit)s OFFSET %(offset)s
"""
