"""The detector's statements, one per block, each named on its first line (``-- alerts.NAME``).

Site figures come from the precomputed day sums (``DAY_SUMS_SOURCE``), never from the metric rows; a page's from
the metric rows of the two weeks judged, through ``urlmetric_site_days`` (site_target_id, period_end). Only daily
rows (``period_start = period_end``) count: a week's clicks are those of its days, each day of a page once.
"""

# The day sums imports keeps exact, each day of a page counted once (imports migration 0011's view over 0006's
# table); a one-day row of it is one import's sums of that day. Only one-day rows are read here.
DAY_SUMS_SOURCE = "imports_sitepage_counted_day_sums"

# Per site of the org, its clicks per day over the 14 days up to its newest day with daily data before today
# (looked for within LOOKBACK days): what ``decide.site_drop`` needs, never more rows than that per site.
DAILY_CLICKS = f"""
-- alerts.DAILY_CLICKS
WITH days AS (
    SELECT st.site_id, d.period_end AS day, sum(d.clicks) AS clicks
    FROM seoinsight_site AS s
    JOIN seoinsight_sitetarget AS st ON st.site_id = s.id
    JOIN {DAY_SUMS_SOURCE} AS d ON d.site_target_id = st.id
    WHERE s.org_id = %(org)s
      AND d.period_start = d.period_end
      AND d.period_end >= %(today)s - %(lookback)s::int AND d.period_end < %(today)s
      AND d.clicks_rows > 0
    GROUP BY st.site_id, d.period_end
), newest AS (
    SELECT site_id, max(day) AS day FROM days GROUP BY site_id
)
SELECT days.site_id, days.day, days.clicks::float8
FROM days JOIN newest USING (site_id)
WHERE days.day > newest.day - 14
ORDER BY days.site_id, days.day
"""

# One site's top pages' clicks in the week before (``before``) and the week judged (``after``), from its
# metric rows: the TOP_PAGES with the most clicks the week before.
PAGE_WEEKS = """
-- alerts.PAGE_WEEKS
SELECT m.url_normalized,
       coalesce(sum(m.clicks) FILTER (WHERE m.period_end <= %(previous_end)s), 0)::float8 AS before,
       coalesce(sum(m.clicks) FILTER (WHERE m.period_end > %(previous_end)s), 0)::float8 AS after
FROM seoinsight_sitetarget AS st
JOIN imports_urlmetric AS m ON m.site_target_id = st.id
WHERE st.site_id = %(site)s
  AND m.period_end BETWEEN %(previous_start)s AND %(end)s
  AND m.period_start = m.period_end
GROUP BY m.url_normalized
ORDER BY before DESC, m.url_normalized
LIMIT %(top)s
"""

# Each site target's pull schedule and the days the site's recent imports were made: its habit.
HABITS = """
-- alerts.HABITS
SELECT s.id,
       array_remove(array_agg(DISTINCT st.pull_schedule), NULL),
       coalesce((SELECT array_agg(day ORDER BY day) FROM (
           SELECT DISTINCT (i.created_at AT TIME ZONE 'UTC')::date AS day
           FROM imports_import AS i JOIN seoinsight_sitetarget AS t ON t.id = i.site_target_id
           WHERE t.site_id = s.id AND i.status = 'done' AND i.created_at < %(today)s::date + 1
           ORDER BY day DESC LIMIT %(habit)s) AS recent), '{}')
FROM seoinsight_site AS s
LEFT JOIN seoinsight_sitetarget AS st ON st.site_id = s.id
WHERE s.org_id = %(org)s
GROUP BY s.id
"""

# Record an alert once: a second detector (or a rerun) meets the UNIQUE constraint and records nothing.
RECORD = """
-- alerts.RECORD
INSERT INTO insight_alert (site_id, kind, page_url, period_start, period_end, before, after, created_at)
VALUES (%(site)s, %(kind)s, %(page_url)s, %(start)s, %(end)s, %(before)s, %(after)s, now())
ON CONFLICT ON CONSTRAINT alert_once_per_period DO NOTHING
RETURNING id
"""

# Late data, once per episode: its period starts the day after the newest data, and grows with each run, so a site
# that already has a stale_data alert starting that day gets no second one.
RECORD_LATE = """
-- alerts.RECORD_LATE
INSERT INTO insight_alert (site_id, kind, page_url, period_start, period_end, before, after, created_at)
SELECT %(site)s, 'stale_data', '', %(start)s, %(end)s, %(before)s, %(after)s, now()
WHERE NOT EXISTS (SELECT 1 FROM insight_alert AS a
                  WHERE a.site_id = %(site)s AND a.kind = 'stale_data' AND a.period_start = %(start)s)
ON CONFLICT ON CONSTRAINT alert_once_per_period DO NOTHING
RETURNING id
"""
