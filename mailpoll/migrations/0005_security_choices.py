"""Mailbox.security holds one of its choices: an unknown value never means plain text."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('mailpoll', '0004_mailbox_backoff'),
    ]

    operations = [
        migrations.AddConstraint(
            model_name='mailbox',
            constraint=models.CheckConstraint(
                condition=models.Q(('security__in', ['tls', 'starttls', 'none'])), name='mailbox_security_valid'
            ),
        ),
    ]
