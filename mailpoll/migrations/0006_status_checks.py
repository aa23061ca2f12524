"""Statuses and kinds hold one of their choices, and the fields that go with a status are there.

``MailboxQuerySet`` (its unused ``due()``) is gone too, which changes no table.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('mailpoll', '0005_security_choices'),
    ]

    operations = [
        migrations.AddConstraint(
            model_name='request',
            constraint=models.CheckConstraint(
                condition=models.Q(('status__in', ['accepted', 'rejected'])), name='request_status_valid'
            ),
        ),
        migrations.AddConstraint(
            model_name='request',
            constraint=models.CheckConstraint(
                condition=models.Q(models.Q(('status', 'rejected'), _negated=True),
                                   models.Q(('reject_reason', ''), _negated=True), _connector='OR'),
                name='request_rejected_has_reason',
            ),
        ),
        migrations.AddConstraint(
            model_name='attachment',
            constraint=models.CheckConstraint(
                condition=models.Q(('status__in', ['pending', 'processing', 'done', 'failed', 'skipped'])),
                name='attachment_status_valid',
            ),
        ),
        migrations.AddConstraint(
            model_name='attachment',
            constraint=models.CheckConstraint(
                condition=models.Q(('kind__in', ['file', 'body'])), name='attachment_kind_valid'
            ),
        ),
        migrations.AddConstraint(
            model_name='attachment',
            constraint=models.CheckConstraint(
                condition=models.Q(models.Q(('status__in', ['processing', 'done']), _negated=True),
                                   ('processing_started_at__isnull', False), _connector='OR'),
                name='attachment_started_when_processed',
            ),
        ),
        migrations.AddConstraint(
            model_name='attachment',
            constraint=models.CheckConstraint(
                condition=models.Q(models.Q(('status__in', ['pending', 'skipped']), _negated=True),
                                   ('processing_started_at__isnull', True), _connector='OR'),
                name='attachment_unstarted_when_waiting',
            ),
        ),
        migrations.AddConstraint(
            model_name='attachment',
            constraint=models.CheckConstraint(
                condition=models.Q(models.Q(('status', 'failed'), _negated=True),
                                   models.Q(('error', ''), _negated=True), _connector='OR'),
                name='attachment_failed_has_error',
            ),
        ),
    ]
