"""The mail intake's line on the admin index's "Waiting for you" (``seoinsight.waiting``): failing mailboxes.

Failing is ``mailpoll.health``'s rule (enabled, and its last poll failed), the one the mailbox list's health
filter applies, so the count and the list behind its link are the same rows of the user's orgs.
"""

from __future__ import annotations

from django.urls import reverse

from seoinsight import waiting

from .health import FAILING, FILTERS
from .models import Mailbox

LABEL = "failing mailboxes"


def register() -> None:
    waiting.register(
        LABEL, lambda: reverse("admin:mailpoll_mailbox_changelist") + f"?health={FAILING}",
        lambda request: waiting.admin_count(request, Mailbox, FILTERS[FAILING]))
