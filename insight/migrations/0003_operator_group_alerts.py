# Written by hand: the "Operator" group again, now that it may see and acknowledge its org's alerts
# (operator_group.GRANTED: insight.alert view and change).

from django.db import migrations

from seoinsight.operator_group import sync_migration


class Migration(migrations.Migration):
    dependencies = [
        ("insight", "0002_alert_thresholds_digests"),
        ("seoinsight", "0009_operator_group_jobs"),
    ]

    operations = [
        migrations.RunPython(sync_migration, migrations.RunPython.noop),
    ]
