# Written by hand: the "Operator" group again, now that it may add, correct and delete its org's notes
# (operator_group.GRANTED: insight.annotation view, add, change and delete).

from django.db import migrations

from seoinsight.operator_group import sync_migration


class Migration(migrations.Migration):
    dependencies = [
        ("insight", "0003_operator_group_alerts"),
    ]

    operations = [
        migrations.RunPython(sync_migration, migrations.RunPython.noop),
    ]
