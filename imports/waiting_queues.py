"""The imports' line on the admin index's "Waiting for you" (``seoinsight.waiting``): failed imports.

A failed import waits for a person until it is retried (the same Import goes back to queued), so the
count is the admin list's ``status=failed`` rows of the user's orgs, and the link is that filter.
"""

from __future__ import annotations

from django.urls import reverse

from seoinsight import waiting

from .models import Import, ImportStatus

LABEL = "failed imports not yet retried"


def register() -> None:
    waiting.register(
        LABEL, lambda: reverse("admin:imports_import_changelist") + f"?status__exact={ImportStatus.FAILED}",
        lambda request: waiting.admin_count(request, Import, status=ImportStatus.FAILED))
