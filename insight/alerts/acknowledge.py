"""Acknowledging alerts: who and when, kept once; an alert already acknowledged keeps its first answer.

The admin's action and button and the site-facing endpoint all come here with rows already scoped to the user's org.
"""

from __future__ import annotations

import logging

from django.db.models.functions import Now

from insight.models import Alert

log = logging.getLogger(__name__)


def acknowledge(alerts, user) -> int:
    """Mark the open ones of ``alerts`` (a queryset) acknowledged by ``user`` now; returns how many were open.

    One guarded UPDATE: of two people acknowledging at once, the first is kept and the second changes nothing.
    """
    done = alerts.filter(acknowledged_at__isnull=True).update(acknowledged_at=Now(), acknowledged_by=user)
    if done:
        log.info("user %s acknowledged %s alert(s)", user.pk, done)
    return done


def open_alerts():
    return Alert.objects.filter(acknowledged_at__isnull=True)
