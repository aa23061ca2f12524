"""Placeholder filled by the change that needs it."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('mailpoll', '0005_content'),
        ('seoinsight', '0004_secrets'),
    ]

    operations = []
