"""The "counted once" triggers decide first, from the transition tables alone, that a statement needs nothing.

A statement whose rows and targets hold no row covering several days (daily data, the common case) now
costs two passes over its own rows and one index probe per target: the set difference of 0014 (an update's
changed rows) is computed only when there is something to recompute. The target's version row is locked
first in every case, as 0006's trigger does for a statement that changes a sum: a statement that changed
no sum (map_reconcile's page links) now waits for a writer of its target too, and sees its rows.
What they do is 0011's, unchanged. The SQL is written out here, not imported.
"""

from django.db import migrations

_ALL = ("site_target_id, url_normalized, period_start, period_end, import_id, clicks, impressions, position, "
        "position_weight")
_KEY = "site_target_id, url_normalized, period_start, period_end, import_id"
# Per operation: the statement's rows (both sides of an update), and those whose page, period, import or
# figures changed (an update's: the old rows less the new ones, and the new less the old).
ROWS = {
    "INSERT": "SELECT site_target_id, period_start, period_end FROM new_rows",
    "DELETE": "SELECT site_target_id, period_start, period_end FROM old_rows",
    "UPDATE": ("SELECT site_target_id, period_start, period_end FROM old_rows "
               "UNION ALL SELECT site_target_id, period_start, period_end FROM new_rows"),
}
CHANGED = {
    "INSERT": f"SELECT {_KEY} FROM new_rows",
    "DELETE": f"SELECT {_KEY} FROM old_rows",
    "UPDATE": f"""SELECT {_KEY} FROM (
                      (SELECT {_ALL} FROM old_rows EXCEPT SELECT {_ALL} FROM new_rows)
                      UNION ALL
                      (SELECT {_ALL} FROM new_rows EXCEPT SELECT {_ALL} FROM old_rows)) AS c""",
}

# 0011's SHADOWED_SUMS, as it is there.
SHADOWED_SUMS = """
SELECT m.site_target_id, m.period_start, m.period_end, m.import_id,
       count(*) AS rows,
       coalesce(sum(m.clicks), 0) AS clicks,
       count(*) FILTER (WHERE m.clicks IS NOT NULL) AS clicks_rows,
       coalesce(sum(m.impressions), 0) AS impressions,
       count(*) FILTER (WHERE m.impressions IS NOT NULL) AS impressions_rows,
       coalesce(sum(m.clicks) FILTER (WHERE m.impressions IS NOT NULL), 0) AS ctr_clicks,
       coalesce(sum(m.impressions) FILTER (WHERE m.clicks IS NOT NULL), 0) AS ctr_impressions,
       count(*) FILTER (WHERE m.clicks IS NOT NULL AND m.impressions IS NOT NULL) AS ctr_rows,
       coalesce(sum((m.position * w.weight)::numeric), 0) AS position_sum,
       coalesce(sum(w.weight::numeric) FILTER (WHERE m.position IS NOT NULL), 0) AS position_weight,
       count(*) FILTER (WHERE m.position IS NOT NULL) AS position_rows
FROM unnest(keys) AS k
JOIN imports_urlmetric AS m
  ON m.site_target_id = k.site_target_id AND m.period_end = k.period_end AND m.period_start = k.period_start
 AND m.import_id IS NOT DISTINCT FROM k.import_id AND m.period_end > m.period_start
CROSS JOIN LATERAL (SELECT coalesce(m.position_weight, nullif(m.impressions, 0), 1) AS weight) AS w
CROSS JOIN LATERAL (
        SELECT FROM imports_urlmetric AS d
        WHERE d.site_target_id = m.site_target_id AND d.url_normalized = m.url_normalized
          AND d.period_start BETWEEN m.period_start AND m.period_end AND d.period_end = d.period_start
        LIMIT 1) AS daily
GROUP BY m.site_target_id, m.period_end, m.period_start, m.import_id
ORDER BY m.site_target_id, m.period_end, m.period_start, m.import_id
"""

TRIGGER_FUNCTION = f"""
CREATE OR REPLACE FUNCTION imports_sitepage_shadowed_{{op}}() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    targets bigint[] := ARRAY(SELECT DISTINCT r.site_target_id FROM ({{rows}}) AS r ORDER BY 1);
    changed imports_sitepage_page_row[];
    keys imports_sitepage_day_key[];
BEGIN
    IF cardinality(targets) = 0 THEN
        RETURN NULL;
    END IF;
    PERFORM FROM imports_sitepage_versions WHERE site_target_id = ANY(targets) ORDER BY site_target_id FOR UPDATE;
    -- Daily data only, before and after: nothing is shadowed, nothing to do.
    IF NOT EXISTS (SELECT FROM ({{rows}}) AS r WHERE r.period_end > r.period_start)
       AND NOT EXISTS (SELECT FROM unnest(targets) AS t (id)
                       WHERE EXISTS (SELECT FROM imports_urlmetric AS m
                                     WHERE m.site_target_id = t.id AND m.period_end > m.period_start)) THEN
        RETURN NULL;
    END IF;
    changed := ARRAY(
        SELECT ROW(c.site_target_id, c.url_normalized, c.period_start, c.period_end,
                   c.import_id)::imports_sitepage_page_row
        FROM ({{changed}}) AS c);
    keys := ARRAY(
        SELECT ROW(k.site_target_id, k.period_start, k.period_end, k.import_id)::imports_sitepage_day_key
        FROM (
            SELECT c.site_target_id, c.period_start, c.period_end, c.import_id
            FROM unnest(changed) AS c WHERE c.period_end > c.period_start
            UNION
            SELECT m.site_target_id, m.period_start, m.period_end, m.import_id
            FROM (SELECT DISTINCT c.site_target_id, c.url_normalized, c.period_start AS day
                  FROM unnest(changed) AS c WHERE c.period_end = c.period_start) AS d
            JOIN imports_urlmetric AS m  -- urlmetric_page_periods (0010)
              ON m.site_target_id = d.site_target_id AND m.url_normalized = d.url_normalized
             AND m.period_end > m.period_start AND m.period_start <= d.day AND m.period_end >= d.day
        ) AS k
        ORDER BY k.site_target_id, k.period_end, k.period_start, k.import_id);
    IF cardinality(keys) = 0 THEN
        RETURN NULL;
    END IF;
    DELETE FROM imports_sitepage_shadowed_sums AS s
    USING unnest(keys) AS k
    WHERE s.site_target_id = k.site_target_id AND s.period_end = k.period_end AND s.period_start = k.period_start
      AND s.import_id IS NOT DISTINCT FROM k.import_id;
    INSERT INTO imports_sitepage_shadowed_sums {SHADOWED_SUMS};
    -- What the site page counts may have changed: its precomputed top pages are stale.
    UPDATE imports_sitepage_versions SET version = nextval('imports_sitepage_version_seq')
    WHERE site_target_id IN (SELECT DISTINCT k.site_target_id FROM unnest(keys) AS k);
    RETURN NULL;
END
$$
"""


def forward() -> list[str]:
    return [TRIGGER_FUNCTION.format(op=op.lower(), rows=ROWS[op], changed=CHANGED[op]) for op in CHANGED]


def backward() -> list[str]:
    from importlib import import_module

    before = import_module("imports.migrations.0014_sitepage_shadowed_triggers_once")
    return [before.TRIGGER_FUNCTION.format(op=op.lower(), changed=changed) for op, changed in before.CHANGED.items()]


class Migration(migrations.Migration):

    dependencies = [
        ("imports", "0015_import_replacement_by_grouping"),
    ]

    operations = [
        migrations.RunSQL(sql=forward(), reverse_sql=backward()),
    ]
