"""A failing mailbox's backoff (next_attempt_at), and a positive poll_interval."""

from datetime import timedelta

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('mailpoll', '0003_folder_progress'),
    ]

    operations = [
        migrations.AddField(
            model_name='mailbox',
            name='next_attempt_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddConstraint(
            model_name='mailbox',
            constraint=models.CheckConstraint(condition=models.Q(poll_interval__gt=timedelta(0)),
                                              name='mailbox_poll_interval_positive'),
        ),
    ]
