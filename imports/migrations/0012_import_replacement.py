"""Replacements are visible: ImportReplacement, counted by a trigger in the transaction that replaces figures.

ingest's upsert updates a row another import had written (a re-import, or an Excel file over a pull's days):
the statement-level trigger ``imports_replacement_update`` joins the statement's old and new rows by id and
adds, per (new import, old import), the rows whose import changed to a non-NULL one. An import deleted sets
its rows' import to NULL: that is not a replacement, and is not counted. No figure is replaced unsaid.
The SQL is written out here, not imported: this migration keeps meaning what it meant.
"""

import django.db.models.deletion
from django.db import migrations, models


TRIGGER_FUNCTION = """
CREATE FUNCTION imports_replacement_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- In key order: two imports replacing each other's figures at once take these rows in one order.
    INSERT INTO imports_importreplacement AS r (import_id, replaced_import_id, figures)
    SELECT n.import_id, o.import_id, count(*)
    FROM old_rows AS o JOIN new_rows AS n USING (id)
    WHERE n.import_id IS NOT NULL AND o.import_id IS DISTINCT FROM n.import_id
    GROUP BY n.import_id, o.import_id
    ORDER BY n.import_id, o.import_id
    ON CONFLICT (import_id, replaced_import_id) DO UPDATE SET figures = r.figures + EXCLUDED.figures;
    RETURN NULL;
END
$$
"""
TRIGGER = ("CREATE TRIGGER imports_replacement_update AFTER UPDATE ON imports_urlmetric "
           "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows "
           "FOR EACH STATEMENT EXECUTE FUNCTION imports_replacement_update()")
BACKWARD = ["DROP TRIGGER imports_replacement_update ON imports_urlmetric",
            "DROP FUNCTION imports_replacement_update()"]


class Migration(migrations.Migration):

    dependencies = [
        ('imports', '0011_sitepage_counted_once'),
    ]

    operations = [
        migrations.CreateModel(
            name='ImportReplacement',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('figures', models.BigIntegerField()),
                ('replaced_import', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='replaced_by', to='imports.import')),
                ('source_import', models.ForeignKey(db_column='import_id', on_delete=django.db.models.deletion.CASCADE, related_name='replacements', to='imports.import')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('source_import', 'replaced_import'), name='importreplacement_pair')],
            },
        ),
        migrations.RunSQL(sql=[TRIGGER_FUNCTION, TRIGGER], reverse_sql=BACKWARD),
    ]
