"""``/imports/alerts/``: the org's open alerts with an Acknowledge button each, and the member's digest choice.

Everything is the current org's: another org's alert is the same 404 as an unknown one. The POSTs go back to a
``next`` of this site (``org_switch.safe_next``), else to this page.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.db import IntegrityError
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from imports.views import member_required
from seoinsight.models import Membership
from seoinsight.org_switch import safe_next

from ..models import Alert, DigestOptIn
from . import describe
from .acknowledge import acknowledge

RECENTLY_ACKNOWLEDGED = 20  # shown under the open ones, newest first


@require_GET
@member_required
def alerts_page(request, org):
    rows = Alert.objects.filter(site__org=org).select_related("site", "acknowledged_by")
    open_alerts = rows.filter(acknowledged_at__isnull=True).order_by("-created_at", "site__domain", "kind", "page_url")
    done = rows.filter(acknowledged_at__isnull=False).order_by("-acknowledged_at", "-pk")[:RECENTLY_ACKNOWLEDGED]
    membership = Membership.objects.filter(user=request.user, org=org).first()
    return render(request, "insight/alerts.html", {
        "org": org,
        "open": [shown(alert) for alert in open_alerts],
        "acknowledged": [shown(alert) for alert in done],
        "digest": membership is not None and DigestOptIn.objects.filter(membership=membership).exists(),
        "can_digest": membership is not None,
        "email": request.user.email,
    })


def shown(alert: Alert) -> dict:
    site_url = reverse("insight:site", args=[alert.site_id])
    if alert.page_url:  # the site page with that page's history open
        site_url += "?" + urlencode({"url": alert.page_url})
    return {"id": alert.pk, "site": alert.site.domain, "site_url": site_url, "kind": alert.get_kind_display(),
            "headline": describe.headline(alert), "period": describe.period(alert), "created_at": alert.created_at,
            "acknowledged": describe.acknowledged(alert)}


@require_POST
@member_required
def acknowledge_alert(request, alert_id, org):
    alert = get_object_or_404(Alert.objects.filter(site__org=org), pk=alert_id)
    if acknowledge(Alert.objects.filter(pk=alert.pk), request.user):
        messages.success(request, f"Acknowledged: {alert.site.domain}, {describe.headline(alert)}.")
    else:
        alert.refresh_from_db()
        messages.info(request, f"Already acknowledged {describe.acknowledged(alert)}.")
    return redirect(safe_next(request, request.POST.get("next", ""), reverse("insight:alerts")))


@require_POST
@member_required
def digest_choice(request, org):
    """The member's own "email me a daily digest" for the current org: ``digest=on`` asks for it, else stops it."""
    membership = Membership.objects.filter(user=request.user, org=org).first()
    if membership is None:  # an API token's org, or a superuser's: no membership to hold the choice
        messages.error(request, "Only a member of this organisation can ask for its digest.")
        return redirect("insight:alerts")
    if request.POST.get("digest") == "on":
        if not request.user.email:
            messages.error(request, "Your account has no email address: ask a superuser to add one, then ask again.")
            return redirect("insight:alerts")
        try:
            DigestOptIn.objects.get_or_create(membership=membership)
        except IntegrityError:  # asked twice at once: the other request's row is the choice
            pass
        messages.success(request, f"You will get a daily digest of {org}'s new alerts at {request.user.email}.")
    else:
        DigestOptIn.objects.filter(membership=membership).delete()
        messages.success(request, f"No more daily digest of {org}'s alerts.")
    return redirect("insight:alerts")
