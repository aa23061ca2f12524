"""An import's outcome (what a done import brought in), its re-import's source (once per target), and ZIP as a
format of its own.

The imports done before this migration get the outcome ``outcomes.decide_outcome`` gives their counts (the rule
as it stands here, written out in SQL so this migration keeps meaning what it meant), and a .zip that was
recorded as CSV becomes ZIP, before the CHECK that holds every later row to a valid outcome.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('imports', '0004_site_page_indexes'),
    ]

    operations = [
        migrations.AddField(
            model_name='import',
            name='outcome',
            field=models.CharField(blank=True, choices=[('imported', 'Imported'), ('mostly_skipped', 'Mostly skipped'), ('nothing_imported', 'Nothing imported')], max_length=20),
        ),
        migrations.AddField(
            model_name='import',
            name='reimport_of',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='reimports', to='imports.import'),
        ),
        migrations.AlterField(
            model_name='import',
            name='kind',
            field=models.CharField(choices=[('csv', 'CSV'), ('xlsx', 'Excel'), ('zip', 'ZIP'), ('api', 'Search Console API')], max_length=10),
        ),
        migrations.RunSQL(
            sql=[
                """UPDATE imports_import SET outcome = CASE
                       WHEN skipped + errors >= read THEN 'nothing_imported'
                       WHEN (skipped + errors) * 2 > read THEN 'mostly_skipped'
                       ELSE 'imported' END
                   WHERE status = 'done'""",
                "UPDATE imports_import SET kind = 'zip' WHERE kind = 'csv' AND lower(original_filename) LIKE '%.zip'",
            ],
            reverse_sql=["UPDATE imports_import SET kind = 'csv' WHERE kind = 'zip'"],
        ),
        migrations.AddConstraint(
            model_name='import',
            constraint=models.UniqueConstraint(condition=models.Q(('reimport_of__isnull', False)), fields=('reimport_of', 'site_target'), name='import_reimport_once_per_target'),
        ),
        migrations.AddConstraint(
            model_name='import',
            constraint=models.CheckConstraint(condition=models.Q(('outcome', ''), models.Q(('outcome__in', ['imported', 'mostly_skipped', 'nothing_imported']), ('status', 'done')), _connector='OR'), name='import_outcome_when_done'),
        ),
    ]
