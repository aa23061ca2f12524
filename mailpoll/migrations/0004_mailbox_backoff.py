"""Placeholder filled by the change that needs it."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('mailpoll', '0003_folder_progress'),
    ]

    operations = []
