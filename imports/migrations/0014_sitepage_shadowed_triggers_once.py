"""The "counted once" triggers of 0011 read what a statement changed once, and an update by set difference.

0011's functions evaluated the statement's changed rows up to four times, and for an UPDATE joined the old
and new rows by id with a row comparison: half a second for 2,000 rows relinked to another import. Here the
changed rows (target, URL, period, import) are gathered once into an array; an UPDATE's are the old rows
less the new ones and the new less the old (EXCEPT: hashed, and a row whose page, period, import and
figures stayed — map_reconcile's page_id updates — drops out). What they do is 0011's, unchanged.
The SQL is written out here, not imported: this migration keeps meaning what it meant.
"""

from django.db import migrations

# The columns of a row the rule and its sums depend on.
_ALL = ("site_target_id, url_normalized, period_start, period_end, import_id, clicks, impressions, position, "
        "position_weight")
_KEY = "site_target_id, url_normalized, period_start, period_end, import_id"
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

TYPE = ("CREATE TYPE imports_sitepage_page_row AS "
        "(site_target_id bigint, url_normalized text, period_start date, period_end date, import_id bigint)")

TRIGGER_FUNCTION = f"""
CREATE OR REPLACE FUNCTION imports_sitepage_shadowed_{{op}}() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed imports_sitepage_page_row[] := ARRAY(
        SELECT ROW(c.site_target_id, c.url_normalized, c.period_start, c.period_end,
                   c.import_id)::imports_sitepage_page_row
        FROM ({{changed}}) AS c);
    targets bigint[];
    keys imports_sitepage_day_key[];
BEGIN
    targets := ARRAY(SELECT DISTINCT c.site_target_id FROM unnest(changed) AS c ORDER BY 1);
    IF cardinality(targets) = 0 THEN
        RETURN NULL;
    END IF;
    -- Held already when the statement changed a sum; taken here when it changed only a URL.
    PERFORM FROM imports_sitepage_versions WHERE site_target_id = ANY(targets) ORDER BY site_target_id FOR UPDATE;
    -- Daily data only, before and after: nothing is shadowed, nothing to do.
    IF NOT EXISTS (SELECT FROM unnest(changed) AS c WHERE c.period_end > c.period_start)
       AND NOT EXISTS (SELECT FROM unnest(targets) AS t (id)
                       WHERE EXISTS (SELECT FROM imports_urlmetric AS m
                                     WHERE m.site_target_id = t.id AND m.period_end > m.period_start)) THEN
        RETURN NULL;
    END IF;
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
    return [TYPE, *(TRIGGER_FUNCTION.format(op=op.lower(), changed=changed) for op, changed in CHANGED.items())]


def backward() -> list[str]:
    # 0011's functions back, then the type they no longer use.
    from importlib import import_module

    before = import_module("imports.migrations.0011_sitepage_counted_once")
    restored = [before.TRIGGER_FUNCTION.format(op=op.lower(), changed=before.CHANGED[op]).replace(
        "CREATE FUNCTION", "CREATE OR REPLACE FUNCTION") for op in before.TRIGGERS]
    return [*restored, "DROP TYPE imports_sitepage_page_row"]


class Migration(migrations.Migration):

    dependencies = [
        ("imports", "0013_sitepage_shadowed_function"),
    ]

    operations = [
        migrations.RunSQL(sql=forward(), reverse_sql=backward()),
    ]
