"""Placeholder filled by the change that needs it."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('seoinsight', '0003_sitetarget_credentials'),
    ]

    operations = []
