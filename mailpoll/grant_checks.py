"""System checks for the deployment-wide service identities and their grants (``oauth.deployment_grants``).

mailpoll.W005  (with --database) a deployment identity is set, more than one org exists, and no org holds a grant
               of it: every keyless service mailbox of that kind fails its polls until a superuser grants it
"""

from __future__ import annotations

from django.core import checks

from . import conf
from .checks import migrated

# What makes each deployment identity exist.
IDENTITY_SETTINGS = {
    "google_service_account": ("MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE",),
    "microsoft_app": ("MAILPOLL_MICROSOFT_CLIENT_ID", "MAILPOLL_MICROSOFT_CLIENT_SECRET"),
}


@checks.register(checks.Tags.database)
def check_deployment_identities_are_granted(app_configs=None, databases=None, **kwargs):
    """Since grants exist, an identity no org was granted reads nothing: said at deploy time, not at each poll."""
    from seoinsight.models import Org

    from .models import DeploymentGrant, DeploymentIdentity

    found = []
    for alias in migrated(databases):
        if Org.objects.using(alias).count() < 2:
            continue
        for identity, names in IDENTITY_SETTINGS.items():
            if not all(conf.get(name) for name in names):
                continue
            if DeploymentGrant.objects.using(alias).filter(identity=identity).exists():
                continue
            found.append(checks.Warning(
                f"{' and '.join(names)} {'is' if len(names) == 1 else 'are'} set, but no org holds a grant of the "
                f"{DeploymentIdentity(identity).label}: with several orgs, it reads no mailbox until a superuser "
                "grants it, and the keyless service mailboxes that relied on it fail their polls.",
                hint="Grant it in the admin (Mail intake › Deployment grants) to the org that owns those "
                     "mailboxes, with the domains or addresses (and Microsoft tenant) it may read; other orgs "
                     "store their own key or app, or use Connect.",
                id="mailpoll.W005"))
    return found
