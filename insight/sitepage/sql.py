"""The site page's statements: every figure is aggregated in PostgreSQL, one statement per block.

Two sources. The metric rows, read through ``urlmetric_site_days`` (migration 0004):
(site_target_id, period_end) INCLUDE (period_start, import_id, url_normalized and the
figures), so a period is one index range read without touching the table (an index-only
scan once autovacuum has marked the pages all-visible). And the precomputed figures of
migration 0006: ``imports_sitepage_day_sums``, the sums per target, row period and import,
kept exact by triggers in the transaction that writes the rows (the totals, chart, imports
and edges of any period: a few hundred rows), and ``imports_sitepage_url_sums``, each URL's
sums per target and preset period, written by the ``refresh_site_page`` job and read only
while the target's data version is the one they were computed at (``STALE_TARGETS``).

A row counts in a period when its whole period lies inside it; a row straddling an
edge counts in neither and is listed by ``EDGE_ROWS``. Each day of a page counts once: a row
covering several days counts only when no daily row of its page (site target and
url_normalized) exists for any of its days (``COUNTED``); the day sums apply the same rule
through the view ``imports_sitepage_counted_day_sums`` (migration 0011), and ``LEFT_OUT``
lists what it left out.
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

# The same sums from a row ``m`` of imports_sitepage_day_sums: a figure no row had is unknown, as SUMS gives it.
DAY_SUMS = """
    CASE WHEN m.clicks_rows > 0 THEN m.clicks END AS clicks,
    CASE WHEN m.impressions_rows > 0 THEN m.impressions END AS impressions,
    CASE WHEN m.ctr_rows > 0 THEN m.ctr_clicks END AS ctr_clicks,
    CASE WHEN m.ctr_rows > 0 THEN m.ctr_impressions END AS ctr_impressions,
    CASE WHEN m.position_rows > 0 THEN m.position_sum END AS position_sum,
    CASE WHEN m.position_rows > 0 THEN m.position_weight END AS position_weight,
    m.rows"""


def resums(alias: str) -> str:
    """SUMS added up again, over rows ``alias`` of partial sums."""
    return f"""
    sum({alias}.clicks) AS clicks, sum({alias}.impressions) AS impressions,
    sum({alias}.ctr_clicks) AS ctr_clicks, sum({alias}.ctr_impressions) AS ctr_impressions,
    sum({alias}.position_sum) AS position_sum, sum({alias}.position_weight) AS position_weight,
    sum({alias}.rows) AS rows"""


# The day sums are numeric: the position comes back as float8 from either source.
RATIOS = """
    ctr_clicks::float8 / nullif(ctr_impressions, 0) AS ctr,
    (position_sum / nullif(position_weight, 0))::float8 AS position"""

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

# A row ``m`` the rule counts: a daily one, or one covering several days none of which has a daily row of its
# page (``imports_sitepage_shadowed``, migration 0013: one probe of the natural key's index). The daily rows'
# test comes first and short-circuits: the function runs on the few rows covering several days only.
COUNTED = """(m.period_end = m.period_start
          OR NOT imports_sitepage_shadowed(m.site_target_id, m.url_normalized, m.period_start, m.period_end))"""

# Rows ``m`` of either period: the one shown, or the one it is compared with.
_BOTH_PERIODS = """m.site_target_id = ANY(%(targets)s::bigint[])
      AND m.period_end BETWEEN %(previous_start)s AND %(end)s
      AND (m.period_start >= %(start)s
           OR m.period_start >= %(previous_start)s AND m.period_end <= %(previous_end)s)"""

# Totals, the chart and the imports behind them, in one read of both periods: rows are first
# summed per (row period, import) — a few hundred groups: ``parts`` —, then rolled up three ways:
# level 3 the totals of each period, level 1 one point per row period (a day, or the period a
# row covers), level 2 per import with the days it covers. ``current`` tells the periods apart.
_FIGURES = """
-- sitepage.{name}
WITH parts AS ({parts}
)
SELECT r.*, {ratios}
FROM (
    SELECT GROUPING(s.period_start, s.import_id) AS level, s.current, s.period_start, s.period_end, s.import_id,
           min(s.period_start) AS first_day, max(s.period_end) AS last_day, {resums}
    FROM parts AS s
    GROUP BY GROUPING SETS ((s.current), (s.current, s.period_start, s.period_end), (s.current, s.import_id))
) AS r
ORDER BY r.level DESC, r.current DESC, r.period_start, r.period_end, r.first_day, r.import_id
"""
_ROW_PARTS = f"""
    SELECT m.period_start, m.period_end, m.import_id, m.period_start >= %(start)s AS current, {SUMS}
    FROM imports_urlmetric AS m
    WHERE {_BOTH_PERIODS}
      {{url}}
      AND {COUNTED}
    GROUP BY m.period_start, m.period_end, m.import_id"""
_DAY_PARTS = f"""
    SELECT m.period_start, m.period_end, m.import_id, m.period_start >= %(start)s AS current, {DAY_SUMS}
    FROM imports_sitepage_counted_day_sums AS m
    WHERE {_BOTH_PERIODS}"""
# From the metric rows; {url} narrows it to one page (its history), read by the natural key's index.
FIGURES = _FIGURES.format(name="FIGURES", parts=_ROW_PARTS, ratios=RATIOS, resums=resums("s"))
ONE_PAGE = "AND m.url_normalized = %(url)s"
# The same from the day sums, less the rows the rule leaves out.
DAY_FIGURES = _FIGURES.format(name="DAY_FIGURES", parts=_DAY_PARTS, ratios=RATIOS, resums=resums("s"))

# Rows covering several days that cross an edge of either period, so count in neither, per
# import; rows the rule leaves out anyway are in LEFT_OUT instead. From the metric rows, through the partial index of such rows (``urlmetric_site_periods``:
# daily data has none), {url} as in FIGURES; or from the day sums.
_EDGE_ROWS = """
-- sitepage.{name}
SELECT m.import_id, {rows} AS rows, min(m.period_start) AS first_day, max(m.period_end) AS last_day
FROM {table} AS m
WHERE m.site_target_id = ANY(%(targets)s::bigint[]) AND m.period_end > m.period_start
  AND m.period_end >= %(previous_start)s AND m.period_start <= %(end)s
  -- Touching one of the periods: a year before (?compare=year) leaves days between them that are neither's.
  AND (m.period_end >= %(start)s OR m.period_start <= %(previous_end)s)
  AND NOT (m.period_start >= %(start)s AND m.period_end <= %(end)s)
  AND NOT (m.period_start >= %(previous_start)s AND m.period_end <= %(previous_end)s)
  {url}
GROUP BY m.import_id
ORDER BY first_day, m.import_id
"""
EDGE_ROWS = _EDGE_ROWS.format(name="EDGE_ROWS", rows="count(*)", table="imports_urlmetric",
                              url="{url} AND " + COUNTED)
DAY_EDGE_ROWS = _EDGE_ROWS.format(name="DAY_EDGE_ROWS", rows="sum(m.rows)::bigint",
                                  table="imports_sitepage_counted_day_sums", url="")

# What the rule left out: per import and row period overlapping either period, the rows covering several
# days that daily rows of the same page shadow (``left_out``) among all its rows of that period (``rows``).
# From the precomputed sums, or from the metric rows ({url} as in FIGURES).
DAY_LEFT_OUT = """
-- sitepage.DAY_LEFT_OUT
SELECT s.import_id, s.period_start, s.period_end, s.rows AS left_out, d.rows
FROM imports_sitepage_shadowed_sums AS s
JOIN imports_sitepage_day_sums AS d
  ON d.site_target_id = s.site_target_id AND d.period_end = s.period_end AND d.period_start = s.period_start
 AND d.import_id IS NOT DISTINCT FROM s.import_id
WHERE s.site_target_id = ANY(%(targets)s::bigint[])
  AND s.period_end >= %(previous_start)s AND s.period_start <= %(end)s
  AND (s.period_end >= %(start)s OR s.period_start <= %(previous_end)s)
ORDER BY s.period_start, s.period_end, s.import_id
"""
LEFT_OUT = f"""
-- sitepage.LEFT_OUT
SELECT m.import_id, m.period_start, m.period_end, count(*) FILTER (WHERE NOT {COUNTED}) AS left_out, count(*) AS rows
FROM imports_urlmetric AS m
WHERE m.site_target_id = ANY(%(targets)s::bigint[]) AND m.period_end > m.period_start
  AND m.period_end >= %(previous_start)s AND m.period_start <= %(end)s
  AND (m.period_end >= %(start)s OR m.period_start <= %(previous_end)s)
  {{url}}
GROUP BY m.import_id, m.period_start, m.period_end
HAVING count(*) FILTER (WHERE NOT {COUNTED}) > 0
ORDER BY m.period_start, m.period_end, m.import_id
"""

# Per import of ``imports``: its rows the site's targets hold now, and those of them the rule counts.
IMPORT_ROWS = """
-- sitepage.IMPORT_ROWS
SELECT d.import_id, sum(d.rows)::bigint AS held, coalesce(sum(c.rows), 0)::bigint AS counted
FROM imports_sitepage_day_sums AS d
LEFT JOIN imports_sitepage_counted_day_sums AS c
  ON c.site_target_id = d.site_target_id AND c.period_end = d.period_end AND c.period_start = d.period_start
 AND c.import_id = d.import_id
WHERE d.site_target_id = ANY(%(targets)s::bigint[]) AND d.import_id = ANY(%(imports)s::bigint[])
GROUP BY d.import_id
"""

# Per normalized URL, the sums of the period shown; {search} narrows it to the URLs matching %(pattern)s.
_PER_URL = f"""
    SELECT m.url_normalized, {SUMS}
    FROM imports_urlmetric AS m
    WHERE m.site_target_id = ANY(%(targets)s::bigint[])
      AND m.period_end BETWEEN %(start)s AND %(end)s AND m.period_start >= %(start)s
      {{search}}
      AND {COUNTED}
    GROUP BY m.url_normalized"""
# Per normalized URL, its clicks in the previous period.
_PREVIOUS_PER_URL = f"""
    SELECT m.url_normalized, sum(m.clicks) AS clicks
    FROM imports_urlmetric AS m
    WHERE m.site_target_id = ANY(%(targets)s::bigint[])
      AND m.period_end BETWEEN %(previous_start)s AND %(previous_end)s AND m.period_start >= %(previous_start)s
      {{search}}
      AND {COUNTED}
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
      AND {COUNTED}
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
), before AS ({_PREVIOUS_PER_URL}
), joined AS (
    SELECT l.*, {RATIOS}, b.clicks AS previous_clicks, {_CHANGE}
    FROM current AS l LEFT JOIN before AS b USING (url_normalized)
)
SELECT j.*, count(*) OVER () AS total
FROM joined AS j
ORDER BY {{order}} LIMIT %(limit)s OFFSET %(offset)s
"""

# -- the precomputed top pages (cache.py writes them) ---------------------------------------------

# The targets whose top pages of the period shown are not precomputed at the target's current data
# version; none: the page reads TOP_PAGES_CACHED. A target without a version never had a row.
STALE_TARGETS = """
-- sitepage.STALE_TARGETS
SELECT t.id
FROM unnest(%(targets)s::bigint[]) AS t (id)
WHERE NOT EXISTS (
    SELECT FROM imports_sitepage_url_periods AS p
    WHERE p.site_target_id = t.id AND p.period_start = %(start)s AND p.period_end = %(end)s
      AND p.version IS NOT DISTINCT FROM (SELECT v.version FROM imports_sitepage_versions AS v
                                          WHERE v.site_target_id = t.id)
)
ORDER BY t.id
"""

# TOP_PAGES_ALL_PREVIOUS from the precomputed sums: the targets' rows of a URL added up, the URLs
# with rows in the previous period only left out, as there.
TOP_PAGES_CACHED = f"""
-- sitepage.TOP_PAGES_CACHED
WITH current AS (
    SELECT m.url_normalized, {resums("m")}, sum(m.previous_clicks) AS previous_clicks
    FROM imports_sitepage_url_sums AS m
    WHERE m.site_target_id = ANY(%(targets)s::bigint[]) AND m.period_start = %(start)s AND m.period_end = %(end)s
      {{search}}
    GROUP BY m.url_normalized
    HAVING sum(m.rows) > 0
), joined AS (
    SELECT c.*, {RATIOS}, (c.clicks - c.previous_clicks)::float8 / nullif(c.previous_clicks, 0) AS change
    FROM current AS c
)
SELECT j.*, count(*) OVER () AS total
FROM joined AS j
ORDER BY {{order}} LIMIT %(limit)s OFFSET %(offset)s
"""

# The target's data version, read in the snapshot its sums are computed in.
VERSION = """
-- sitepage.VERSION
SELECT version FROM imports_sitepage_versions WHERE site_target_id = %(target)s
"""

# Every period of the target's precomputed top pages, gone.
CLEAR_CACHED = """
-- sitepage.CLEAR_CACHED
WITH urls AS (DELETE FROM imports_sitepage_url_sums WHERE site_target_id = %(target)s)
DELETE FROM imports_sitepage_url_periods WHERE site_target_id = %(target)s
"""

# Each URL of one target with rows in the period or the previous one: its sums in the period
# (rows 0: none) and its clicks in the previous one, with the data %(version)s they were read at.
# ``targets`` is [target].
CACHE_PERIOD = f"""
-- sitepage.CACHE_PERIOD
WITH current AS ({_PER_URL.format(search="")}
), before AS ({_PREVIOUS_PER_URL.format(search="")}
), period AS (
    INSERT INTO imports_sitepage_url_periods (site_target_id, period_start, period_end, version)
    VALUES (%(target)s, %(start)s, %(end)s, %(version)s)
)
INSERT INTO imports_sitepage_url_sums (site_target_id, period_start, period_end, url_normalized, rows, clicks,
                                       impressions, ctr_clicks, ctr_impressions, position_sum, position_weight,
                                       previous_clicks)
SELECT %(target)s, %(start)s, %(end)s, url_normalized, coalesce(c.rows, 0), c.clicks, c.impressions, c.ctr_clicks,
       c.ctr_impressions, c.position_sum, c.position_weight, b.clicks
FROM current AS c FULL JOIN before AS b USING (url_normalized)
"""
