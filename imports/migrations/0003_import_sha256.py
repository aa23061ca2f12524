"""An import file's SHA-256, checked by the job before it reads the file."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('imports', '0002_reports'),
    ]

    operations = [
        migrations.AddField(
            model_name='import',
            name='sha256',
            field=models.CharField(blank=True, max_length=64),
        ),
    ]
