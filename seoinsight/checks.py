"""System checks: secrets keys that would silently weaken or break secrets at rest, an unscoped admin, core settings."""

from cryptography.fernet import Fernet
from django.core import checks

from . import conf, crypto


@checks.register(checks.Tags.security, deploy=True)
def check_secrets_keys_in_production(app_configs=None, **kwargs):
    """With the derived key, a database dump plus SECRET_KEY reads every stored secret."""
    if not crypto.uses_derived_key():
        return []
    return [
        checks.Warning(
            "Secrets at rest (mailbox passwords, service-account keys) are encrypted with a key derived "
            "from SECRET_KEY: anyone with a database dump and SECRET_KEY reads them, and changing SECRET_KEY "
            "without SECRET_KEY_FALLBACKS makes them unreadable.",
            hint="Set SECRETS_KEYS to a key of its own (python -c 'from cryptography.fernet import Fernet; "
            "print(Fernet.generate_key().decode())'), then run manage.py rotatesecrets. See README, Secrets.",
            id="seoinsight.W001",
        )
    ]


@checks.register(checks.Tags.security)
def check_secrets_keys_are_fernet_keys(app_configs=None, **kwargs):
    errors = []
    for position, key in enumerate(crypto.configured_keys(), start=1):
        try:
            Fernet(key)
        except ValueError:
            errors.append(
                checks.Error(
                    f"SECRETS_KEYS entry {position} is not a Fernet key (32 url-safe base64-encoded bytes).",
                    hint="Generate one with Fernet.generate_key(); keys are comma-separated, newest first.",
                    id="seoinsight.E002",
                )
            )
    return errors


@checks.register(checks.Tags.admin)
def check_every_admin_is_org_scoped(app_configs=None, **kwargs):
    """A ModelAdmin without the org scope would show every org's rows to any staff user."""
    from .orgscope import unscoped_admins

    return [
        checks.Error(
            f"{name} is not scoped by org: a staff user would reach every org's rows.",
            hint="Mix in seoinsight.orgscope.OrgScopedAdmin (OrgScopedInline for an inline) before the admin "
            "class, or SuperuserOnlyAdmin for a model that belongs to no org.",
            id="seoinsight.E001",
        )
        for name in unscoped_admins()
    ]


@checks.register()
def check_core_settings(app_configs=None, **kwargs):
    """seoinsight.E003: an environment text of the wrong type; seoinsight.E004: a bound that is not above zero."""
    return conf.SETTINGS.environment_errors("seoinsight.E003") or conf.SETTINGS.not_positive_errors(
        ["QUERY_MAX_PERIOD_DAYS"], "seoinsight.E004")
