"""The alerts' line on the admin index's "Waiting for you" (``seoinsight.waiting``): unacknowledged alerts.

An alert waits for a person until someone acknowledges it: the count is the admin list's ``acknowledged=no``
rows of the user's orgs, and the link is that filter.
"""

from __future__ import annotations

from django.urls import reverse

from seoinsight import waiting

from ..models import Alert

LABEL = "unacknowledged alerts"


def register() -> None:
    waiting.register(
        LABEL, lambda: reverse("admin:insight_alert_changelist") + "?acknowledged=no",
        lambda request: waiting.admin_count(request, Alert, acknowledged_at__isnull=True))
