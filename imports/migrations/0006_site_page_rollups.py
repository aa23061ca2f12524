"""The site page's precomputed figures (imports/sitepage/): internal tables, kept by triggers on imports_urlmetric.

``imports_sitepage_day_sums``: per site target, row period and import, the sums behind the page's totals,
chart, imports and edges — a few hundred rows where the metric table holds millions. Statement-level
triggers with transition tables keep it in the transaction that writes the metric rows (INSERT, UPDATE,
DELETE; TRUNCATE empties every table here), so it is exact whenever it is read. Sums are numeric, so a
delta taken back is taken back exactly; beside each, the count of rows that have the figure, so that a
figure no row has reads as unknown (NULL), as the sum over the rows gives it. A key whose rows are all
gone is deleted.

``imports_sitepage_versions``: per site target, a new value of ``imports_sitepage_version_seq`` (never
reused) each time a statement changes a figure, a key or the import of the target's rows.

``imports_sitepage_url_periods`` / ``imports_sitepage_url_sums``: per site target and period, each URL's
sums and its clicks in the previous period — the top pages of a preset —, written by the
``refresh_site_page`` job (imports/sitepage/cache.py) with the version they were computed at. The page
reads them only while that version is still the target's; otherwise it sums the metric rows.

Lock order, so that two imports into one target never deadlock here: a statement's trigger locks its
targets' version rows first (in target order), then their day sums (in key order). Only the holder of
a target's version row writes its day sums, and imports write one metric statement per transaction
(ingest.write_batch), so a version row's holder never waits for another writer.

No foreign keys: Django's flush truncates the tables it knows without CASCADE. A target's rows are
deleted with it (Django's cascade), which empties its day sums and drops its cached top pages.

The triggers' SQL is written out here, not imported: this migration keeps meaning what it meant.
"""

from django.db import migrations

# The metric columns the sums depend on; a change to any other (page_id, url, updated_at) changes nothing here.
COLUMNS = ("site_target_id", "period_start", "period_end", "import_id", "clicks", "impressions", "position",
           "position_weight")
_COLUMN_LIST = ", ".join(COLUMNS)

# What a statement changed, as signed metric rows: +1 each row it wrote, -1 each row it removed.
CHANGED = {
    "INSERT": f"SELECT 1 AS sign, {_COLUMN_LIST} FROM new_rows",
    "DELETE": f"SELECT -1 AS sign, {_COLUMN_LIST} FROM old_rows",
    # Every updated row out and back in: what did not change adds up to nothing and is left out below
    # (map_reconcile's page_id updates). Summing both is cheaper than joining them to compare.
    "UPDATE": f"SELECT -1 AS sign, {_COLUMN_LIST} FROM old_rows UNION ALL SELECT 1, {_COLUMN_LIST} FROM new_rows",
}

# Per key, what the changed rows add to its sums (the site page's SUMS, signed); keys whose change is nil left out.
DELTAS = """
SELECT *
FROM (
    SELECT r.site_target_id, r.period_start, r.period_end, r.import_id,
           sum(r.sign) AS rows,
           coalesce(sum(r.sign * r.clicks), 0) AS clicks,
           coalesce(sum(r.sign) FILTER (WHERE r.clicks IS NOT NULL), 0) AS clicks_rows,
           coalesce(sum(r.sign * r.impressions), 0) AS impressions,
           coalesce(sum(r.sign) FILTER (WHERE r.impressions IS NOT NULL), 0) AS impressions_rows,
           coalesce(sum(r.sign * r.clicks) FILTER (WHERE r.impressions IS NOT NULL), 0) AS ctr_clicks,
           coalesce(sum(r.sign * r.impressions) FILTER (WHERE r.clicks IS NOT NULL), 0) AS ctr_impressions,
           coalesce(sum(r.sign) FILTER (WHERE r.clicks IS NOT NULL AND r.impressions IS NOT NULL), 0) AS ctr_rows,
           coalesce(sum(r.sign * (r.position * w.weight)::numeric), 0) AS position_sum,
           coalesce(sum(r.sign * w.weight::numeric) FILTER (WHERE r.position IS NOT NULL), 0) AS position_weight,
           coalesce(sum(r.sign) FILTER (WHERE r.position IS NOT NULL), 0) AS position_rows
    FROM ({changed}) AS r
    -- ingest.position_weight's rule; rows written before that column existed are weighted by their impressions.
    CROSS JOIN LATERAL (SELECT coalesce(r.position_weight, nullif(r.impressions, 0), 1) AS weight) AS w
    GROUP BY r.site_target_id, r.period_start, r.period_end, r.import_id
) AS d
WHERE (d.rows, d.clicks, d.clicks_rows, d.impressions, d.impressions_rows, d.ctr_clicks, d.ctr_impressions,
       d.ctr_rows, d.position_sum, d.position_weight, d.position_rows) <> (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
ORDER BY d.site_target_id, d.period_end, d.period_start, d.import_id
"""

SUMMED = ("rows", "clicks", "clicks_rows", "impressions", "impressions_rows", "ctr_clicks", "ctr_impressions",
          "ctr_rows", "position_sum", "position_weight", "position_rows")

TRIGGER_FUNCTION = """
CREATE FUNCTION imports_sitepage_{op}() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    deltas imports_sitepage_day_sums[] := ARRAY(SELECT d::imports_sitepage_day_sums FROM ({deltas}) AS d);
BEGIN
    IF cardinality(deltas) = 0 THEN
        RETURN NULL;
    END IF;
    INSERT INTO imports_sitepage_versions AS v (site_target_id, version)
    SELECT t.site_target_id, nextval('imports_sitepage_version_seq')
    FROM (SELECT DISTINCT d.site_target_id FROM unnest(deltas) AS d) AS t
    ORDER BY t.site_target_id
    ON CONFLICT (site_target_id) DO UPDATE SET version = EXCLUDED.version;

    INSERT INTO imports_sitepage_day_sums AS s
    SELECT * FROM unnest(deltas) AS d ORDER BY d.site_target_id, d.period_end, d.period_start, d.import_id
    ON CONFLICT ON CONSTRAINT imports_sitepage_day_sums_key DO UPDATE
    SET {added};

    DELETE FROM imports_sitepage_day_sums AS s
    USING unnest(deltas) AS d
    WHERE s.site_target_id = d.site_target_id AND s.period_end = d.period_end AND s.period_start = d.period_start
      AND s.import_id IS NOT DISTINCT FROM d.import_id AND s.rows = 0;
    {after}
    RETURN NULL;
END
$$
"""
# A delete drops the cached top pages of its targets: stale from now on, and a deleted target's would stay forever.
AFTER_DELETE = """
    DELETE FROM imports_sitepage_url_sums WHERE site_target_id IN (SELECT d.site_target_id FROM unnest(deltas) AS d);
    DELETE FROM imports_sitepage_url_periods WHERE site_target_id IN (SELECT d.site_target_id FROM unnest(deltas) AS d);
"""

TABLES = """
CREATE SEQUENCE imports_sitepage_version_seq;
CREATE TABLE imports_sitepage_versions (
    site_target_id bigint PRIMARY KEY,
    version bigint NOT NULL
);
CREATE TABLE imports_sitepage_day_sums (
    site_target_id bigint NOT NULL,
    period_start date NOT NULL,
    period_end date NOT NULL,
    import_id bigint,  -- NULL: an import deleted since
    rows bigint NOT NULL,
    clicks numeric NOT NULL,
    clicks_rows bigint NOT NULL,
    impressions numeric NOT NULL,
    impressions_rows bigint NOT NULL,
    ctr_clicks numeric NOT NULL,
    ctr_impressions numeric NOT NULL,
    ctr_rows bigint NOT NULL,
    position_sum numeric NOT NULL,
    position_weight numeric NOT NULL,
    position_rows bigint NOT NULL,
    CONSTRAINT imports_sitepage_day_sums_key
        UNIQUE NULLS NOT DISTINCT (site_target_id, period_end, period_start, import_id)
);
CREATE TABLE imports_sitepage_url_periods (
    site_target_id bigint NOT NULL,
    period_start date NOT NULL,
    period_end date NOT NULL,
    version bigint,  -- the target's version the sums were computed at; NULL: it had none (no rows ever)
    computed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (site_target_id, period_start, period_end)
);
CREATE TABLE imports_sitepage_url_sums (
    site_target_id bigint NOT NULL,
    period_start date NOT NULL,
    period_end date NOT NULL,
    url_normalized text NOT NULL,
    rows bigint NOT NULL,  -- 0: a URL with rows in the previous period only
    clicks numeric,
    impressions numeric,
    ctr_clicks numeric,
    ctr_impressions numeric,
    position_sum float8,
    position_weight float8,
    previous_clicks numeric,
    PRIMARY KEY (site_target_id, period_start, period_end, url_normalized)
);
"""

TRUNCATE_FUNCTION = """
CREATE FUNCTION imports_sitepage_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE imports_sitepage_day_sums, imports_sitepage_versions, imports_sitepage_url_periods,
             imports_sitepage_url_sums;
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
    added = ", ".join(f"{column} = s.{column} + EXCLUDED.{column}" for column in SUMMED)
    statements = [TABLES, TRUNCATE_FUNCTION]
    for op, referencing in TRIGGERS.items():
        statements.append(TRIGGER_FUNCTION.format(op=op.lower(), deltas=DELTAS.format(changed=CHANGED[op]),
                                                  added=added, after=AFTER_DELETE if op == "DELETE" else ""))
        statements.append(f"CREATE TRIGGER imports_sitepage_{op.lower()} AFTER {op} ON imports_urlmetric "
                          f"{referencing} FOR EACH STATEMENT EXECUTE FUNCTION imports_sitepage_{op.lower()}()")
    statements.append("CREATE TRIGGER imports_sitepage_truncate AFTER TRUNCATE ON imports_urlmetric "
                      "FOR EACH STATEMENT EXECUTE FUNCTION imports_sitepage_truncate()")
    return statements + FILL


# The rows already there, as if inserted now. The triggers exist already: CREATE TRIGGER holds off every
# writer until this transaction commits, so no row is counted twice or missed.
FILL = [
    "INSERT INTO imports_sitepage_day_sums "
    + DELTAS.format(changed=f"SELECT 1 AS sign, {_COLUMN_LIST} FROM imports_urlmetric"),
    """INSERT INTO imports_sitepage_versions (site_target_id, version)
       SELECT site_target_id, nextval('imports_sitepage_version_seq')
       FROM (SELECT DISTINCT site_target_id FROM imports_sitepage_day_sums ORDER BY 1) AS t""",
]


BACKWARD = [
    *(f"DROP TRIGGER imports_sitepage_{op} ON imports_urlmetric" for op in ("insert", "update", "delete", "truncate")),
    *(f"DROP FUNCTION imports_sitepage_{op}()" for op in ("insert", "update", "delete", "truncate")),
    "DROP TABLE imports_sitepage_url_sums, imports_sitepage_url_periods, imports_sitepage_day_sums, "
    "imports_sitepage_versions",
    "DROP SEQUENCE imports_sitepage_version_seq",
]


class Migration(migrations.Migration):

    dependencies = [
        ('imports', '0005_import_outcome'),
    ]

    operations = [
        migrations.RunSQL(sql=forward(), reverse_sql=BACKWARD),
    ]
