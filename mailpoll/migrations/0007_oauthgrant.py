"""OAuthGrant: a mailbox's OAuth tokens, encrypted, with their state (active | needs_reauth)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('mailpoll', '0006_status_checks'),
    ]

    operations = [
        migrations.CreateModel(
            name='OAuthGrant',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('provider', models.CharField(choices=[('google', 'Google'), ('microsoft', 'Microsoft')], max_length=10)),
                ('state', models.CharField(choices=[('active', 'Active'), ('needs_reauth', 'Needs re-authorization')], default='active', max_length=12)),
                ('refresh_token', models.TextField(blank=True, editable=False, help_text='Encrypted.')),
                ('token_cache', models.TextField(blank=True, editable=False, help_text='Encrypted.')),
                ('access_token', models.TextField(blank=True, editable=False, help_text='Encrypted.')),
                ('access_expires_at', models.DateTimeField(blank=True, null=True)),
                ('authorized_at', models.DateTimeField()),
                ('last_refreshed_at', models.DateTimeField(blank=True, null=True)),
                ('failure_reason', models.TextField(blank=True)),
                ('failed_at', models.DateTimeField(blank=True, null=True)),
                ('mailbox', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='oauth_grant', to='mailpoll.mailbox')),
            ],
            options={
                'constraints': [models.CheckConstraint(condition=models.Q(('provider__in', ['google', 'microsoft'])), name='oauthgrant_provider_valid'), models.CheckConstraint(condition=models.Q(('state__in', ['active', 'needs_reauth'])), name='oauthgrant_state_valid'), models.CheckConstraint(condition=models.Q(models.Q(('state', 'needs_reauth'), _negated=True), models.Q(models.Q(('failure_reason', ''), _negated=True), ('failed_at__isnull', False)), _connector='OR'), name='oauthgrant_needs_reauth_has_reason'), models.CheckConstraint(condition=models.Q(models.Q(('refresh_token', ''), _negated=True), models.Q(('token_cache', ''), _negated=True), _connector='OR'), name='oauthgrant_has_refresh_material'), models.CheckConstraint(condition=models.Q(('access_token', ''), ('access_expires_at__isnull', False), _connector='OR'), name='oauthgrant_access_token_has_expiry')],
            },
        ),
    ]
