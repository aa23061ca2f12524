"""Who is calling, for which org.

The current org is the API token's org (``Authorization: Bearer sik_…``), else
the logged-in user's membership (a user in several orgs picks one, kept in the
session). Views filter every query on it; an object of another org is a 404.
"""

from __future__ import annotations

from functools import wraps

from django.http import JsonResponse

from .models import ApiToken, Membership

SESSION_ORG_KEY = "current_org_id"


class NotAuthenticated(Exception):
    pass


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
    org_ids = list(Membership.objects.filter(user=user).order_by("org_id").values_list("org_id", flat=True))
    chosen = request.session.get(SESSION_ORG_KEY)
    if chosen in org_ids:
        return chosen
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
