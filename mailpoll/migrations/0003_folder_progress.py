"""Placeholder filled by the change that needs it."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('mailpoll', '0002_request_org_index_covered_by_unique'),
    ]

    operations = []
