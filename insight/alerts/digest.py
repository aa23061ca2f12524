"""The daily alerts digest: one mail per member who asked for it, per org and day, of the alerts new to them.

A digest is taken once (``DigestSent``, UNIQUE per user, org and day, with the alerts it holds chosen then), sent,
then marked ``sent``. A retry or a second job of the day finds the row: ``sent`` sends nothing, ``sending`` sends
the same alerts again. So a digest is never lost to a failed send, and is sent twice only if the process dies
between the SMTP server's acceptance and the commit of ``sent`` (milliseconds); both copies then carry the same
Message-ID, which mail stores that deduplicate (Gmail among them) show once. Losing a digest would be silent;
a rare second copy is not.
"""

from __future__ import annotations

import logging
from datetime import date, timedelta
from urllib.parse import urlencode

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.db import IntegrityError, transaction
from django.db.models import Exists, F, OuterRef
from django.db.models.functions import Now
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from jobs.queue import enqueue_many
from seoinsight.auth import org_link
from seoinsight.models import Membership, Org

from .. import conf
from ..models import Alert, DigestOptIn, DigestSent, DigestStatus
from . import describe

log = logging.getLogger(__name__)

JOB_TYPE = "send_alert_digest"
LOOKBACK = timedelta(days=7)  # an alert older than this, never mailed to a member, is no news to them any more


class DigestLost(RuntimeError):
    """The digest's row left ``sending`` under this job: nothing else moves it, so this is a bug, said loudly."""


def dedup_key(org_id: str, user_id: int, day: date) -> str:
    return f"{JOB_TYPE}:{org_id}:{user_id}:{day.isoformat()}"


def queue_digests(org_id: str, day: date) -> int:
    """Queue the digest job of every member of the org who asked for one; returns how many were queued."""
    users = (DigestOptIn.objects.filter(membership__org_id=org_id, membership__user__is_active=True)
             .values_list("membership__user_id", flat=True).order_by("membership__user_id"))
    items = [({"user": user_id, "day": day.isoformat()}, dedup_key(org_id, user_id, day)) for user_id in users]
    return enqueue_many(JOB_TYPE, org_id=org_id, items=items)


def new_alerts(user_id: int, org_id: str, now):
    """The org's open alerts of the last days that no digest sent to this member held, site by site.

    A digest whose job gave up (still ``sending``) mailed nothing: its alerts are news the next day.
    """
    mailed = DigestSent.alerts.through.objects.filter(alert_id=OuterRef("pk"), digestsent__user_id=user_id,
                                                      digestsent__org_id=org_id,
                                                      digestsent__status=DigestStatus.SENT)
    return (Alert.objects.filter(site__org_id=org_id, acknowledged_at__isnull=True, created_at__gte=now - LOOKBACK)
            .filter(~Exists(mailed)).select_related("site").order_by("site__domain", "kind", "page_url", "pk"))


def take(membership: Membership, day: date) -> DigestSent | None:
    """The member's digest of ``day``: the one already taken, else a new one holding their new alerts (None: none)."""
    user, org_id = membership.user, membership.org_id
    existing = DigestSent.objects.filter(user=user, org_id=org_id, day=day).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            alerts = list(new_alerts(user.pk, org_id, timezone.now()))
            if not alerts:
                return None
            digest = DigestSent.objects.create(user=user, org_id=org_id, day=day, recipient=user.email)
            digest.alerts.set(alerts)
            return digest
    except IntegrityError:
        # Another job took the day first (the UNIQUE constraint): its row is the digest.
        return DigestSent.objects.get(user=user, org_id=org_id, day=day)


def send(job) -> dict:
    """The ``send_alert_digest`` job: take the member's digest of the day and mail it, once."""
    user_id, day = job.payload["user"], date.fromisoformat(job.payload["day"])
    membership = (Membership.objects.select_related("user", "org")
                  .filter(user_id=user_id, org_id=job.org_id, alert_digest__isnull=False).first())
    if membership is None:
        return {"sent": False, "reason": "no longer a member, or no longer asks for the digest"}
    if not membership.user.email:
        log.warning("job=%s user %s of org %s asks for the alerts digest but has no email address",
                    job.id, user_id, job.org_id)
        return {"sent": False, "reason": "the member has no email address"}
    digest = take(membership, day)
    if digest is None:
        return {"sent": False, "reason": "no new alerts"}
    if digest.status == DigestStatus.SENT:
        return {"sent": False, "reason": "already sent", "digest": digest.pk}
    DigestSent.objects.filter(pk=digest.pk).update(attempts=F("attempts") + 1)
    alerts = list(digest.alerts.select_related("site").order_by("site__domain", "kind", "page_url", "pk"))
    message(digest, membership.org, alerts).send()  # raises on a refusal: the job retries (retry_on)
    if DigestSent.objects.filter(pk=digest.pk, status=DigestStatus.SENDING).update(
            status=DigestStatus.SENT, sent_at=Now()) != 1:
        raise DigestLost(f"digest {digest.pk} was no longer sending once mailed")
    log.info("job=%s digest %s of %s alert(s) sent to user %s of org %s", job.id, digest.pk, len(alerts), user_id,
             job.org_id)
    return {"sent": True, "digest": digest.pk, "alerts": len(alerts)}


def message(digest: DigestSent, org: Org, alerts: list[Alert]) -> EmailMultiAlternatives:
    context = {"org": org, "day": digest.day, "alerts": [shown(alert, org) for alert in alerts],
               "alerts_url": link(reverse("insight:alerts"), org.pk)}
    count = len(alerts)
    subject = f"{org}: {count} new alert{'s' if count != 1 else ''} ({digest.day.isoformat()})"
    mail = EmailMultiAlternatives(
        subject, render_to_string("insight/email/digest.txt", context), settings.DEFAULT_FROM_EMAIL,
        [digest.recipient], headers={"Message-ID": f"<alert-digest-{digest.pk}@seoinsight>"})
    mail.attach_alternative(render_to_string("insight/email/digest.html", context), "text/html")
    return mail


def shown(alert: Alert, org: Org) -> dict:
    path = reverse("insight:site", args=[alert.site_id])
    if alert.page_url:
        path += "?" + urlencode({"url": alert.page_url})
    return {"site": alert.site.domain, "kind": alert.get_kind_display(), "headline": describe.headline(alert),
            "period": describe.period(alert), "url": link(path, org.pk)}


def link(path: str, org_id: str) -> str:
    """An absolute link that also switches a member of several orgs to this one."""
    return org_link(conf.get("INSIGHT_LINK_BASE_URL").rstrip("/") + path, org_id)
