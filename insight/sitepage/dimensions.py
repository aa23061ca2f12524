"""The site page's queries, devices and countries: the Search Console exports' other tables, added up in SQL.

Rows of ``imports_dimensionmetric`` of the site's own targets (joined through ``seoinsight_sitetarget``,
whatever target ids the request names: the site must come from an org-scoped lookup). A row counts in a
period when its whole period lies inside it. Of one target's rows of the same key whose periods overlap,
each day is counted once: a daily row wins over a row covering several days; of multi-day rows that
overlap, the most recently imported (``updated_at``, then id) wins, and an older one counts only where it
overlaps none kept. ``COUNTED`` says which row is left out and why.
"""

from __future__ import annotations

from typing import NamedTuple

from django.db import connection

from seoinsight.periods import Choice, Period

from . import dimension_rules as rules
from .display import Sums
from .listing import like_pattern

# The rows inside either period; a multi-day row is left out when a daily row of its key lies in its days;
# then the others of a key are taken newest first, each kept unless it overlaps one kept before (``greedy``,
# one step per rank: a key has a few such rows, so the recursion is as deep as the most exports of one key).
COUNTED = """
WITH RECURSIVE inside AS (
    SELECT m.id, m.site_target_id, m.key, m.period_start, m.period_end, m.updated_at,
           m.clicks, m.impressions, m.position, m.period_start >= %(start)s AS current
    FROM imports_dimensionmetric AS m
    JOIN seoinsight_sitetarget AS t ON t.id = m.site_target_id AND t.site_id = %(site)s
    WHERE m.site_target_id = ANY(%(targets)s::bigint[])
      AND m.dimension = %(dimension)s
      AND m.period_start BETWEEN %(previous_start)s AND %(end)s
      AND ((m.period_start >= %(start)s AND m.period_end <= %(end)s)
           OR (m.period_start >= %(previous_start)s AND m.period_end <= %(previous_end)s))
      AND m.key ILIKE %(pattern)s
      AND (%(only)s::text IS NULL OR m.key = %(only)s::text)
), under_daily AS (
    SELECT DISTINCT i.id
    FROM inside AS i
    JOIN inside AS d ON d.site_target_id = i.site_target_id AND d.key = i.key AND d.period_start = d.period_end
                    AND d.period_start BETWEEN i.period_start AND i.period_end
    WHERE i.period_start < i.period_end
), ranked AS (
    SELECT i.id, i.site_target_id, i.key, daterange(i.period_start, i.period_end, '[]') AS days,
           row_number() OVER (PARTITION BY i.site_target_id, i.key ORDER BY i.updated_at DESC, i.id DESC) AS n
    FROM inside AS i
    WHERE i.period_start < i.period_end AND i.id NOT IN (SELECT id FROM under_daily)
), greedy AS (
    SELECT id, site_target_id, key, n, true AS kept, datemultirange(days) AS taken
    FROM ranked WHERE n = 1
    UNION ALL
    SELECT r.id, r.site_target_id, r.key, r.n, NOT (g.taken && r.days),
           CASE WHEN g.taken && r.days THEN g.taken ELSE g.taken + datemultirange(r.days) END
    FROM greedy AS g
    JOIN ranked AS r ON r.site_target_id = g.site_target_id AND r.key = g.key AND r.n = g.n + 1
), counted AS (
    SELECT i.*, CASE WHEN i.id IN (SELECT id FROM under_daily) THEN 'daily'
                     WHEN i.id IN (SELECT id FROM greedy WHERE NOT kept) THEN 'newer' END AS left_out
    FROM inside AS i
)
"""

# Search Console keeps 16 months: no export covers more days. SOURCES looks that far back for exports that
# start before the period shown and reach into it, so that its index bounds the rows it reads.
LONGEST_EXPORT_DAYS = 500

# CTR over the rows that have both clicks and impressions; position weighted by impressions (1 for a row
# without any), as Search Console averages it. {when}: which rows of ``counted`` a figure adds up.
SUMS = """
       sum(clicks) FILTER (WHERE {when}) AS {prefix}clicks,
       sum(impressions) FILTER (WHERE {when}) AS {prefix}impressions,
       (sum(clicks) FILTER (WHERE {when} AND impressions IS NOT NULL))::float8
           / nullif(sum(impressions) FILTER (WHERE {when} AND clicks IS NOT NULL), 0) AS {prefix}ctr,
       sum(position * coalesce(nullif(impressions, 0), 1)) FILTER (WHERE {when})
           / nullif(sum(coalesce(nullif(impressions, 0), 1)) FILTER (WHERE {when} AND position IS NOT NULL), 0)
           AS {prefix}position"""

TABLE = ("-- sitepage.DIMENSION_TABLE: one dimension's keys in a period, with the previous period's figures\n"
         + COUNTED + """
, sums AS (
    SELECT key,""" + SUMS.format(when="current", prefix="") + "," + SUMS.format(when="NOT current",
                                                                                prefix="previous_") + """
    FROM counted
    WHERE left_out IS NULL
    GROUP BY key
    HAVING bool_or(current)
)
SELECT key, clicks, impressions, ctr, position, previous_clicks, previous_impressions, previous_ctr,
       previous_position,
       (coalesce(clicks, 0) - previous_clicks)::float8 / nullif(previous_clicks, 0) AS change,
       count(*) OVER () AS total
FROM sums
ORDER BY {order}
LIMIT %(limit)s OFFSET %(offset)s
""")

POINTS = ("-- sitepage.DIMENSION_POINTS: one key's figures per row period of the period shown, for its chart\n"
          + COUNTED + """
SELECT period_start, period_end,""" + SUMS.format(when="true", prefix="") + """
FROM counted
WHERE current AND left_out IS NULL
GROUP BY period_start, period_end
ORDER BY period_start, period_end
""")

SOURCES = ("-- sitepage.DIMENSION_SOURCES: each export table of a dimension overlapping the period shown, "
           "and how many of its rows count\n" + COUNTED + """
SELECT m.period_start, m.period_end, max(m.import_id) AS import_id, count(*) AS rows,
       count(c.id) FILTER (WHERE c.left_out IS NULL) AS counted,
       count(c.id) FILTER (WHERE c.left_out = 'daily') AS under_daily,
       count(c.id) FILTER (WHERE c.left_out = 'newer') AS under_newer
FROM imports_dimensionmetric AS m
JOIN seoinsight_sitetarget AS t ON t.id = m.site_target_id AND t.site_id = %(site)s
LEFT JOIN counted AS c ON c.id = m.id AND c.current
WHERE m.site_target_id = ANY(%(targets)s::bigint[])
  AND m.dimension = %(dimension)s
  AND m.period_start BETWEEN %(start)s - %(longest)s AND %(end)s AND m.period_end >= %(start)s
GROUP BY m.period_start, m.period_end
ORDER BY m.period_start, m.period_end
""")

KEYS = """
-- sitepage.DIMENSION_KEYS: the devices or countries a site's exports name, for the page's filter
SELECT DISTINCT m.key
FROM imports_dimensionmetric AS m
JOIN seoinsight_sitetarget AS t ON t.id = m.site_target_id AND t.site_id = %(site)s
WHERE m.site_target_id = ANY(%(targets)s::bigint[]) AND m.dimension = %(dimension)s
ORDER BY m.key
LIMIT %(limit)s
"""


class Row(NamedTuple):
    """One key of a table: its figures in the period shown and in the previous one."""

    key: str
    clicks: int | None
    impressions: int | None
    ctr: float | None
    position: float | None
    previous_clicks: int | None
    previous_impressions: int | None
    previous_ctr: float | None
    previous_position: float | None
    change: float | None

    @property
    def current(self) -> Sums:
        return Sums(self.clicks, self.impressions, self.ctr, self.position)

    @property
    def previous(self) -> Sums:
        return Sums(self.previous_clicks, self.previous_impressions, self.previous_ctr, self.previous_position)


def _params(site_id: int, targets: list[int], choice: Choice, dimension: str, *, search: str = "",
            only: str | None = None, **more) -> dict:
    return {"site": site_id, "targets": targets, "dimension": dimension, "start": choice.current.start,
            "end": choice.current.end, "previous_start": choice.previous.start, "previous_end": choice.previous.end,
            "pattern": like_pattern(search), "only": only, **more}


def table(site_id: int, targets: list[int], choice: Choice, dimension: str, *, sort: str | None = None,
          search: str = "", only: str | None = None, page: int = 1,
          page_size: int | None = rules.PAGE_SIZE) -> tuple[list[Row], int]:
    """One page of ``dimension``'s keys in ``choice.current`` as sorted (every key when ``page_size`` is None),
    and how many keys there are; ``search``: a part of the key, ``only``: that one key."""
    params = _params(site_id, targets, choice, dimension, search=search, only=only, limit=page_size,
                     offset=(page - 1) * (page_size or 0))
    with connection.cursor() as cursor:
        cursor.execute(TABLE.format(order=rules.order_by(sort)), params)
        found = cursor.fetchall()
    return [Row(*row[:-1]) for row in found], (found[0][-1] if found else 0)


def points(site_id: int, targets: list[int], choice: Choice, dimension: str, key: str) -> list[tuple[Period, Sums]]:
    """``key``'s figures per row period of ``choice.current`` (a point a day where its rows are daily)."""
    with connection.cursor() as cursor:
        cursor.execute(POINTS, _params(site_id, targets, choice, dimension, only=key))
        return [(Period(start, end), Sums(*sums)) for start, end, *sums in cursor.fetchall()]


def sources(site_id: int, targets: list[int], choice: Choice, dimension: str) -> list[rules.Table]:
    """Each export table of ``dimension`` overlapping ``choice.current``, daily rows folded into one entry."""
    with connection.cursor() as cursor:
        cursor.execute(SOURCES, _params(site_id, targets, choice, dimension, longest=LONGEST_EXPORT_DAYS))
        found = [rules.Table(Period(start, end), start == end, rows, counted, under_daily, under_newer, import_id)
                 for start, end, import_id, rows, counted, under_daily, under_newer in cursor.fetchall()]
    return rules.merge_daily(found)


def keys(site_id: int, targets: list[int], dimension: str) -> list[str]:
    """The keys of ``dimension`` the site's exports name, in any period (the filter's choices)."""
    with connection.cursor() as cursor:
        cursor.execute(KEYS, {"site": site_id, "targets": targets, "dimension": dimension,
                              "limit": rules.MAX_FILTER_KEYS})
        return [key for (key,) in cursor.fetchall()]
