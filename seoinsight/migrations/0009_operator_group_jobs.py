# Written by hand: the "Operator" group again, now that it may act on its org's jobs (retry a failed import
# from the jobs list) and view the process list (operator_group.GRANTED).

from django.db import migrations

from seoinsight.operator_group import sync_migration


class Migration(migrations.Migration):
    dependencies = [
        ("seoinsight", "0008_operator_group_column_mapping"),
        ("jobs", "0011_schedule_last_job_foreign_key"),
    ]

    operations = [
        migrations.RunPython(sync_migration, migrations.RunPython.noop),
    ]
