"""Which OAuth app a mailbox uses, where its tokens come from, and the token a poll presents.

A mailbox's own ``client_id`` / ``tenant`` / ``app_secret`` win over the ``MAILPOLL_GOOGLE_*`` /
``MAILPOLL_MICROSOFT_*`` settings. Every endpoint comes from the settings (``mailpoll.conf``,
checked by mailpoll.E003), never from the mailbox: a client secret or a refresh token is sent only to
the issuer's configured token endpoint, whatever an editor types into a mailbox.

The settings' app-only app and service account key are deployment-wide identities: a service mailbox without
its own uses them only where a superuser granted them to its org for its address (``oauth.deployment_grants``), asked
here at every poll (``NotGranted``) as the form asked before the mailbox was saved.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from .. import conf, post_actions
from . import deployment_grants as grants, tokens as oauth
from ..models import Auth, DeploymentIdentity, Mailbox, OAuthGrant, OAuthProvider, Provider
from .refresh import Refresh, TokenEndpoint

# What a grant is asked for, by issuer and by what reads the mail. offline_access: Microsoft hands out a
# refresh token only with it (Google does with access_type=offline on the authorization request).
SCOPES = {
    (OAuthProvider.GOOGLE, Provider.GMAIL): ("https://www.googleapis.com/auth/gmail.readonly",),
    (OAuthProvider.GOOGLE, Provider.IMAP): ("https://mail.google.com/",),
    (OAuthProvider.MICROSOFT, Provider.GRAPH): ("https://graph.microsoft.com/Mail.Read", "offline_access"),
    (OAuthProvider.MICROSOFT, Provider.IMAP): ("https://outlook.office.com/IMAP.AccessAsUser.All", "offline_access"),
}


# What a post-action needs besides reading (mark read, move, label), asked for only where one is set. An IMAP
# grant's scope (above) allows it already.
WRITE_SCOPES = {
    (OAuthProvider.GOOGLE, Provider.GMAIL): ("https://www.googleapis.com/auth/gmail.modify",),
    (OAuthProvider.MICROSOFT, Provider.GRAPH): ("https://graph.microsoft.com/Mail.ReadWrite",),
}


class NotConfigured(Exception):
    """The mailbox's OAuth app is incomplete (no client id, say): a configuration error, named plainly."""


class NotGranted(NotConfigured):
    """A service mailbox would read with a deployment identity its org holds no grant of for its address."""

    def __init__(self, mailbox: Mailbox, problem: str):
        super().__init__(f"mailbox={mailbox.pk}: {problem}")
        self.problem = problem


def require_grant(mailbox: Mailbox, identity: str, tenant: str = "") -> None:
    """``NotGranted`` unless a grant of the mailbox's org lets ``identity`` read its username (in ``tenant``)."""
    problem = grants.problem(mailbox.org_id, identity, mailbox.username, tenant)
    if problem:
        raise NotGranted(mailbox, problem)


def require_service_account_grant(mailbox: Mailbox) -> None:
    """``require_grant`` for a Gmail mailbox about to sign with ``MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE``."""
    require_grant(mailbox, DeploymentIdentity.GOOGLE_SERVICE_ACCOUNT)


class NotConnected(Exception):
    """An OAuth mailbox nobody has connected yet (no grant): the admin's Connect button makes one."""


@dataclass(frozen=True)
class OAuthApp:
    """The OAuth client a mailbox's grant belongs to, with its endpoints."""

    issuer: str
    client_id: str
    client_secret: str = field(repr=False)
    tenant: str  # Microsoft only
    authorize_url: str
    token_url: str
    scopes: tuple[str, ...]
    # Asked for at consent only, for a mailbox whose messages post-actions change (``WRITE_SCOPES``). A refresh
    # asks for ``scopes``: the token it brings carries whatever the user consented to, changes included.
    write_scopes: tuple[str, ...] = ()

    @property
    def scope(self) -> str:
        return " ".join(self.scopes)


def app_for(mailbox: Mailbox) -> OAuthApp:
    """The OAuth app of an OAuth mailbox; ``NotConfigured`` if it has none or lacks its client id."""
    issuer = mailbox.issuer
    if issuer == OAuthProvider.GOOGLE:
        client_id = mailbox.client_id or conf.get("MAILPOLL_GOOGLE_CLIENT_ID")
        secret = mailbox.get_app_secret() if mailbox.client_id else conf.get("MAILPOLL_GOOGLE_CLIENT_SECRET")
        tenant = ""
        authorize_url = conf.get("MAILPOLL_GOOGLE_AUTH_URL")
        token_url = conf.get("MAILPOLL_GOOGLE_TOKEN_URL")
    elif issuer == OAuthProvider.MICROSOFT:
        client_id = mailbox.client_id or conf.get("MAILPOLL_MICROSOFT_CLIENT_ID")
        secret = mailbox.get_app_secret() if mailbox.client_id else conf.get("MAILPOLL_MICROSOFT_CLIENT_SECRET")
        tenant = mailbox.tenant or conf.get("MAILPOLL_MICROSOFT_TENANT")
        base = f"{conf.get('MAILPOLL_MICROSOFT_AUTHORITY').rstrip('/')}/{tenant}/oauth2/v2.0"
        authorize_url, token_url = f"{base}/authorize", f"{base}/token"
    else:
        raise NotConfigured(f"mailbox={mailbox.pk} does not use OAuth")
    if not client_id:
        setting = "MAILPOLL_GOOGLE_CLIENT_ID" if issuer == OAuthProvider.GOOGLE else "MAILPOLL_MICROSOFT_CLIENT_ID"
        raise NotConfigured(f"mailbox={mailbox.pk} has no OAuth client id: set the mailbox's client id or {setting}")
    if mailbox.auth == Auth.SERVICE and not mailbox.client_id:
        # App-only with the settings' app: it reads whatever mailbox it is told to, so the org's grant decides.
        require_grant(mailbox, DeploymentIdentity.MICROSOFT_APP, tenant)
    writes = WRITE_SCOPES.get((issuer, mailbox.provider), ()) if post_actions.changes_source(mailbox) else ()
    return OAuthApp(issuer, client_id, secret, tenant, authorize_url, token_url, SCOPES[(issuer, mailbox.provider)],
                    writes)


def credentials_problem(mailbox: Mailbox) -> str:
    """What is missing for the mailbox to authenticate at all, or "" (no network: the check and the admin).

    Whether a grant is connected and alive is the grant's state, not this.
    """
    if mailbox.auth == Auth.PASSWORD:
        return "" if mailbox.secret else "no password stored"
    if mailbox.auth == Auth.SERVICE and mailbox.provider == Provider.GMAIL:
        key_file = conf.get("MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE")
        if mailbox.app_secret:
            return ""
        if key_file and os.path.isfile(key_file):
            return grants.problem(mailbox.org_id, DeploymentIdentity.GOOGLE_SERVICE_ACCOUNT, mailbox.username)
        return ("no service account key: store the key on the mailbox or point MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE "
                f"at one{f' ({key_file} is no file)' if key_file else ''}")
    try:
        app = app_for(mailbox)
    except NotGranted as exc:
        return exc.problem
    except NotConfigured as exc:
        return str(exc).split(" ", 1)[1]  # without the mailbox=<pk>, which the caller names
    if mailbox.auth == Auth.SERVICE:
        if not app.client_secret:
            return "no client secret for app-only access: store it on the mailbox or set MAILPOLL_MICROSOFT_CLIENT_SECRET"
        if app.tenant in ("common", "organizations", "consumers"):
            return (f"app-only access needs the tenant's own id or domain, not {app.tenant!r}: set the mailbox's "
                    "tenant or MAILPOLL_MICROSOFT_TENANT")
    return ""


# Refreshes other than RFC 6749's, by the provider that reads the mailbox, each set by that provider's module
# (``providers.graph_mailbox``: msal), so that oauth imports no provider: providers are above it and use the
# grant. Only that provider asks for its mailboxes' tokens, so it is loaded by then.
_refreshes: dict[str, Callable[[OAuthApp], Refresh]] = {}


def refreshed_by(provider: str, make: Callable[[OAuthApp], Refresh]) -> None:
    """Refresh the grants of ``provider``'s Microsoft mailboxes with ``make(app)`` instead of the token endpoint."""
    _refreshes[provider] = make


def refresh_for(mailbox: Mailbox) -> Refresh:
    """How the mailbox's grant is refreshed: RFC 6749 §6 at its issuer's token endpoint.

    A Graph mailbox's grant is refreshed through msal instead, which keeps its account and refresh token in a
    serialized cache that ``oauth`` stores encrypted on the grant (the rotated refresh token inside).
    """
    app = app_for(mailbox)
    if app.issuer == OAuthProvider.MICROSOFT and mailbox.provider == Provider.GRAPH:
        if not app.client_secret:
            raise NotConfigured(f"mailbox={mailbox.pk} has no client secret: set the mailbox's app secret or "
                                "MAILPOLL_MICROSOFT_CLIENT_SECRET")
        return _refreshes[Provider.GRAPH](app)  # providers.graph_mailbox.msal_refresh
    # Microsoft wants the scopes again on a refresh; Google ignores them.
    return TokenEndpoint(app.token_url, app.client_id, app.client_secret,
                         scope=app.scope if app.issuer == OAuthProvider.MICROSOFT else "")


def token_for(mailbox: Mailbox, *, rejected: str | None = None) -> str:
    """A valid access token for the mailbox's user-consent grant, refreshed if due (``mailpoll.oauth``).

    ``rejected``: the token the provider just refused with a 401; a fresh one is handed out instead.
    """
    refresh = refresh_for(mailbox)
    try:
        return oauth.access_token(mailbox, refresh, rejected=rejected)
    except OAuthGrant.DoesNotExist:
        raise NotConnected(f"mailbox={mailbox.pk} is not connected: use Connect on its admin page") from None
