"""Mailbox health, one definition: the admin's badge and filter read it, and so will /health and metrics.

A disabled mailbox has no health, only "disabled". An enabled one is failing
while its last poll failed (``consecutive_failures``, reset by a success), else
healthy once a poll has succeeded, else never polled.
"""

from __future__ import annotations

from typing import NamedTuple

from django.db.models import Q

DISABLED = "disabled"
FAILING = "failing"
NEVER = "never"
HEALTHY = "healthy"


class Health(NamedTuple):
    state: str  # one of DISABLED, FAILING, NEVER, HEALTHY
    label: str  # for a person: "failing 3 in a row", "never polled", "OK"


def health(enabled: bool, consecutive_failures: int, last_success_at) -> Health:
    """The health of a mailbox with these fields (``mailbox_health`` reads them off a Mailbox)."""
    if not enabled:
        return Health(DISABLED, "disabled")
    if consecutive_failures > 0:
        return Health(FAILING, f"failing {consecutive_failures} in a row")
    if last_success_at is None:
        return Health(NEVER, "never polled")
    return Health(HEALTHY, "OK")


def mailbox_health(mailbox) -> Health:
    return health(mailbox.enabled, mailbox.consecutive_failures, mailbox.last_success_at)


# The same rules as filters on Mailbox, state by state (a test holds the two together).
FILTERS = {
    DISABLED: Q(enabled=False),
    FAILING: Q(enabled=True, consecutive_failures__gt=0),
    NEVER: Q(enabled=True, consecutive_failures__lte=0, last_success_at__isnull=True),
    HEALTHY: Q(enabled=True, consecutive_failures__lte=0, last_success_at__isnull=False),
}
