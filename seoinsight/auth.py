"""Who is calling, for which org.

The current org is the API token's org (``Authorization: Bearer sik_…``), else
the logged-in user's: a user in several orgs picks one (``seoinsight.org_switch``),
kept in the session and checked against their memberships at every request, so a
removed membership or a forged session value falls back to their first org. A link
may name its org (``?org=<id>``, ``org_link``): for a member it switches to it, so
the admin's links into another of their orgs work. Views filter every query on the
current org; an object of another org is a 404.
"""

from __future__ import annotations

import logging
from functools import wraps
from urllib.parse import urlencode

from django.http import JsonResponse

from .models import ApiToken, Membership

log = logging.getLogger(__name__)

SESSION_ORG_KEY = "current_org_id"
LINK_ORG_PARAM = "org"


class NotAuthenticated(Exception):
    pass


def member_org_ids(user) -> list[str]:
    """The ids of the orgs ``user`` is a member of, first one first (the default current org)."""
    return list(Membership.objects.filter(user_id=user.pk).order_by("org_id").values_list("org_id", flat=True))


def switch_org(request, org_id) -> bool:
    """Make ``org_id`` the session's current org if the user is a member of it; False (nothing changed) if not."""
    if not isinstance(org_id, str) or org_id not in member_org_ids(request.user):
        return False
    if request.session.get(SESSION_ORG_KEY) != org_id:
        request.session[SESSION_ORG_KEY] = org_id
    return True


def org_link(url: str, org_id: str) -> str:
    """``url`` naming its org: followed by a member of it, it switches them to that org (see the module)."""
    return f"{url}{'&' if '?' in url else '?'}{urlencode({LINK_ORG_PARAM: org_id})}"


def current_org_id(request) -> str | None:
    """The caller's org id, or None if the caller is a user without a membership.

    Raises ``NotAuthenticated`` for anonymous callers and bad tokens.
    """
    header = request.headers.get("Authorization", "")
    if header:
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != "bearer" or not raw.strip():
            raise NotAuthenticated("Authorization header must be 'Bearer <token>'")
        token = ApiToken.objects.authenticate(raw.strip())
        if token is None:
            raise NotAuthenticated("invalid API token")
        token.touch()
        return token.org_id
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        raise NotAuthenticated("authentication required: log in or send 'Authorization: Bearer <token>'")
    org_ids = member_org_ids(user)
    linked = request.GET.get(LINK_ORG_PARAM)
    # Only a page that is read switches; a link to an org the user is not in changes nothing (its objects 404).
    if linked in org_ids and request.method in ("GET", "HEAD") and request.session.get(SESSION_ORG_KEY) != linked:
        request.session[SESSION_ORG_KEY] = linked
    chosen = request.session.get(SESSION_ORG_KEY)
    if chosen in org_ids:
        return chosen
    if chosen is not None:
        # A membership removed since it was chosen, or a value no switch wrote: forget it.
        log.info("user %s: session org %r is not one of their orgs; back to %s", user.pk, chosen,
                 org_ids[0] if org_ids else "none")
        del request.session[SESSION_ORG_KEY]
    return org_ids[0] if org_ids else None


def json_org_required(view):
    """For JSON endpoints: 401 JSON for anonymous/bad token; passes ``org_id`` to the view."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        try:
            org_id = current_org_id(request)
        except NotAuthenticated as exc:
            response = JsonResponse({"error": str(exc)}, status=401)
            response["WWW-Authenticate"] = 'Bearer realm="seoinsight"'
            return response
        return view(request, *args, org_id=org_id, **kwargs)

    return wrapper
