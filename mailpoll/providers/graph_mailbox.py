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

Post-actions (``apply_post_actions``) mark a message read (PATCH ``isRead``) or move it (``move``) by its
Graph id. A move's destination is a well-known name, a top-level folder's display name, or a path
``Parent/Child`` of display names (its first step may be a well-known name), looked up in the folder
lists once a poll; a folder is never created. Changing messages needs Mail.ReadWrite: the delegated
scope (reconnect the mailbox) or the application permission; with Mail.Read alone Graph answers 403
and the post-actions fail, saying so, while reading goes on. Labels are Gmail's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from django.db import connection

from .. import conf
from ..oauth import apps as oauth_apps
from ..models import Auth, Provider
from ..oauth.rules import REFRESH_MARGIN
from ..oauth.tokens import NeedsReauthorization, TokenRefreshError
from . import register
from .base import (DONE, ERROR, GONE, LABEL, MARK_READ, MOVE, ChangesProvider, FolderError, PostActionItem,
                   PostActionResult, ProviderError)
from .graph import GraphRefused, GraphSource
from .graph_auth import GraphApp, MsalRefresh, app_only_tokens, new_session

log = logging.getLogger(__name__)

# Graph's well-known folder names (the mailFolder resource's table), documented in lower case.
WELL_KNOWN_FOLDERS = frozenset({
    "archive", "clutter", "conflicts", "conversationhistory", "deleteditems", "drafts", "inbox", "junkemail",
    "localfailures", "msgfolderroot", "outbox", "recoverableitemsdeletions", "scheduled", "searchfolders",
    "sentitems", "serverfailures", "syncissues",
})
# Tenants that name no directory: client credentials need the mailboxes' own tenant.
MULTI_TENANT = frozenset({"common", "organizations", "consumers"})
# The steps of a move's destination path "Parent/Child/..." looked up at most (each is one folder list).
MAX_PATH_STEPS = 8


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
        # A session's folder lists, by parent id (None: the top level): (id, display name) pairs, and whether whole.
        self._folder_lists: dict[str | None, tuple[list[tuple[str, str]], bool]] = {}

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
            self._folder_lists = {}
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

    # -- post-actions --------------------------------------------------------------

    def apply_post_actions(self, folder: str, items: list[PostActionItem]) -> dict[int, PostActionResult]:
        """Mark read or move each item's message (``item.ref``, its Graph id); moves last, as a moved message
        has a new id.

        A Graph id names a message wherever it is, so ``folder`` only names them in messages. Once Graph
        throttles, or refuses access (403: a permission the mailbox lacks), the items left get that same
        ``ERROR`` without being sent. A lost connection, an interrupted poll or a token that cannot be
        had raises ``ProviderError``.
        """
        source = self._source
        if source is None:
            raise RuntimeError("GraphMailbox.apply_post_actions() before connect()")
        results: dict[int, PostActionResult] = {}
        stop: str | None = None
        for item in sorted(items, key=lambda item: item.action == MOVE):
            if stop is None:
                try:
                    results[item.id] = self._post_action(source, folder, item)
                except GraphRefused as exc:
                    detail = self._refusal(exc)
                    if exc.throttled or _access_denied(exc):
                        stop = detail
                    results[item.id] = PostActionResult(ERROR, detail)
                except FolderError as exc:
                    results[item.id] = PostActionResult(ERROR, str(exc))
                except (NeedsReauthorization, TokenRefreshError, oauth_apps.NotConnected,
                        oauth_apps.NotConfigured) as exc:
                    raise ProviderError(str(exc)) from exc
                if results[item.id].outcome == ERROR:
                    log.info("mailbox=%s folder=%s post-action %s of message %s: %s", self.mailbox.pk, folder,
                             item.action, item.ref, results[item.id].detail)
            else:
                results[item.id] = PostActionResult(ERROR, stop)
        return results

    def _post_action(self, source: GraphSource, folder: str, item: PostActionItem) -> PostActionResult:
        mid = str(item.ref)
        if item.action == LABEL:
            return PostActionResult(ERROR, "labels are Gmail's; use move or mark read for a Graph mailbox")
        if item.action == MARK_READ:
            try:
                source.mark_read(folder, mid)
            except GraphRefused as exc:
                if not exc.not_found:
                    raise
                return PostActionResult(GONE, _gone(exc))
            return PostActionResult(DONE)
        if item.action != MOVE:
            return PostActionResult(ERROR, f"{item.action!r} is not a Graph post-action")
        if not item.destination:
            return PostActionResult(ERROR, "a move needs a destination folder")
        destination = self._destination(source, folder, item.destination)
        if destination is None:
            return PostActionResult(ERROR, _no_folder(item.destination, self._folder_lists.get(None)))
        try:
            source.move(folder, mid, destination)
        except GraphRefused as exc:
            if not exc.not_found:
                raise
            # Graph answers 404 for a missing message and for a missing destination alike.
            if source.has_message(folder, mid):
                return PostActionResult(ERROR, f'Graph has no mail folder "{item.destination}" to move the message '
                                               f"to ({exc.status} {exc.code})")
            return PostActionResult(GONE, _gone(exc))
        return PostActionResult(DONE)

    def _destination(self, source: GraphSource, folder: str, name: str) -> str | None:
        """The ``destinationId`` for a move to ``name``; None if the mailbox has no such folder.

        A well-known name goes as Graph knows it. Otherwise a top-level folder's display name (exactly, else in
        any case if only one folder matches), then a path ``Parent/Child`` of display names, its first step
        possibly a well-known name.
        """
        if name.lower() in WELL_KNOWN_FOLDERS:
            return name.lower()
        found = _named(self._folders(source, folder, None), name)
        if found is not None or "/" not in name:
            return found
        steps = name.split("/")
        if len(steps) > MAX_PATH_STEPS or not all(steps):
            return None
        parent = steps[0].lower() if steps[0].lower() in WELL_KNOWN_FOLDERS else \
            _named(self._folders(source, folder, None), steps[0])
        for step in steps[1:]:
            if parent is None:
                return None
            parent = _named(self._folders(source, folder, parent), step)
        return parent

    def _folders(self, source: GraphSource, folder: str, parent: str | None) -> list[tuple[str, str]]:
        if parent not in self._folder_lists:
            self._folder_lists[parent] = source.mail_folders(folder, parent)
        return self._folder_lists[parent][0]

    def _refusal(self, exc: GraphRefused) -> str:
        """What a refused change says on its PostAction: bounded, secret-free (Graph's code and message)."""
        if exc.throttled:
            wait = f", asking to wait {exc.retry_after:g} s" if exc.retry_after is not None else ""
            return f"throttled: Graph answered {exc.status}{wait}; tried again on a later poll"
        if _access_denied(exc):
            if self.mailbox.auth == Auth.SERVICE:
                need = ("app-only access needs the Mail.ReadWrite application permission (admin-consented) on the "
                        "app registration")
            else:
                need = "the mailbox's grant needs Mail.ReadWrite: reconnect the mailbox to grant it"
            return f"Graph refused the change ({exc.status} {exc.code}): {need}"
        return str(exc)


def _gone(exc: GraphRefused) -> str:
    return f"the mailbox no longer has the message by this id: moved or deleted ({exc.status} {exc.code})"


def _access_denied(exc: GraphRefused) -> bool:
    return exc.status == 403 or exc.code.lower() == "erroraccessdenied"


def _named(folders: list[tuple[str, str]], name: str) -> str | None:
    """The id of the folder called ``name``: exactly, else in any case when only one folder is called so."""
    exact = [fid for fid, display in folders if display == name]
    if exact:
        return exact[0]
    folded = [fid for fid, display in folders if display.casefold() == name.casefold()]
    return folded[0] if len(folded) == 1 else None


def _no_folder(name: str, top: tuple[list, bool] | None) -> str:
    partial = "" if top is None or top[1] else f" among the first {len(top[0])} listed"
    return (f'no mail folder named "{name}"{partial}: a move goes to a well-known folder (archive, deleteditems, '
            "...), a top-level folder's display name, or a path Parent/Child")

