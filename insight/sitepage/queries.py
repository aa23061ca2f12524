"""The site page's top queries: what people searched, from the Search Console exports' Queries tables.

One statement (``TOP_QUERIES``) over ``imports_dimensionmetric``, read through its
``dimensionmetric_top`` index: a query's rows in the period shown and in the previous
one, added up per query text, the first N by clicks with the previous clicks and the
change. The rule of the rest of the page holds: a row counts in a period when its whole
period lies inside it, so an export of three months counts in no 28-day period.
Rows are those of the site's own targets only (joined through ``seoinsight_sitetarget``),
whatever target ids the request names: the site must come from an org-scoped lookup.
"""

from __future__ import annotations

from typing import NamedTuple

from django.db import connection

from seoinsight.periods import Choice

from . import display
from .listing import change

TOP_LIMIT = 10

# CTR over the rows that have both clicks and impressions; position weighted by
# impressions (1 for a row without any), as Search Console averages it.
TOP_QUERIES = """
-- sitepage.TOP_QUERIES: a site's first queries by clicks in a period, with the previous period's clicks
WITH rows AS (
    SELECT m.key, m.clicks, m.impressions, m.position,
           m.period_start >= %(start)s AND m.period_end <= %(end)s AS current
    FROM imports_dimensionmetric AS m
    JOIN seoinsight_sitetarget AS t ON t.id = m.site_target_id AND t.site_id = %(site)s
    WHERE m.site_target_id = ANY(%(targets)s::bigint[])
      AND m.dimension = 'query'
      AND m.period_start BETWEEN %(previous_start)s AND %(end)s
      AND ((m.period_start >= %(start)s AND m.period_end <= %(end)s)
           OR (m.period_start >= %(previous_start)s AND m.period_end <= %(previous_end)s))
)
SELECT key AS query,
       sum(clicks) FILTER (WHERE current) AS clicks,
       sum(impressions) FILTER (WHERE current) AS impressions,
       (sum(clicks) FILTER (WHERE current AND impressions IS NOT NULL))::float8
           / nullif(sum(impressions) FILTER (WHERE current AND clicks IS NOT NULL), 0) AS ctr,
       sum(position * coalesce(nullif(impressions, 0), 1)) FILTER (WHERE current)
           / nullif(sum(coalesce(nullif(impressions, 0), 1)) FILTER (WHERE current AND position IS NOT NULL), 0)
           AS position,
       sum(clicks) FILTER (WHERE NOT current) AS previous_clicks
FROM rows
GROUP BY key
HAVING bool_or(current)
ORDER BY clicks DESC NULLS LAST, key
LIMIT %(limit)s
"""

CSV_HEADER = ("Query", "Clicks", "Impressions", "CTR (%)", "Position", "Previous clicks", "Change in clicks (%)")


class TopQuery(NamedTuple):
    """One query of the block: its figures in the period shown, and its clicks in the previous one."""

    query: str
    clicks: int | None
    impressions: int | None
    ctr: float | None
    position: float | None
    previous_clicks: int | None

    @property
    def change(self) -> float | None:
        return change(self.clicks, self.previous_clicks)

    def csv_row(self) -> tuple:
        """The row under ``CSV_HEADER``: plain numbers, percentages as numbers, blanks for unknowns.

        >>> TopQuery("seo", 30, 600, 0.05, 2.25, 20).csv_row()
        ('seo', 30, 600, 5.0, 2.2, 20, 50.0)
        """
        return (self.query, display.CLICKS.raw(self.clicks), display.IMPRESSIONS.raw(self.impressions),
                display.CTR.raw(self.ctr), display.POSITION.raw(self.position),
                display.CLICKS.raw(self.previous_clicks), "" if self.change is None else round(self.change * 100, 1))

    def shown(self) -> dict:
        """The row as the template shows it."""
        text, tone = display.CLICKS.change(self.clicks, self.previous_clicks)
        return {"query": self.query, "clicks": display.number(self.clicks),
                "impressions": display.number(self.impressions), "ctr": display.percent(self.ctr),
                "position": display.position(self.position), "previous_clicks": display.number(self.previous_clicks),
                "change": text, "tone": tone}


def top_queries(site_id: int, targets: list[int], choice: Choice, limit: int = TOP_LIMIT) -> list[TopQuery]:
    """The site's first ``limit`` queries by clicks in ``choice.current``, among ``targets`` of that site."""
    params = {"site": site_id, "targets": targets, "start": choice.current.start, "end": choice.current.end,
              "previous_start": choice.previous.start, "previous_end": choice.previous.end, "limit": limit}
    with connection.cursor() as cursor:
        cursor.execute(TOP_QUERIES, params)
        return [TopQuery(*row) for row in cursor.fetchall()]
