"""The admin's Connect: a user's consent for an OAuth mailbox, by authorization code with PKCE (S256).

``start`` (a POST, behind the admin's CSRF check: a link on another site cannot start it) keeps, in the
editor's own session, a pending authorization under a random ``state``: the mailbox, the user, the PKCE
verifier, when it was issued, the redirect URI and a fingerprint of what the consent is for (the app, and
every mailbox field whose change removes a grant: where the token is presented, whose account it is).
``callback`` accepts a code only for a state found in THAT session, used at most once (taken out of the
session row under its lock, before anything else is looked at: two callbacks at once find it once),
younger than ``STATE_LIFETIME``, started by the same user, for a mailbox still in the user's orgs whose
fingerprint has not changed meanwhile. The code is exchanged at the issuer's token endpoint from the
settings (``oauth.apps.app_for``), never at an address a request names; the account that consented must be
the mailbox's username (``oauth.account``: Microsoft's ID token, Google's Gmail profile); the grant is
stored by ``oauth.connect`` under the mailbox's row lock, the fingerprint checked once more. Nothing here
logs or renders a code, a verifier, a token or a secret, nor an endpoint's path or query.
"""

from __future__ import annotations

import base64
import hashlib
import json
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
from django.contrib.sessions.backends.db import SessionStore as DatabaseSession
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import reverse

from seoinsight.outbound import BodyTooLarge, describe, where

from .. import conf
from . import tokens as oauth
from ..models import APP_FIELDS, DESTINATION_FIELDS, Auth, Mailbox, OAuthProvider
from .account import AccountUnknown, account_refusal, consented_accounts
from .apps import NotConfigured, OAuthApp, app_for
from .refresh import TokenEndpointError, capped_json, expires_in_seconds, token_endpoint_problem
from .rules import classify_token_error

logger = logging.getLogger("mailpoll.oauth_connect")  # its name before the move: operators grep it

SESSION_KEY = "mailpoll_oauth_pending"
# Long enough to read a consent screen and sign in with MFA; short enough that a stale tab cannot finish.
STATE_LIFETIME = timedelta(minutes=10)
# Pending authorizations one session keeps; the oldest go first (abandoned tabs).
MAX_PENDING = 5
# Every mailbox field whose change removes its grant (the form's two lists): a pending Connect is bound to all.
GRANT_FIELDS = tuple(dict.fromkeys((*APP_FIELDS, *DESTINATION_FIELDS)))
# Microsoft hands out an ID token (who signed in) only with openid; profile adds preferred_username to it.
MICROSOFT_IDENTITY_SCOPES = ("openid", "profile")


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


def consent_scope(app: OAuthApp) -> str:
    """What the consent asks for: the app's scopes, those its post-actions need, and for Microsoft an ID token
    naming who signed in.

    >>> consent_scope(OAuthApp("microsoft", "c", "", "t", "https://a/authorize", "https://a/token", ("m", "o")))
    'm o openid profile'
    >>> consent_scope(OAuthApp("google", "c", "", "", "https://a/auth", "https://a/token", ("r",), ("w",)))
    'r w'
    """
    extra = MICROSOFT_IDENTITY_SCOPES if app.issuer == OAuthProvider.MICROSOFT else ()
    wanted = (*app.scopes, *app.write_scopes, *extra)
    return " ".join(dict.fromkeys(wanted))


def authorization_url(app: OAuthApp, *, redirect_uri: str, state: str, challenge: str, login_hint: str = "") -> str:
    """Where the editor's browser is sent to consent. Google gives a refresh token only for
    ``access_type=offline``, and again on a reconnect only with ``prompt=consent``; Microsoft is asked to let
    the user pick the account (``prompt=select_account``) rather than reuse whoever is signed in. Both get the
    mailbox's username as ``login_hint``.

    >>> app = OAuthApp("google", "cid", "", "", "https://accounts.example/auth?hd=x", "", ("s1", "s2"))
    >>> authorization_url(app, redirect_uri="https://site/cb", state="st", challenge="ch", login_hint="a@b")
    'https://accounts.example/auth?hd=x&client_id=cid&redirect_uri=https%3A%2F%2Fsite%2Fcb&response_type=code&scope=s1+s2&state=st&code_challenge=ch&code_challenge_method=S256&login_hint=a%40b&access_type=offline&prompt=consent'
    """
    query = {"client_id": app.client_id, "redirect_uri": redirect_uri, "response_type": "code",
             "scope": consent_scope(app), "state": state, "code_challenge": challenge,
             "code_challenge_method": "S256"}
    if login_hint:
        query["login_hint"] = login_hint
    if app.issuer == OAuthProvider.GOOGLE:
        query.update(access_type="offline", prompt="consent")
    elif app.issuer == OAuthProvider.MICROSOFT:
        query["prompt"] = "select_account"
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


SETTINGS_CHANGED = ("The mailbox's settings changed since Connect started (its OAuth app, IMAP server or account): "
                    "nothing was stored; start Connect again.")


def take_pending(request, state: str) -> Mapping | None:
    """The session's pending authorization under ``state``, taken out of it for good; None if it has none.

    Sessions are database rows here (``SESSION_ENGINE``'s default): the row is locked, read again and written
    without the state before the lock is released, so of two callbacks with one state (a double click, a
    replayed redirect) the second waits, then finds nothing, and a code is exchanged once at most. The
    request's own session is updated too, so that its save at the end does not bring the state back.
    """
    session = request.session
    with transaction.atomic():
        row, stored = None, {}
        if isinstance(session, DatabaseSession) and session.session_key:
            row = (session.get_model_class().objects.select_for_update()
                   .filter(session_key=session.session_key).first())
            stored = session.decode(row.session_data) if row is not None else {}  # gone meanwhile: nothing
        elif not isinstance(session, DatabaseSession):
            stored = dict(session.items())  # another engine: the request's own copy is all there is
        pending_all = dict(stored.get(SESSION_KEY, {}))
        pending = pending_all.pop(state, None) if state else None
        session[SESSION_KEY] = pending_all
        if row is not None:
            session.save()  # written before the lock is released
    return pending


def consent_fingerprint(mailbox: Mailbox, app: OAuthApp) -> str:
    """What the consent is for, as one opaque value: the app (issuer, client, tenant, token endpoint; no secret)
    and every field in ``GRANT_FIELDS`` (where an XOAUTH2 token is presented, whose account is read).

    A callback whose mailbox no longer has the same fingerprint stores nothing: else a grant consented for
    imap.gmail.com over TLS could be presented in clear to whatever host an editor typed meanwhile.

    >>> app = OAuthApp("google", "c", "", "", "https://a/auth", "https://a/token", ("s",))
    >>> box = Mailbox(provider="imap", auth="oauth", oauth_provider="google", host="imap.gmail.com", port=993,
    ...               security="tls", username="a@b")
    >>> before = consent_fingerprint(box, app)
    >>> box.host, box.security = "127.0.0.1", "none"
    >>> consent_fingerprint(box, app) == before
    False
    """
    values = [app.issuer, app.client_id, app.tenant, app.token_url, *(getattr(mailbox, name) for name in GRANT_FIELDS)]
    return hashlib.sha256(json.dumps(values, default=str).encode()).hexdigest()


# -- The code exchange --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Exchanged:
    access_token: str = field(repr=False)
    expires_in: float
    refresh_token: str = field(repr=False)
    id_token: str = field(default="", repr=False)


def exchange_code(app: OAuthApp, *, code: str, verifier: str, redirect_uri: str) -> Exchanged:
    """RFC 6749 §4.1.3 with the PKCE verifier, at ``app.token_url``; ``TokenEndpointError`` if refused.

    The URL is refused as the checks refuse it (``token_endpoint_problem``): the code and the client secret
    go nowhere a parser differential or plain http off this machine would send them.
    """
    problem = token_endpoint_problem(app.token_url)
    if problem:
        raise TokenEndpointError(None, None, problem)
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
            "client_id": app.client_id, "code_verifier": verifier}
    if app.client_secret:
        form["client_secret"] = app.client_secret
    if app.issuer == OAuthProvider.MICROSOFT:
        form["scope"] = consent_scope(app)
    try:
        with requests.post(app.token_url, data=form, timeout=conf.get("MAILPOLL_SOCKET_TIMEOUT"),
                           verify=conf.get("MAILPOLL_API_CA_BUNDLE") or True, allow_redirects=False, stream=True,
                           headers={"Accept": "application/json"}) as response:
            body = capped_json(response)
    except (requests.RequestException, BodyTooLarge) as exc:
        # Named by its host only (the exception's text holds the path); its chain is dropped all the same.
        raise TokenEndpointError(None, None, f"{where(app.token_url)}: {describe(exc)[:300]}") from None
    if response.status_code != 200:
        raise TokenEndpointError(response.status_code, body, (response.reason or "").strip())
    access = body.get("access_token") if body else None
    if not isinstance(access, str) or not access:
        raise TokenEndpointError(response.status_code, None, "the answer holds no access token")
    refresh, id_token = body.get("refresh_token"), body.get("id_token")
    return Exchanged(access, expires_in_seconds(body.get("expires_in")), refresh if isinstance(refresh, str) else "",
                     id_token if isinstance(id_token, str) else "")


# -- The views ----------------------------------------------------------------------------------------------

class ConnectViews:
    """``start`` and ``callback``, behind ``admin_site.admin_view`` (login, CSRF) and the mailbox admin's org
    scope."""

    def __init__(self, model_admin):
        self.model_admin = model_admin

    def start(self, request, object_id):
        if request.method != "POST":
            # A GET would let a link or an image on any site start a consent in the editor's name.
            return HttpResponseNotAllowed(["POST"])
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
                          "issued_at": time.time(), "redirect_uri": redirect_uri,
                          "settings": consent_fingerprint(mailbox, app)}
        request.session[SESSION_KEY] = pending
        logger.info("mailbox=%s Connect started by user=%s (%s)", mailbox.pk, request.user.pk, app.issuer)
        return HttpResponseRedirect(authorization_url(app, redirect_uri=redirect_uri, state=state,
                                                      challenge=challenge, login_hint=mailbox.username.strip()))

    def callback(self, request):
        pending = take_pending(request, request.GET.get("state", ""))
        why = refusal(pending, user_id=request.user.pk, now=time.time())
        if why:
            logger.warning("mailbox=%s OAuth callback refused for user=%s: %s",
                           pending.get("mailbox", "?") if pending else "?", request.user.pk, why)
            return self._fail(request, reverse("admin:mailpoll_mailbox_changelist"), why)
        mailbox = self._editable(request, str(pending["mailbox"]))
        back = self._change_url(mailbox)
        if request.GET.get("error"):
            return self._denied(request, mailbox, back)
        app = self._same_app(mailbox, pending)
        if app is None:
            return self._fail(request, back, SETTINGS_CHANGED)
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
        try:
            wrong_account = account_refusal(consented_accounts(app, tokens), mailbox.username)
        except AccountUnknown as exc:
            wrong_account = f"Could not ask {app.issuer} which account consented ({exc}): nothing was stored."
        if wrong_account:
            logger.warning("mailbox=%s Connect refused for user=%s: %s", mailbox.pk, request.user.pk, wrong_account)
            return self._fail(request, back, wrong_account)
        with transaction.atomic():
            # Under the mailbox's row lock, checked once more: an edit that moved the grant's fields during the
            # exchange either committed before (refused here) or waits, and then removes this grant itself.
            locked = Mailbox.objects.select_for_update().get(pk=mailbox.pk)
            if self._same_app(locked, pending) is None:
                return self._fail(request, back, SETTINGS_CHANGED)
            oauth.connect(locked, app.issuer, refresh_token=tokens.refresh_token,
                          access_token=tokens.access_token, expires_in=tokens.expires_in)
            # Due now, its failure count and backoff gone: what failed before was the grant.
            Mailbox.objects.filter(pk=mailbox.pk).update(last_polled_at=None, next_attempt_at=None,
                                                         consecutive_failures=0)
        logger.info("mailbox=%s connected by user=%s (%s)", mailbox.pk, request.user.pk, app.issuer)
        self.model_admin.message_user(request, f"{mailbox.name} is connected to {app.issuer}: the next cycle of "
                                      "any running pollmail polls it.", messages.SUCCESS)
        return HttpResponseRedirect(back)

    @staticmethod
    def _same_app(mailbox: Mailbox, pending: Mapping) -> OAuthApp | None:
        """The mailbox's app if the consent is still for what it was asked for (``consent_fingerprint``)."""
        try:
            app = app_for(mailbox) if mailbox.auth == Auth.OAUTH else None
        except NotConfigured:
            return None
        return app if app is not None and consent_fingerprint(mailbox, app) == pending.get("settings") else None

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
