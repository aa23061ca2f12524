"""Microsoft Graph mailboxes for the poller: ``GraphSource`` behind the ``ChangesProvider`` boundary.

One ``GraphSource`` per poll, built at ``connect``, reads every folder of the mailbox, so all
of a poll's requests share its limit of four in flight. It reads ``/users/<username>`` in
both kinds of auth:

- ``service``: app-only client credentials (application permission Mail.Read) through msal,
  one token per app registration for the whole process (``graph_auth.app_only_tokens``);
- ``oauth``: the user's consent, the access token from the mailbox's OAuthGrant
  (``oauth.apps.token_for``: refreshed under the grant's row lock before it expires, msal's
  cache with the rotated refresh token stored encrypted first). ``NeedsReauthorization`` and
  the other token errors propagate to the poller, which records them on the mailbox.

A token Graph refuses (401) is replaced once per request. Folders are Graph's well-known
names, in any case (the default ``INBOX`` is ``inbox``), or folder ids. A throttle's wait
ends with the poll (its deadline, or pollmail stopping), never past it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from django.db import connection

from .. import conf
from ..oauth import apps as oauth_apps
from ..models import Auth, Provider
from ..oauth.rules import REFRESH_MARGIN
from . import register
from .base import ChangesProvider
from .graph import GraphSource
from .graph_auth import GraphApp, MsalRefresh, app_only_tokens, new_session

# Graph's well-known folder names (the mailFolder resource's table), documented in lower case.
WELL_KNOWN_FOLDERS = frozenset({
    "archive", "clutter", "conflicts", "conversationhistory", "deleteditems", "drafts", "inbox", "junkemail",
    "localfailures", "msgfolderroot", "outbox", "recoverableitemsdeletions", "scheduled", "searchfolders",
    "sentitems", "serverfailures", "syncissues",
})
# Tenants that name no directory: client credentials need the mailboxes' own tenant.
MULTI_TENANT = frozenset({"common", "organizations", "consumers"})


def graph_folder(name: str) -> str:
    """The path segment Graph knows a configured folder by: a well-known name in lower case, or an id as given.

    Graph documents its well-known names in lower case only, so they are sent that way; an id is
    case-sensitive (base64) and passes untouched.

    >>> graph_folder("INBOX"), graph_folder("SentItems"), graph_folder("AAMkAGI2TG93AAA=")
    ('inbox', 'sentitems', 'AAMkAGI2TG93AAA=')
    """
    return name.lower() if name.lower() in WELL_KNOWN_FOLDERS else name


def msal_refresh(app: oauth_apps.OAuthApp) -> MsalRefresh:
    """A Graph mailbox's grant refreshed through msal: ``oauth.apps.refresh_for``'s for Graph (set below)."""
    graph_app = GraphApp(app.tenant, app.client_id, app.client_secret,
                         authority_host=conf.get("MAILPOLL_MICROSOFT_AUTHORITY"))
    # msal adds offline_access (and openid, profile) itself, and refuses them from the caller.
    scopes = [scope for scope in app.scopes if scope != "offline_access"]
    return MsalRefresh(graph_app, new_session(conf.get("MAILPOLL_API_CA_BUNDLE") or True), scopes)


oauth_apps.refreshed_by(Provider.GRAPH, msal_refresh)


class GrantTokens:
    """A delegated mailbox's access token for one poll, from its OAuthGrant (``oauth.apps.token_for``).

    ``oauth`` hands out a token good for at least ``REFRESH_MARGIN``; it is held for half of that,
    so the source's download threads seldom reach the database. When one does (the held token
    is old, or Graph refused it), the connection Django opened for that thread is closed at
    once: those threads live for one batch, and would leave one connection each behind.
    """

    HOLD = REFRESH_MARGIN.total_seconds() / 2

    def __init__(self, mailbox, clock: Callable[[], float] = time.monotonic):
        self.mailbox, self.clock = mailbox, clock
        self._held: str | None = None
        self._held_at = 0.0
        self._owner = threading.get_ident()  # the poll's thread, whose connection stays

    def __call__(self) -> str:
        if self._held is not None and self.clock() - self._held_at < self.HOLD:
            return self._held
        return self._ask(None)

    def renew(self, rejected: str) -> str:
        """A token in place of ``rejected``; the held one if another request has already replaced it."""
        if self._held is not None and self._held != rejected:
            return self._held
        return self._ask(rejected)

    def _ask(self, rejected: str | None) -> str:
        asked_at = self.clock()
        try:
            token = oauth_apps.token_for(self.mailbox, rejected=rejected)
        finally:
            if threading.get_ident() != self._owner:
                connection.close()
        self._held, self._held_at = token, asked_at
        return token


@register("graph")
class GraphMailbox(ChangesProvider):
    """A mailbox read through Microsoft Graph (``Mailbox.provider == "graph"``)."""

    # How a throttled request waits out its Retry-After: None, until the poll is interrupted (its deadline, a
    # stopping pollmail); tests record the waits instead.
    sleep = None

    def __init__(self, mailbox):
        super().__init__(mailbox)
        self._source: GraphSource | None = None
        self._interrupted: str | None = None
        self._lock = threading.Lock()  # interrupt() comes from the poll's watcher thread

    def connect(self) -> None:
        mailbox = self.mailbox
        app = oauth_apps.app_for(mailbox)  # NotConfigured: no client id
        verify = conf.get("MAILPOLL_API_CA_BUNDLE") or True
        session = new_session(verify)
        if mailbox.auth == Auth.SERVICE:
            if not app.client_secret:
                raise oauth_apps.NotConfigured(
                    f"mailbox={mailbox.pk} has no client secret: set the mailbox's app secret or "
                    "MAILPOLL_MICROSOFT_CLIENT_SECRET")
            if app.tenant.lower() in MULTI_TENANT:
                raise oauth_apps.NotConfigured(
                    f"mailbox={mailbox.pk}: app-only access needs the mailbox's tenant (id or domain), not "
                    f"{app.tenant!r}: set the mailbox's tenant or MAILPOLL_MICROSOFT_TENANT")
            tokens = app_only_tokens(GraphApp(app.tenant, app.client_id, app.client_secret,
                                              authority_host=conf.get("MAILPOLL_MICROSOFT_AUTHORITY")), verify)
        else:
            tokens = GrantTokens(mailbox)
        # The poll's deadline runs from a moment before this one (pollmail's watcher): a throttle wait that would
        # end past it is not begun, and the mailbox says until when Graph asked to wait.
        ends = time.monotonic() + conf.get("MAILPOLL_POLL_DEADLINE")
        source = GraphSource(mailbox.username, tokens, renew=tokens.renew, mailbox=mailbox.pk, session=session,
                             graph_url=conf.get("MAILPOLL_GRAPH_API_URL"), sleep=self.sleep,
                             time_left=lambda: ends - time.monotonic())
        with self._lock:
            self._source = source
            if self._interrupted is not None:
                source.interrupt(self._interrupted)

    def close(self) -> None:
        with self._lock:
            source, self._source = self._source, None
        if source is not None:
            source.session.close()

    def interrupt(self, reason: str) -> None:
        with self._lock:
            self._interrupted = reason
            if self._source is not None:
                self._source.interrupt(reason)

    def changes(self, folder: str, cursor: str | None, *, mode: str, since=None):
        if self._source is None:
            raise RuntimeError("GraphMailbox.changes() before connect()")
        return self._source.changes(graph_folder(folder), cursor or None, mode=mode, since=since)
