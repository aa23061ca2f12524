"""``{% org_choices as choices %}``: the orgs the header's switcher offers (``seoinsight.org_switch``)."""

from __future__ import annotations

from django import template

from seoinsight.auth import NotAuthenticated, current_org_id
from seoinsight.models import Org

register = template.Library()


@register.simple_tag(takes_context=True)
def org_choices(context) -> dict:
    """``orgs``: the user's orgs when there are several to pick from (else empty); ``current``: the page's org id."""
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"orgs": [], "current": None}
    orgs = list(Org.objects.filter(memberships__user_id=user.pk).order_by("pk"))
    shown = context.get("org")
    if shown is not None:
        current = shown.pk
    else:
        try:
            current = current_org_id(request)
        except NotAuthenticated:  # a bad token on a page that does not need one
            current = None
    return {"orgs": orgs if len(orgs) > 1 else [], "current": current}
