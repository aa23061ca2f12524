"""A Gmail mailbox for the poller: each folder a label read by ``GmailSource``, behind ``ChangesProvider``.

Credentials, by ``Mailbox.auth``:

* ``service``: a Workspace service account's JSON key (the mailbox's ``app_secret``, else the file named
  by ``MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE``) impersonating ``Mailbox.username`` (domain-wide
  delegation). The key's own ``token_uri`` is replaced by ``MAILPOLL_GOOGLE_TOKEN_URL``: whatever a key
  file says, its signed assertions go only to the configured host, never to where it redirects. A refused
  assertion is a ``ProviderError`` saying what to fix; a token endpoint that fails (5xx, no answer, a
  redirect) is one saying so, classified as a user grant's refresh is (``oauth.rules.classify_token_error``).
* ``oauth``: the user's grant, through ``oauth.apps.token_for`` (refreshed under the grant's row lock; a
  dead grant raises ``NeedsReauthorization`` to the poller). google-auth never holds a refresh token.

Either way google-auth sees one ``_Tokens`` object whose ``refresh`` is ours: it asks before the first
call, and after a 401 (once per call, and once per batch for its parts), so the library's own 401
handling ends in our machinery. The refreshes googleapiclient starts on a throwaway ``httplib2.Http``
of its own still go through this mailbox's connection (CA bundle, timeout, interruption).

A folder names a label by id (``INBOX``, ``Label_12``) or by name; one ``labels.list`` per poll
resolves them, and a label that does not exist is a ``FolderError`` for that folder alone.

Post-actions (``apply_post_actions``) change labels, one ``messages.modify`` per message: mark read
removes ``UNREAD``, label adds the destination label, move adds it and removes the folder's own. Reading
needs only ``gmail.readonly``: a service account asks for a ``gmail.modify`` token only when there is
something to change, on a credential of its own, so a delegation that allows reading alone still reads
and only the post-actions fail, saying what to grant. A user's grant changes messages with its one token
(what it may do is its consent's scope).

``interrupt`` (the poll's deadline watcher, another thread) shuts every socket of the mailbox's
``InterruptibleHttp`` down and refuses every connection after, so the call in flight fails at once,
httplib2's own reconnect included; a throttling pause ends too; everything later is ``PollInterrupted``.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from datetime import date, datetime
from pathlib import Path

from google.auth import credentials as google_credentials
from google.auth.exceptions import RefreshError, TransportError

from imports.searchconsole_client import StatusRecordingRequest, network_failure
from seoinsight import bounded_http
from seoinsight.outbound import BodyTooLarge, RedirectRefused, scrub, where

from .. import conf
from ..oauth import apps as oauth_apps
from ..models import Auth
from ..oauth.rules import Verdict, classify_token_error
from . import gmail, gmail_rules, register
from .base import (DONE, ERROR, GONE, LABEL, MARK_READ, MOVE, ChangesProvider, FolderError, PollInterrupted,
                   PostActionItem, PostActionResult, ProviderError)

log = logging.getLogger(__name__)

# fetch(replaced): a token to use instead of ``replaced`` (None at first), and its expiry (naive UTC, as
# google-auth keeps it; None: good until Gmail refuses it).
Fetch = Callable[[str | None], tuple[str, datetime | None]]


class _CutConnection:
    """Mixed into httplib2's connection classes: no connection opens once its ``Http`` is interrupted."""

    owner: InterruptibleHttp

    def connect(self):
        self.owner.check()
        super().connect()
        try:
            # Interrupted while connecting: the shutdown may have looked before this socket existed.
            self.owner.check()
        except PollInterrupted:
            self.close()
            raise


class InterruptibleHttp(bounded_http.BoundedHttp):
    """A ``BoundedHttp`` another thread can cut (``interrupt``): then every request raises ``PollInterrupted``."""

    def __init__(self, **options):
        super().__init__(**options)
        self.reason: str | None = None
        self._connection_types = {
            scheme: type(f"Cut{base.__name__}", (_CutConnection, base), {"owner": self})
            for scheme, base in self._connection_types.items()}

    def check(self) -> None:
        if self.reason is not None:
            raise PollInterrupted(f"Gmail poll interrupted: {self.reason}")

    def request(self, uri, method="GET", body=None, headers=None, redirections=0,
                connection_type=None):
        self.check()
        scheme = urllib.parse.urlsplit(uri).scheme.lower()
        try:
            return super().request(uri, method, body, headers, redirections,
                                   connection_type or self._connection_types.get(scheme))
        except PollInterrupted:
            raise
        except Exception:
            if self.reason is None:
                raise
        # The socket was shut under the call on purpose: say so rather than "connection reset".
        raise PollInterrupted(f"Gmail poll interrupted: {self.reason}")

    def interrupt(self, reason: str) -> None:
        self.reason = reason
        for conn in list(self.connections.values()):
            sock = getattr(conn, "sock", None)
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # already closed


class _WriteRefused(ProviderError):
    """Google refused the credentials post-actions need: every message of the call fails alike."""


class _Tokens(google_credentials.Credentials):
    """Bearer tokens from ``fetch``: asked for before the first call, when expired, and after a 401."""

    def __init__(self, fetch: Fetch):
        super().__init__()
        self._fetch = fetch

    def refresh(self, request):
        # ``request`` is ignored: googleapiclient passes one on a fresh Http of its own for batch parts.
        self.token, self.expiry = self._fetch(self.token)


@register("gmail")
class GmailMailbox(ChangesProvider):
    """One Gmail mailbox: its labels read as changes since their history ids (``gmail.GmailSource``)."""

    def __init__(self, mailbox):
        super().__init__(mailbox)
        self._http: InterruptibleHttp | None = None
        self._service = None
        self._write_service = None
        self._endpoint = ""
        self._labels: dict[str, str] | None = None
        self._reason: str | None = None
        self._cut = threading.Event()

    def connect(self) -> None:
        self._endpoint = conf.get("MAILPOLL_GMAIL_API_URL")
        self._http = InterruptibleHttp(timeout=conf.get("MAILPOLL_SOCKET_TIMEOUT"),
                                       ca_certs=conf.get("MAILPOLL_API_CA_BUNDLE") or None)
        if self._reason is not None:
            self._http.interrupt(self._reason)
        fetch = self._service_tokens(gmail.SCOPES) if self.mailbox.auth == Auth.SERVICE else self._user_tokens
        self._service = self._build(fetch)
        self._write_service = None
        log.debug("mailbox=%s Gmail API at %s (%s)", self.mailbox.pk, where(self._endpoint), self.mailbox.auth)

    def _build(self, fetch: Fetch):
        return gmail.build_service(_Tokens(fetch), api_endpoint=self._endpoint, http=self._http, refresh_attempts=1)

    def close(self) -> None:
        if self._http is not None:
            self._http.close()

    def interrupt(self, reason: str) -> None:
        self._reason = reason
        self._cut.set()
        http = self._http
        if http is not None:
            http.interrupt(reason)

    def changes(self, folder: str, cursor: str | None, *, mode: str, since: date | None = None) -> Iterator:
        source = self._source(self._label_id(folder))
        return source.initial(mode, since) if cursor is None else source.changes(cursor)

    def completes_read(self, cursor: str) -> bool:
        return not gmail_rules.is_sweep(cursor)

    # -- post-actions --------------------------------------------------------------

    def apply_post_actions(self, folder: str, items: list[PostActionItem]) -> dict[int, PostActionResult]:
        """Each item's change as one ``messages.modify`` of its message (``item.ref``, a Gmail message id).

        A message Gmail no longer has (404) is ``GONE``; a refusal of one call, that item's ``ERROR``. A refusal
        of the credentials themselves (a scope not granted) is every item's ``ERROR``, after one call only.
        """
        results: dict[int, PostActionResult] = {}
        refused: str | None = None
        for item in items:
            if refused is None:
                try:
                    results[item.id] = self._post_action(folder, item)
                except _WriteRefused as exc:
                    refused = str(exc)
                    log.warning("mailbox=%s folder=%s post-actions refused: %s", self.mailbox.pk, folder, refused)
            if refused is not None:
                results[item.id] = PostActionResult(ERROR, refused)
        return results

    def _post_action(self, folder: str, item: PostActionItem) -> PostActionResult:
        self._check()
        if not isinstance(item.ref, str) or not gmail_rules.MESSAGE_ID.fullmatch(item.ref):
            return PostActionResult(ERROR, f"{str(item.ref)[:100]!r} is not a Gmail message id")
        if item.action == MARK_READ:
            add, remove = [], ["UNREAD"]
        elif item.action in (LABEL, MOVE):
            label = gmail_rules.resolve_label(item.destination, self._known_labels(folder))
            if label is None:
                return PostActionResult(ERROR, f"no Gmail label named {item.destination!r}")
            add, remove = [label], []
            if item.action == MOVE:
                try:
                    own = self._label_id(folder)
                except FolderError as exc:
                    return PostActionResult(ERROR, str(exc))
                remove = [own] if own != label else []
        else:
            return PostActionResult(ERROR, f"{item.action!r} is not a Gmail post-action")
        writer = gmail.GmailSource(self._writer(), label=folder, api_endpoint=self._endpoint, sleep=self._pause,
                                   mailbox=str(self.mailbox.pk))
        try:
            found = writer.modify(item.ref, add=add, remove=remove)
        except gmail.Refused as exc:
            return self._refused(exc)
        return PostActionResult(DONE) if found else PostActionResult(GONE, "the message is no longer in the mailbox")

    def _refused(self, exc: gmail.Refused) -> PostActionResult:
        """A refused ``messages.modify``: that message's error, or (the credentials') every message's."""
        what = f"Gmail refused to change the message (HTTP {exc.status}: {exc.reason})"
        if exc.status == 401:
            raise ProviderError(f"{what}: the mailbox's credentials were refused, even fresh ones") from None
        if not exc.insufficient_scope:
            return PostActionResult(ERROR, what)
        if self.mailbox.auth == Auth.SERVICE:
            raise _WriteRefused(f"{what}: the domain-wide delegation must include {gmail.MODIFY_SCOPE} for "
                                "post-actions") from None
        raise _WriteRefused(f"{what}: the mailbox's grant may be read-only; reconnect the mailbox to allow "
                            "changes") from None

    def _writer(self):
        """The service that changes messages: a service account's own, with ``gmail.modify``, made on first use."""
        if self.mailbox.auth != Auth.SERVICE:
            return self._service
        if self._write_service is None:
            self._write_service = self._build(self._service_tokens(gmail.MODIFY_SCOPES))
        return self._write_service

    # -- labels ------------------------------------------------------------------

    def _label_id(self, folder: str) -> str:
        labels = self._known_labels(folder)
        label = gmail_rules.resolve_label(folder, labels)
        if label is None:
            known = ", ".join(sorted(labels.values())[:20])
            raise FolderError(f"Gmail has no label {folder!r} (a folder is a label id or name; labels: {known})")
        return label

    def _known_labels(self, folder: str) -> dict[str, str]:
        """The mailbox's labels, id -> name, read once a poll."""
        self._check()
        if self._labels is None:
            self._labels = self._source(folder).labels()
        return self._labels

    def _check(self) -> None:
        if self._reason is not None:
            raise PollInterrupted(f"Gmail poll interrupted: {self._reason}")

    def _source(self, label: str) -> gmail.GmailSource:
        return gmail.GmailSource(self._service, label=label, api_endpoint=self._endpoint, sleep=self._pause,
                                 mailbox=str(self.mailbox.pk))

    def _pause(self, seconds: float) -> None:
        """A throttling pause that the poll's deadline ends."""
        if self._cut.wait(seconds):
            raise PollInterrupted(f"Gmail poll interrupted: {self._reason}")

    # -- tokens --------------------------------------------------------------------

    def _user_tokens(self, rejected: str | None) -> tuple[str, None]:
        return oauth_apps.token_for(self.mailbox, rejected=rejected), None

    def _service_tokens(self, scopes: list[str]) -> Fetch:
        """Tokens of the service account for ``scopes``, signed for ``MAILPOLL_GOOGLE_TOKEN_URL`` only.

        A refusal of the write scope is ``_WriteRefused``: reading goes on without it.
        """
        key = {**self._service_key(), "token_uri": conf.get("MAILPOLL_GOOGLE_TOKEN_URL")}
        writing = scopes != gmail.SCOPES
        try:
            account = gmail.delegated_credentials(key, self.mailbox.username, scopes)
        except (ValueError, KeyError, TypeError):
            raise oauth_apps.NotConfigured(f"mailbox={self.mailbox.pk} service account key cannot be used: not a "
                                           "valid private key") from None
        request = StatusRecordingRequest(self._http)
        endpoint = where(key["token_uri"])

        def fetch(_replaced: str | None) -> tuple[str, datetime | None]:
            request.status = None
            try:
                with bounded_http.limited(bounded_http.TOKEN_BYTES):
                    account.refresh(request)
            except RefreshError as exc:
                raise self._refusal(exc, key, request.status, endpoint, writing=writing) from None
            except TransportError as exc:
                failure = network_failure(exc) or type(exc).__name__
                raise ProviderError(f"Google's token endpoint at {endpoint} could not be reached: "
                                    f"{scrub(failure)}") from None
            except RedirectRefused as exc:
                raise ProviderError(f"Google's token endpoint, for service account {key['client_email']}: "
                                    f"{exc}") from None
            except BodyTooLarge as exc:
                raise ProviderError(f"Google's token endpoint at {endpoint} answered more than {exc.limit:,} bytes "
                                    "(not a token): tried again next poll") from None
            return account.token, account.expiry

        return fetch

    def _service_key(self) -> dict:
        """The service account's JSON key: the mailbox's own, else ``MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE``."""
        text, origin = self.mailbox.get_app_secret(), "the mailbox's service account key"
        if not text:
            path = conf.get("MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE")
            if not path:
                raise oauth_apps.NotConfigured(
                    f"mailbox={self.mailbox.pk} has no service account key: store its JSON key on the mailbox "
                    "or set MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE")
            # The deployment's key signs for any user of its domains: only the org's grant says which (NotGranted).
            oauth_apps.require_service_account_grant(self.mailbox)
            origin = f"MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE ({path})"
            try:
                text = Path(path).read_text()
            except OSError as exc:
                raise oauth_apps.NotConfigured(f"mailbox={self.mailbox.pk} cannot read {origin}: "
                                               f"{exc.strerror}") from None
        try:
            key = json.loads(text)
        except ValueError:
            key = None
        if not isinstance(key, dict) or not all(isinstance(key.get(f), str) for f in ("client_email", "private_key")):
            raise oauth_apps.NotConfigured(f"mailbox={self.mailbox.pk}: {origin} is not a Google service account "
                                           "JSON key (client_email, private_key)")
        return key

    def _refusal(self, exc: RefreshError, key: dict, status: int | None, endpoint: str, *,
                 writing: bool = False) -> ProviderError:
        """What a failed token request means: a refusal says what to fix; a failing endpoint, that it failed.

        Refused ``writing`` credentials are ``_WriteRefused``: the post-actions fail, the poll goes on.
        """
        body = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], dict) else {}
        classified = classify_token_error(status, body, "not a JSON answer" if not body else "")
        if classified.verdict is Verdict.TRANSIENT:
            log.warning("mailbox=%s token endpoint %s failed for service account %s: %s", self.mailbox.pk, endpoint,
                        key["client_email"], scrub(str(exc))[:300])
            return ProviderError(f"Google's token endpoint at {endpoint} failed for service account "
                                 f"{key['client_email']} ({classified.reason}): a failure on Google's side, tried "
                                 "again next poll")
        error = str(body.get("error") or "refused")[:100]
        description = str(body.get("error_description") or "")[:200]
        client_id = str(key.get("client_id", ""))
        hint = gmail_rules.service_refusal_hint(error, description, client_id=client_id,
                                                subject=self.mailbox.username)
        if writing and (error == gmail_rules.DELEGATION or "not authorized" in description.lower()):
            hint = (f"post-actions change messages, so the domain-wide delegation of client id {client_id} must "
                    f"include {gmail.MODIFY_SCOPE} (reading needs only gmail.readonly); add it in the Google "
                    "Workspace admin console (Security, API controls, Domain-wide delegation)")
        return (_WriteRefused if writing else ProviderError)(
            f"Google refused service account {key['client_email']} for {self.mailbox.username} "
            f"({error}{': ' + description if description else ''}): {hint}")
