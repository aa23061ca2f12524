# Written by hand: the "Operator" group again, now that imports.ColumnMapping's permissions exist.

from django.db import migrations

from seoinsight.operator_group import sync_migration


class Migration(migrations.Migration):
    dependencies = [
        ("seoinsight", "0007_operator_group"),
        ("imports", "0007_column_mapping"),
    ]

    operations = [
        migrations.RunPython(sync_migration, migrations.RunPython.noop),
    ]
