"""The replacement trigger of 0012 pairs old and new rows by grouping on id, not by a join.

A statement-level trigger's query without parameters is planned once per session, with the transition
tables' sizes of its first run: an import whose first batch replaced a handful of rows then joined
5,000 old rows to 5,000 new ones by nested loop on every later batch (65 s instead of 6 s for 200,000
rows). Grouping the old and new rows by id costs the same whatever the plan: one pass, hashed or sorted.
The SQL is written out here, not imported: this migration keeps meaning what it meant.
"""

from django.db import migrations

FUNCTION = """
CREATE OR REPLACE FUNCTION imports_replacement_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- In key order: two imports replacing each other's figures at once take these rows in one order.
    INSERT INTO imports_importreplacement AS r (import_id, replaced_import_id, figures)
    SELECT p.new_import, p.old_import, count(*)
    FROM (
        SELECT max(x.import_id) FILTER (WHERE x.new) AS new_import,
               max(x.import_id) FILTER (WHERE NOT x.new) AS old_import
        FROM (SELECT id, import_id, false AS new FROM old_rows
              UNION ALL
              SELECT id, import_id, true FROM new_rows) AS x
        GROUP BY x.id
    ) AS p
    WHERE p.new_import IS NOT NULL AND p.old_import IS DISTINCT FROM p.new_import
    GROUP BY p.new_import, p.old_import
    ORDER BY p.new_import, p.old_import
    ON CONFLICT (import_id, replaced_import_id) DO UPDATE SET figures = r.figures + EXCLUDED.figures;
    RETURN NULL;
END
$$
"""


def backward() -> list[str]:
    from importlib import import_module

    before = import_module("imports.migrations.0012_import_replacement")
    return [before.TRIGGER_FUNCTION.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")]


class Migration(migrations.Migration):

    dependencies = [
        ("imports", "0014_sitepage_shadowed_triggers_once"),
    ]

    operations = [
        migrations.RunSQL(sql=FUNCTION, reverse_sql=backward()),
    ]
