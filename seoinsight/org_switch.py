"""``POST /org/``: a user in several orgs picks the current one (the header's switcher), then goes back.

Only an org the user is a member of is taken (``auth.switch_org``); anything else changes nothing and
says so. ``next`` is followed only to a local URL; a page of one object (its URL has arguments) belongs
to the org just left, so the switch lands on the start page instead of a 404.
"""

from __future__ import annotations

import logging
from urllib.parse import parse_qsl, urlencode, urlsplit

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.shortcuts import redirect, resolve_url
from django.urls import Resolver404, resolve
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from .auth import LINK_ORG_PARAM, switch_org

log = logging.getLogger(__name__)

SHOWN_ID_CHARS = 64  # a forged id is logged, never more than this of it


@require_POST
def switch(request):
    landing = resolve_url(settings.LOGIN_REDIRECT_URL)
    if not request.user.is_authenticated:
        return redirect_to_login(landing)
    org_id = request.POST.get("org", "")
    if switch_org(request, org_id):
        return redirect(page_after_switch(request, request.POST.get("next", ""), landing))
    log.warning("user %s asked to switch to org %r, not one of theirs: refused", request.user.pk,
                org_id[:SHOWN_ID_CHARS])
    messages.error(request, "That organisation is not one of yours (or no longer is): you are still in the same one.")
    return redirect(safe_next(request, request.POST.get("next", ""), landing))


def safe_next(request, next_url: str, landing: str) -> str:
    """``next_url`` if it is a URL of this site, without any ``?org=`` (it would switch back); else ``landing``."""
    if not next_url or not url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()},
                                                           require_https=request.is_secure()):
        return landing
    parts = urlsplit(next_url)
    if not parts.path.startswith("/"):
        return landing  # relative to whatever page posted: not a page we can name
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != LINK_ORG_PARAM])
    return parts.path + (f"?{query}" if query else "")


def page_after_switch(request, next_url: str, landing: str) -> str:
    """The same page in the new org when it is a list; the start page when it showed one object of the old org."""
    url = safe_next(request, next_url, landing)
    try:
        match = resolve(urlsplit(url).path)
    except Resolver404:
        return landing
    return landing if match.args or match.kwargs else url
