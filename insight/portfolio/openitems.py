"""What else is open on each site of the portfolio, beside its alerts: failed imports not yet retried, failing mailboxes.

Each rule is its owner's: an alert is open until acknowledged (``insight.alerts.open``); a failed import
waits until it is retried (``imports.waiting_queues``: status failed); a mailbox is failing by
``mailpoll.health``. A mailbox is a site's when its documents go there: its fallback target is one of
the site's, or an enabled rule routes to one (a rule naming no mailbox routes any of the org's).
"""

from __future__ import annotations

from collections import defaultdict

from imports.models import Import, ImportStatus
from mailpoll.health import FAILING, FILTERS
from mailpoll.models import Mailbox, MailRule, RuleAction


def failed_imports(org_id: str, site_ids: list[int]) -> dict[int, list[Import]]:
    """Each site's failed imports, newest first."""
    found = defaultdict(list)
    rows = (Import.objects.for_org(org_id).filter(status=ImportStatus.FAILED, site_target__site_id__in=site_ids)
            .select_related("site_target").order_by("-created_at", "-pk"))
    for imp in rows:
        found[imp.site_target.site_id].append(imp)
    return found


def failing_mailboxes(org_id: str, site_ids: list[int]) -> dict[int, list[Mailbox]]:
    """Each site's failing mailboxes, by name."""
    failing = list(Mailbox.objects.filter(FILTERS[FAILING], org_id=org_id).select_related("site_target")
                   .order_by("name", "pk"))
    if not failing:
        return {}
    routes = (MailRule.objects.filter(org_id=org_id, enabled=True, action=RuleAction.ROUTE,
                                      site_target__site_id__in=site_ids)
              .select_related("site_target").prefetch_related("mailboxes"))
    fed = defaultdict(set)  # mailbox id -> the sites it feeds
    for rule in routes:
        named = {mailbox.pk for mailbox in rule.mailboxes.all()}
        for mailbox in failing:
            if not named or mailbox.pk in named:
                fed[mailbox.pk].add(rule.site_target.site_id)
    found = defaultdict(list)
    wanted = set(site_ids)
    for mailbox in failing:
        sites = fed[mailbox.pk] | ({mailbox.site_target.site_id} if mailbox.site_target else set())
        for site_id in sorted(sites & wanted):
            found[site_id].append(mailbox)
    return found
