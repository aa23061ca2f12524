"""Each day of a page counts once: the site page's sums leave out the rows covering several days that daily rows shadow.

A row covering several days (a Search Console export's 28- or 90-day *Pages* table) is *shadowed* when a
daily row of the same page (site target and url_normalized) exists for any of its days: the daily rows
are the ones counted, the long row is not. ``imports_sitepage_shadowed_sums`` holds, per key of
``imports_sitepage_day_sums`` (site target, row period, import), the sums of that key's shadowed rows;
the view ``imports_sitepage_counted_day_sums`` is the day sums less those, with the same columns: what
the site page (and the portfolio) reads. A key with nothing left counted is left out of the view.

Statement-level triggers keep the table exact in the transaction that writes the metric rows. The keys a
statement affects: those of the rows covering several days it wrote or removed, and those of the rows
covering several days of the same page and a day of a daily row it wrote or removed. Each affected key
is recomputed from the table as it now is (deleted, then inserted). A statement whose targets have no
row covering several days (daily data only) stops after one probe of ``urlmetric_site_periods``.

Lock order, as in 0006: the target's version row first (``imports_sitepage_{op}`` took it already when
the statement changed a sum; these triggers are named after it, so fire after it), then the shadowed
sums in key order. A second writer of the same target waits for the first to commit, and then, under
READ COMMITTED, each statement of its trigger sees the first's rows. Its version changes with the
shadowed sums, so the precomputed top pages read before are taken for stale.

The SQL is written out here, not imported: this migration keeps meaning what it meant.
"""

from django.db import migrations

SUMMED = ("rows", "clicks", "clicks_rows", "impressions", "impressions_rows", "ctr_clicks", "ctr_impressions",
          "ctr_rows", "position_sum", "position_weight", "position_rows")
KEY = ("site_target_id", "period_start", "period_end", "import_id")

# Columns of a changed row the rule depends on.
_COLUMNS = "site_target_id, url_normalized, period_start, period_end, import_id"
CHANGED = {
    "INSERT": f"SELECT {_COLUMNS} FROM new_rows",
    "DELETE": f"SELECT {_COLUMNS} FROM old_rows",
    # Only the rows whose page, period, import or figures changed (map_reconcile's page_id updates: none).
    "UPDATE": """SELECT x.* FROM old_rows AS o JOIN new_rows AS n USING (id)
                 CROSS JOIN LATERAL (VALUES (o.site_target_id, o.url_normalized, o.period_start, o.period_end,
                                             o.import_id),
                                            (n.site_target_id, n.url_normalized, n.period_start, n.period_end,
                                             n.import_id))
                     AS x (site_target_id, url_normalized, period_start, period_end, import_id)
                 WHERE (o.site_target_id, o.url_normalized, o.period_start, o.period_end, o.import_id, o.clicks,
                        o.impressions, o.position, o.position_weight)
                       IS DISTINCT FROM
                       (n.site_target_id, n.url_normalized, n.period_start, n.period_end, n.import_id, n.clicks,
                        n.impressions, n.position, n.position_weight)""",
}

# A row ``m`` covering several days is shadowed: a daily row of its page exists for one of its days. A probe
# of the natural key's index (site target, URL, period_start) per row: LATERAL … LIMIT 1, not EXISTS, which
# the planner may turn into a hash of every daily row of the table.
SHADOWED = """CROSS JOIN LATERAL (
        SELECT FROM imports_urlmetric AS d
        WHERE d.site_target_id = m.site_target_id AND d.url_normalized = m.url_normalized
          AND d.period_start BETWEEN m.period_start AND m.period_end AND d.period_end = d.period_start
        LIMIT 1) AS daily"""

# The sums of 0006's day sums (its DELTAS, every sign +1), over the shadowed rows ``m`` of the keys ``k``.
SHADOWED_SUMS = f"""
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
FROM {{keys}} AS k
JOIN imports_urlmetric AS m
  ON m.site_target_id = k.site_target_id AND m.period_end = k.period_end AND m.period_start = k.period_start
 AND m.import_id IS NOT DISTINCT FROM k.import_id AND m.period_end > m.period_start
CROSS JOIN LATERAL (SELECT coalesce(m.position_weight, nullif(m.impressions, 0), 1) AS weight) AS w
{SHADOWED}
GROUP BY m.site_target_id, m.period_end, m.period_start, m.import_id
ORDER BY m.site_target_id, m.period_end, m.period_start, m.import_id
"""

TABLES = f"""
CREATE TYPE imports_sitepage_day_key AS (site_target_id bigint, period_start date, period_end date, import_id bigint);
CREATE TABLE imports_sitepage_shadowed_sums (LIKE imports_sitepage_day_sums INCLUDING DEFAULTS);
ALTER TABLE imports_sitepage_shadowed_sums ADD CONSTRAINT imports_sitepage_shadowed_sums_key
    UNIQUE NULLS NOT DISTINCT (site_target_id, period_end, period_start, import_id);
CREATE VIEW imports_sitepage_counted_day_sums AS
SELECT d.site_target_id, d.period_start, d.period_end, d.import_id,
       {", ".join(f"d.{c} - coalesce(s.{c}, 0) AS {c}" for c in SUMMED)}
FROM imports_sitepage_day_sums AS d
LEFT JOIN imports_sitepage_shadowed_sums AS s
  -- Import ids are positive: 0 stands for none (deleted since), so that the join may hash.
  ON s.site_target_id = d.site_target_id AND s.period_end = d.period_end AND s.period_start = d.period_start
 AND coalesce(s.import_id, 0) = coalesce(d.import_id, 0)
WHERE d.rows - coalesce(s.rows, 0) > 0;
COMMENT ON VIEW imports_sitepage_counted_day_sums IS
    'imports_sitepage_day_sums less the rows covering several days that daily rows of the same page shadow (0011)';
"""

TRIGGER_FUNCTION = f"""
CREATE FUNCTION imports_sitepage_shadowed_{{op}}() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    targets bigint[];
    keys imports_sitepage_day_key[];
BEGIN
    targets := ARRAY(SELECT DISTINCT c.site_target_id FROM ({{changed}}) AS c ORDER BY 1);
    IF cardinality(targets) = 0 THEN
        RETURN NULL;
    END IF;
    -- Held already when the statement changed a sum; taken here when it changed only a URL.
    PERFORM FROM imports_sitepage_versions WHERE site_target_id = ANY(targets) ORDER BY site_target_id FOR UPDATE;
    -- Daily data only, before and after: nothing is shadowed, nothing to do.
    IF NOT EXISTS (SELECT FROM ({{changed}}) AS c WHERE c.period_end > c.period_start)
       AND NOT EXISTS (SELECT FROM unnest(targets) AS t (id)
                       WHERE EXISTS (SELECT FROM imports_urlmetric AS m
                                     WHERE m.site_target_id = t.id AND m.period_end > m.period_start)) THEN
        RETURN NULL;
    END IF;
    keys := ARRAY(
        SELECT ROW(k.site_target_id, k.period_start, k.period_end, k.import_id)::imports_sitepage_day_key
        FROM (
            SELECT c.site_target_id, c.period_start, c.period_end, c.import_id
            FROM ({{changed}}) AS c WHERE c.period_end > c.period_start
            UNION
            SELECT m.site_target_id, m.period_start, m.period_end, m.import_id
            FROM (SELECT DISTINCT c.site_target_id, c.url_normalized, c.period_start AS day
                  FROM ({{changed}}) AS c WHERE c.period_end = c.period_start) AS d
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
    INSERT INTO imports_sitepage_shadowed_sums {SHADOWED_SUMS.format(keys="unnest(keys)")};
    -- What the site page counts may have changed: its precomputed top pages are stale.
    UPDATE imports_sitepage_versions SET version = nextval('imports_sitepage_version_seq')
    WHERE site_target_id IN (SELECT DISTINCT k.site_target_id FROM unnest(keys) AS k);
    RETURN NULL;
END
$$
"""

TRUNCATE_FUNCTION = """
CREATE FUNCTION imports_sitepage_shadowed_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE imports_sitepage_shadowed_sums;
    RETURN NULL;
END
$$
"""

TRIGGERS = {
    "INSERT": "REFERENCING NEW TABLE AS new_rows",
    "UPDATE": "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows",
    "DELETE": "REFERENCING OLD TABLE AS old_rows",
}


def forward() -> list[str]:
    statements = [TABLES, TRUNCATE_FUNCTION]
    for op, referencing in TRIGGERS.items():
        statements.append(TRIGGER_FUNCTION.format(op=op.lower(), changed=CHANGED[op]))
        # Named after 0006's imports_sitepage_{op}: triggers of one event fire in name order.
        statements.append(f"CREATE TRIGGER imports_sitepage_{op.lower()}_shadowed AFTER {op} ON imports_urlmetric "
                          f"{referencing} FOR EACH STATEMENT EXECUTE FUNCTION imports_sitepage_shadowed_{op.lower()}()")
    statements.append("CREATE TRIGGER imports_sitepage_truncate_shadowed AFTER TRUNCATE ON imports_urlmetric "
                      "FOR EACH STATEMENT EXECUTE FUNCTION imports_sitepage_shadowed_truncate()")
    return statements + FILL


# The rows already there. The triggers exist already: CREATE TRIGGER holds off every writer until this
# transaction commits. The targets with shadowed rows get a new version: their top pages change.
FILL = [
    "INSERT INTO imports_sitepage_shadowed_sums " + SHADOWED_SUMS.format(
        keys="(SELECT DISTINCT site_target_id, period_start, period_end, import_id FROM imports_urlmetric "
             "WHERE period_end > period_start)"),
    """UPDATE imports_sitepage_versions SET version = nextval('imports_sitepage_version_seq')
       WHERE site_target_id IN (SELECT site_target_id FROM imports_sitepage_shadowed_sums)""",
]

BACKWARD = [
    *(f"DROP TRIGGER imports_sitepage_{op}_shadowed ON imports_urlmetric"
      for op in ("insert", "update", "delete", "truncate")),
    *(f"DROP FUNCTION imports_sitepage_shadowed_{op}()" for op in ("insert", "update", "delete", "truncate")),
    "DROP VIEW imports_sitepage_counted_day_sums",
    "DROP TABLE imports_sitepage_shadowed_sums",
    "DROP TYPE imports_sitepage_day_key",
]


class Migration(migrations.Migration):

    dependencies = [
        ("imports", "0010_urlmetric_page_periods"),
    ]

    operations = [
        migrations.RunSQL(sql=forward(), reverse_sql=BACKWARD),
    ]
