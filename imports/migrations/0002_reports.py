"""What an import was read with (sheet, date order) and how a URL's rows were added up (source_rows, position_weight)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('imports', '0001_initial'),
    ]

    operations = [
        migrations.AddField(
            model_name='import',
            name='sheet',
            field=models.CharField(blank=True, max_length=100),
        ),
        migrations.AddField(
            model_name='import',
            name='date_order',
            field=models.CharField(blank=True, choices=[('dmy', 'Day first (31/12/2026)'),
                                                        ('mdy', 'Month first (12/31/2026)')], max_length=3),
        ),
        migrations.AddField(
            model_name='urlmetric',
            name='source_rows',
            field=models.PositiveIntegerField(db_default=1, default=1),
        ),
        migrations.AddField(
            model_name='urlmetric',
            name='position_weight',
            field=models.FloatField(blank=True, null=True),
        ),
    ]
