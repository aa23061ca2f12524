"""The admin's Connect: a user's consent for an OAuth mailbox, by authorization code with PKCE (S256).

``start`` keeps, in the editor's own session, a pending authorization under a random ``state``: the
mailbox, the user, the PKCE verifier, when it was issued and the redirect URI. ``callback`` accepts a code
only for a state found in THAT session, used at most once (it is removed before anything else is looked
at), younger than ``STATE_LIFETIME``, started by the same user, for a mailbox still in the user's orgs
whose OAuth app has not changed meanwhile. The code is exchanged at the issuer's token endpoint from the
settings (``oauth_apps.app_for``), never at an address a request names, and the grant is stored by
``oauth.connect``. Nothing here logs or renders a code, a verifier, a token or a secret.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
import secrets
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

import requests
from django.contrib import messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpResponseRedirect
from django.urls import reverse

from . import conf, oauth
from .models import Auth, Mailbox, OAuthProvider
from .oauth_apps import NotConfigured, OAuthApp, app_for
from .oauth_refresh import TokenEndpointError, expires_in_seconds, json_object
from .oauth_rules import classify_token_error

logger = logging.getLogger(__name__)

SESSION_KEY = "mailpoll_oauth_pending"
# Long enough to read a consent screen and sign in with MFA; short enough that a stale tab cannot finish.
STATE_LIFETIME = timedelta(minutes=10)
# Pending authorizations one session keeps; the oldest go first (abandoned tabs).
MAX_PENDING = 5


# -- Pure parts ---------------------------------------------------------------------------------------------

def pkce_pair() -> tuple[str, str]:
    """A fresh RFC 7636 code verifier (43 characters of 256 random bits) and its S256 challenge."""
    verifier = secrets.token_urlsafe(32)
    return verifier, s256(verifier)


def s256(verifier: str) -> str:
    """RFC 7636 §4.2: BASE64URL(SHA256(verifier)), unpadded.

    >>> s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")  # RFC 7636, Appendix B
    'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM'
    """
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def authorization_url(app: OAuthApp, *, redirect_uri: str, state: str, challenge: str) -> str:
    """Where the editor's browser is sent to consent. Google gives a refresh token only for
    ``access_type=offline``, and again on a reconnect only with ``prompt=consent``.

    >>> app = OAuthApp("google", "cid", "", "", "https://accounts.example/auth?hd=x", "", ("s1", "s2"))
    >>> authorization_url(app, redirect_uri="https://site/cb", state="st", challenge="ch")  # doctest: +ELLIPSIS
    'https://accounts.example/auth?hd=x&client_id=cid&redirect_uri=https%3A%2F%2Fsite%2Fcb&response_type=code&scope=s1+s2&state=st&code_challenge=ch&code_challenge_method=S256&access_type=offline&prompt=consent'
    """
    query = {"client_id": app.client_id, "redirect_uri": redirect_uri, "response_type": "code",
             "scope": app.scope, "state": state, "code_challenge": challenge, "code_challenge_method": "S256"}
    if app.issuer == OAuthProvider.GOOGLE:
        query.update(access_type="offline", prompt="consent")
    separator = "&" if urllib.parse.urlsplit(app.authorize_url).query else "?"
    return f"{app.authorize_url}{separator}{urllib.parse.urlencode(query)}"


def refusal(pending: Mapping | None, *, user_id: int, now: float) -> str | None:
    """Why a callback's state is not accepted, for the editor; None when it is.

    >>> ok = {"mailbox": 1, "user": 7, "issued_at": 1000.0}
    >>> refusal(ok, user_id=7, now=1599.0) is None, refusal(ok, user_id=7, now=1601.0)[:22]
    (True, 'This Connect link expi')
    """
    if pending is None:
        return ("This Connect link is unknown or was already used (or was started in another browser "
                "session): start Connect again from the mailbox's page.")
    if pending.get("user") != user_id:
        return "This Connect was started by another user: start Connect again from the mailbox's page."
    if not now - STATE_LIFETIME.total_seconds() <= pending.get("issued_at", -1.0) <= now:
        minutes = int(STATE_LIFETIME.total_seconds() // 60)
        return f"This Connect link expired (it is valid for {minutes} min): start Connect again."
    return None


def kept_pending(pending: Mapping[str, Mapping], *, now: float, room_for: int = 0) -> dict:
    """The session's pending authorizations still in their lifetime, the newest ``MAX_PENDING - room_for``.

    >>> kept_pending({"old": {"issued_at": 0.0}, "new": {"issued_at": 900.0}}, now=1000.0)
    {'new': {'issued_at': 900.0}}
    """
    lifetime = STATE_LIFETIME.total_seconds()
    live = {state: entry for state, entry in pending.items() if now - lifetime <= entry.get("issued_at", -1.0) <= now}
    newest = sorted(live, key=lambda state: live[state]["issued_at"], reverse=True)[:max(0, MAX_PENDING - room_for)]
    return {state: live[state] for state in newest}


def app_fingerprint(app: OAuthApp) -> str:
    """What the consent was asked of: the issuer, client, tenant and token endpoint (no secret)."""
    return "|".join((app.issuer, app.client_id, app.tenant, app.token_url))


# -- The code exchange --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Exchanged:
    access_token: str = field(repr=False)
    expires_in: float
    refresh_token: str = field(repr=False)


def exchange_code(app: OAuthApp, *, code: str, verifier: str, redirect_uri: str) -> Exchanged:
    """RFC 6749 §4.1.3 with the PKCE verifier, at ``app.token_url``; ``TokenEndpointError`` if refused."""
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
            "client_id": app.client_id, "code_verifier": verifier}
    if app.client_secret:
        form["client_secret"] = app.client_secret
    if app.issuer == OAuthProvider.MICROSOFT:
        form["scope"] = app.scope
    try:
        response = requests.post(app.token_url, data=form, timeout=conf.get("MAILPOLL_SOCKET_TIMEOUT"),
                                 verify=conf.get("MAILPOLL_API_CA_BUNDLE") or True, allow_redirects=False,
                                 headers={"Accept": "application/json"})
    except requests.RequestException as exc:
        # The exception names the host, never the form; its chain is dropped all the same.
        raise TokenEndpointError(None, None, f"{type(exc).__name__}: {str(exc)[:200]}") from None
    body = json_object(response)
    if response.status_code != 200:
        raise TokenEndpointError(response.status_code, body, (response.reason or "").strip())
    access = body.get("access_token") if body else None
    if not isinstance(access, str) or not access:
        raise TokenEndpointError(response.status_code, None, "the answer holds no access token")
    refresh = body.get("refresh_token")
    return Exchanged(access, expires_in_seconds(body.get("expires_in")), refresh if isinstance(refresh, str) else "")


# -- The views ----------------------------------------------------------------------------------------------

class ConnectViews:
    """``start`` and ``callback``, behind ``admin_site.admin_view`` and the mailbox admin's org scope."""

    def __init__(self, model_admin):
        self.model_admin = model_admin

    def start(self, request, object_id):
        mailbox = self._editable(request, unquote(object_id))
        back = self._change_url(mailbox)
        if mailbox.auth != Auth.OAUTH:
            return self._fail(request, back, "Connect is for mailboxes with OAuth (user consent) auth only.")
        try:
            app = app_for(mailbox)
        except NotConfigured as exc:
            return self._fail(request, back, f"Connect cannot start: {exc}.")
        verifier, challenge = pkce_pair()
        state = secrets.token_urlsafe(32)
        redirect_uri = request.build_absolute_uri(reverse("admin:mailpoll_mailbox_oauth_callback"))
        pending = kept_pending(request.session.get(SESSION_KEY, {}), now=time.time(), room_for=1)
        pending[state] = {"mailbox": mailbox.pk, "user": request.user.pk, "code_verifier": verifier,
                          "issued_at": time.time(), "redirect_uri": redirect_uri, "app": app_fingerprint(app)}
        request.session[SESSION_KEY] = pending
        logger.info("mailbox=%s Connect started by user=%s (%s)", mailbox.pk, request.user.pk, app.issuer)
        return HttpResponseRedirect(authorization_url(app, redirect_uri=redirect_uri, state=state,
                                                      challenge=challenge))

    def callback(self, request):
        state = request.GET.get("state", "")
        pending_all = dict(request.session.get(SESSION_KEY, {}))
        # Single use: gone from the session before anything else is looked at, whatever follows.
        pending = pending_all.pop(state, None) if state else None
        request.session[SESSION_KEY] = pending_all
        why = refusal(pending, user_id=request.user.pk, now=time.time())
        if why:
            logger.warning("mailbox=%s OAuth callback refused for user=%s: %s",
                           pending.get("mailbox", "?") if pending else "?", request.user.pk, why)
            return self._fail(request, reverse("admin:mailpoll_mailbox_changelist"), why)
        mailbox = self._editable(request, str(pending["mailbox"]))
        back = self._change_url(mailbox)
        if request.GET.get("error"):
            return self._denied(request, mailbox, back)
        try:
            app = app_for(mailbox) if mailbox.auth == Auth.OAUTH else None
        except NotConfigured:
            app = None
        if app is None or app_fingerprint(app) != pending.get("app"):
            return self._fail(request, back, "The mailbox's OAuth settings changed since Connect started: "
                                             "nothing was stored; start Connect again.")
        code = request.GET.get("code", "")
        if not code:
            return self._fail(request, back, "The provider sent neither a code nor an error: nothing was stored.")
        try:
            tokens = exchange_code(app, code=code, verifier=pending["code_verifier"],
                                   redirect_uri=pending["redirect_uri"])
        except TokenEndpointError as exc:
            reason = classify_token_error(exc.status, exc.body, exc.detail).reason
            logger.warning("mailbox=%s Connect: the token endpoint refused the code (%s): %s", mailbox.pk,
                           app.issuer, reason)
            return self._fail(request, back, f"The {app.issuer} token endpoint refused the code: {reason}. "
                                             "Nothing was stored; check the OAuth app and connect again.")
        if not tokens.refresh_token:
            return self._fail(request, back, f"{app.issuer} granted access but no refresh token, so the mailbox "
                                             "could not be polled for long: nothing was stored. Remove the app's "
                                             "access in the account's security settings and connect again.")
        with transaction.atomic():
            oauth.connect(mailbox, app.issuer, refresh_token=tokens.refresh_token,
                          access_token=tokens.access_token, expires_in=tokens.expires_in)
            # Due now, its failure count and backoff gone: what failed before was the grant.
            Mailbox.objects.filter(pk=mailbox.pk).update(last_polled_at=None, next_attempt_at=None,
                                                         consecutive_failures=0)
        logger.info("mailbox=%s connected by user=%s (%s)", mailbox.pk, request.user.pk, app.issuer)
        self.model_admin.message_user(request, f"{mailbox.name} is connected to {app.issuer}: the next cycle of "
                                      "any running pollmail polls it.", messages.SUCCESS)
        return HttpResponseRedirect(back)

    def _editable(self, request, object_id) -> Mailbox:
        # OrgScopedAdmin.get_object: another org's mailbox is a 404, like an unknown one.
        mailbox = self.model_admin.get_object(request, object_id)
        if not self.model_admin.has_change_permission(request, mailbox):
            raise PermissionDenied
        return mailbox

    def _denied(self, request, mailbox: Mailbox, back: str):
        # RFC 6749 error codes are plain tokens; anything else in them is not the provider's to say.
        error = re.sub(r"[^\w.-]", "", request.GET.get("error", ""))[:100]
        description = request.GET.get("error_description", "").strip().splitlines()
        said = f" ({description[0][:300]})" if description else ""
        logger.info("mailbox=%s Connect: the provider answered %s", mailbox.pk, error)
        if error == "access_denied":
            text = f"The consent was refused at the provider (access_denied){said}: nothing was stored."
        else:
            text = f"The provider refused the authorization: {error}{said}. Nothing was stored."
        return self._fail(request, back, text)

    def _fail(self, request, back: str, text: str):
        self.model_admin.message_user(request, text, messages.ERROR)
        return HttpResponseRedirect(back)

    @staticmethod
    def _change_url(mailbox: Mailbox) -> str:
        return reverse("admin:mailpoll_mailbox_change", args=[mailbox.pk])
