"""Folder cursors record an unfinished sweep and the folder's own error (issue 9: items 1, 3, 6, 7)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('mailpoll', '0002_request_org_index_covered_by_unique'),
    ]

    operations = [
        migrations.AlterField(
            model_name='foldercursor',
            name='uidvalidity',
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='foldercursor',
            name='last_uid',
            field=models.BigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='foldercursor',
            name='sweep_until',
            field=models.BigIntegerField(
                blank=True, null=True,
                help_text='An unfinished sweep of the folder: its last UID when the sweep began. Empty once done.'),
        ),
        migrations.AddField(
            model_name='foldercursor',
            name='sweep_since',
            field=models.DateField(blank=True, null=True, help_text="The date of an unfinished 'since' sweep."),
        ),
        migrations.AddField(
            model_name='foldercursor',
            name='last_error',
            field=models.TextField(blank=True, default=''),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name='foldercursor',
            name='last_error_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddConstraint(
            model_name='foldercursor',
            constraint=models.CheckConstraint(
                condition=models.Q(('uidvalidity__isnull', False),
                                   models.Q(('last_uid', 0), ('sweep_until__isnull', True)), _connector='OR'),
                name='cursor_position_needs_uidvalidity'),
        ),
        migrations.AddConstraint(
            model_name='foldercursor',
            constraint=models.CheckConstraint(
                condition=models.Q(('sweep_since__isnull', True), ('sweep_until__isnull', False), _connector='OR'),
                name='cursor_sweep_since_only_in_a_sweep'),
        ),
    ]
