"""Tokens for Microsoft Graph through msal: app-only, or a user's consent kept in msal's serialized cache.

``AppOnlyTokens`` (client credentials; ``app_only_tokens`` shares one per app registration)
and ``DelegatedTokens`` (load/save hooks for the cache, which the caller stores encrypted)
are callables returning an access token, as ``GraphSource`` wants. ``MsalRefresh`` is the same delegated refresh behind
``mailpoll.oauth.refresh``'s ``Refresh`` interface, for ``oauth.access_token`` to call
under the grant's row lock. Nothing here stores a token or logs one. ``new_session`` makes
the HTTP session of both, with a timeout on every request and a ``cut()`` for the poll's
deadline; it follows no redirect (msal's token requests carry the client secret and the
refresh token, Graph's the bearer token) and reads no answer whole that the caller did
not ask to stream (issue 19).
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import threading
import weakref
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

import msal
import requests
from requests.adapters import HTTPAdapter
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from seoinsight.outbound import BodyTooLarge, RedirectRefused, read_capped, refuse_redirect, scrub, where

from .. import conf
from ..oauth.refresh import DEFAULT_EXPIRES_IN, HeldTokens, Refreshed, TokenEndpointError
from .base import ProviderError

AUTHORITY_HOST = "https://login.microsoftonline.com"
APP_SCOPES = ["https://graph.microsoft.com/.default"]
DELEGATED_SCOPES = ["https://graph.microsoft.com/Mail.Read"]
# The most of an answer the session reads for a caller that does not stream it (msal: token answers, the
# authority's OpenID configuration, a few KB each).
ANSWER_BYTES = 1024 * 1024


class SessionRefused(requests.RequestException):
    """The session would not go on with an answer: a redirect (never followed), or one too large to read.

    The message names the host only; ``status`` is the answer's HTTP status.
    """

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class TokenRefused(ProviderError):
    """Microsoft's token endpoint refused (``error``: ``invalid_grant``, ``invalid_client``...).

    ``codes`` are its AADSTS numbers (700082: refresh token expired by inactivity, 50173:
    grant revoked...); the message carries its description, never a secret.
    """

    def __init__(self, message: str, error: str = "", codes: tuple[int, ...] = ()):
        super().__init__(message)
        self.error = error
        self.codes = codes


@dataclass(frozen=True)
class GraphApp:
    """An app registration in a tenant: whose tokens these are."""

    tenant: str
    client_id: str
    client_secret: str = field(repr=False)
    authority_host: str = AUTHORITY_HOST

    @property
    def authority(self) -> str:
        return f"{self.authority_host.rstrip('/')}/{self.tenant}"


class _Connections:
    """Every connection a session opened, so that another thread can shut them all down (``cut``)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._open: weakref.WeakSet = weakref.WeakSet()
        self._cut = False

    def opened(self, conn) -> None:
        with self._lock:
            if self._cut:
                # Checked before connecting: a request that passed its own check just before the cut fails too.
                raise requests.ConnectionError("the session was cut")
            self._open.add(conn)

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            connections = list(self._open)
        for conn in connections:
            sock = getattr(conn, "sock", None)
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


def _tracked(pool_class, connections: _Connections):
    class Pool(pool_class):
        def _new_conn(self):
            conn = super()._new_conn()
            connections.opened(conn)
            return conn

    return Pool


class _CuttableAdapter(HTTPAdapter):
    def __init__(self, connections: _Connections):
        self._connections = connections
        super().__init__()

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {
            "http": _tracked(HTTPConnectionPool, self._connections),
            "https": _tracked(HTTPSConnectionPool, self._connections)}


class _Session(requests.Session):
    """A session whose every request times out, follows no redirect, and which ``cut()`` ends from any thread.

    A timeout on every request: msal, handed a session, passes none of its own, and a token
    request may run under the grant's row lock. No redirect, whatever the caller asks: a 3xx
    raises ``SessionRefused`` naming where it pointed (requests would re-send a 307/308's body,
    msal's client secret and refresh token, to another host). An answer the caller does not
    stream is read to ``ANSWER_BYTES`` at most. ``cut()`` shuts down every socket the session
    opened and refuses to open more, so a request blocked on a server that never answers, or
    one that trickles, fails at once (only connections through an environment's proxy escape).
    """

    def __init__(self, timeout: float):
        super().__init__()
        self.timeout = timeout
        self._connections = _Connections()
        adapter = _CuttableAdapter(self._connections)
        self.mount("https://", adapter)
        self.mount("http://", adapter)

    def request(self, method, url, **kwargs):
        kwargs.setdefault("timeout", self.timeout)
        kwargs["allow_redirects"] = False
        stream = kwargs.pop("stream", False)
        response = super().request(method, url, stream=True, **kwargs)
        if 300 <= response.status_code < 400:
            response.close()
            try:
                refuse_redirect(response, where(url))
            except RedirectRefused as exc:
                raise SessionRefused(str(exc), response.status_code) from None
        if not stream:
            try:
                # What requests' Response.content does, to a bound.
                response._content = read_capped(response, ANSWER_BYTES, f"the answer of {where(url)}")
                response._content_consumed = True
            except BodyTooLarge as exc:
                raise SessionRefused(str(exc), response.status_code) from None
            finally:
                response.close()
        return response

    def cut(self) -> None:
        self._connections.cut()


def new_session(verify: bool | str = True, timeout: float | None = None) -> requests.Session:
    """The session for msal and Graph; ``verify`` is a CA bundle's path only for a private endpoint.

    ``timeout``: seconds to connect and to read, ``MAILPOLL_SOCKET_TIMEOUT`` unless a request says otherwise.
    """
    session = _Session(timeout if timeout is not None else conf.get("MAILPOLL_SOCKET_TIMEOUT"))
    session.verify = verify
    if verify is not True:
        # requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE override a session's own bundle; a private one
        # must be used as given (and such an endpoint is reached directly, not through the environment's proxy).
        session.trust_env = False
    return session


def _client(app: GraphApp, session: requests.Session, cache=None) -> msal.ConfidentialClientApplication:
    # instance_discovery=False: no call to login.microsoftonline.com to vouch for the authority, so a
    # sovereign cloud or a private endpoint works; Microsoft's own hosts are known to msal anyway.
    return msal.ConfidentialClientApplication(app.client_id, client_credential=app.client_secret,
                                              authority=app.authority, http_client=session,
                                              instance_discovery=False, token_cache=cache)


@contextmanager
def _reaching_microsoft(what: str):
    """The token endpoint unreachable, or an authority that is none: a ProviderError (transient), no secret."""
    try:
        yield
    except SessionRefused as exc:
        raise ProviderError(f"{what}: Microsoft's token endpoint: {exc}") from None
    except requests.RequestException as exc:
        raise ProviderError(f"{what}: Microsoft's token endpoint failed: {type(exc).__name__}") from exc
    except ValueError as exc:  # msal: the authority's OpenID configuration could not be read
        raise ProviderError(f"{what}: {scrub(str(exc).splitlines()[0])[:300]}") from exc


def _token_of(result: dict | None, what: str) -> str:
    if result and "access_token" in result:
        return result["access_token"]
    result = result or {}
    error = result.get("error", "no_token")
    description = result.get("error_description") or "no refresh token in the cache: connect the mailbox"
    raise TokenRefused(f"{what}: {error}: {scrub(str(description).splitlines()[0])}", error,
                       tuple(result.get("error_codes") or ()))


class AppOnlyTokens:
    """Client credentials (application permission Mail.Read); msal caches the token in memory, and
    asks for a new one five minutes before it expires. Safe to share between threads."""

    def __init__(self, app: GraphApp, session: requests.Session):
        self.app, self.session = app, session
        self._msal = None
        self._lock = threading.Lock()

    def __call__(self) -> str:
        with self._lock, _reaching_microsoft("app-only token"):
            if self._msal is None:  # built on first use: msal reads the authority's OpenID configuration
                self._msal = _client(self.app, self.session)
            result = self._msal.acquire_token_for_client(APP_SCOPES)
        return _token_of(result, "app-only token")

    def renew(self, rejected: str) -> str:
        """A token in place of ``rejected``, which Graph refused before its expiry: msal's cached one is
        dropped, unless another caller already got a new one."""
        token = self()
        if token == rejected:
            with self._lock:
                self._msal.remove_tokens_for_client()
            token = self()
        return token


_shared_app_tokens: dict[tuple, AppOnlyTokens] = {}
_shared_lock = threading.Lock()


def app_only_tokens(app: GraphApp, verify: bool | str = True) -> AppOnlyTokens:
    """The process's ``AppOnlyTokens`` of an app registration, on a session of its own.

    One per app (authority, client id, secret, CA bundle), so the mailboxes of one app and their successive
    polls share its token (an hour long) instead of asking Microsoft for one at every poll. The secret counts by
    its digest: a rotated secret gets tokens of its own.
    """
    key = (app.authority, app.client_id, hashlib.sha256(app.client_secret.encode()).hexdigest(), verify)
    with _shared_lock:
        tokens = _shared_app_tokens.get(key)
        if tokens is None:
            tokens = _shared_app_tokens[key] = AppOnlyTokens(app, new_session(verify))
        return tokens


def _cached_refresh(app: GraphApp, session: requests.Session, scopes: list[str], state: str | None, *,
                    force: bool, refresh_token: str = "") -> tuple[dict | None, str | None]:
    """msal's answer for the cache's account (or for a bare refresh token), and the cache's new state if it changed."""
    cache = msal.SerializableTokenCache()
    if state:
        cache.deserialize(state)
    client = _client(app, session, cache)
    accounts = client.get_accounts()
    if accounts:
        result = client.acquire_token_silent_with_error(scopes, account=accounts[0], force_refresh=force)
    elif refresh_token:
        result = client.acquire_token_by_refresh_token(refresh_token, scopes)
    else:
        result = None
    return result, cache.serialize() if cache.has_state_changed else None


class DelegatedTokens:
    """A user's consent, kept as msal's serialized token cache that the caller stores (encrypted).

    ``load()`` returns the stored cache (or None); ``save(state)`` is called with the new
    state before the access token is handed out whenever msal changed it, so a rotated
    refresh token is stored before anything uses the new access token.
    """

    def __init__(self, app: GraphApp, session: requests.Session, *, load: Callable[[], str | None],
                 save: Callable[[str], None], scopes: list[str] | None = None):
        self.app, self.session, self.load, self.save = app, session, load, save
        self.scopes = scopes or DELEGATED_SCOPES

    def __call__(self) -> str:
        with _reaching_microsoft("delegated token"):
            result, state = _cached_refresh(self.app, self.session, self.scopes, self.load(), force=False)
        if state is not None:
            self.save(state)
        return _token_of(result, "delegated token")


class MsalRefresh:
    """``oauth.refresh.Refresh`` for a Microsoft grant: a forced refresh through msal (``oauth`` decides when).

    Uses the grant's serialized cache, or its bare refresh token when it has no cache
    yet; returns the new cache whenever msal changed it (a rotated refresh token
    inside). msal does not say the HTTP status: an OAuth error answer counts as the
    400 (401 for ``invalid_client``) RFC 6749 §5.2 prescribes.
    """

    def __init__(self, app: GraphApp, session: requests.Session, scopes: list[str] | None = None):
        self.app, self.session, self.scopes = app, session, scopes or DELEGATED_SCOPES

    def __call__(self, held: HeldTokens) -> Refreshed:
        try:
            result, state = _cached_refresh(self.app, self.session, self.scopes, held.token_cache or None,
                                            force=True, refresh_token=held.refresh_token)
        except SessionRefused as exc:
            raise TokenEndpointError(exc.status, None, str(exc)) from None
        except requests.RequestException as exc:
            raise TokenEndpointError(None, None, type(exc).__name__) from None
        except ValueError as exc:  # msal: the authority's OpenID configuration could not be read
            raise TokenEndpointError(None, None, scrub(str(exc).splitlines()[0])[:200]) from None
        if result is None:
            # As oauth_refresh.TokenEndpoint does for a grant without a refresh token: nothing to ask the endpoint.
            raise ValueError("this grant holds no usable refresh token: connect the mailbox again")
        if "access_token" not in result:
            body = {k: result[k] for k in ("error", "error_description", "error_codes") if k in result}
            raise TokenEndpointError(401 if body.get("error") == "invalid_client" else 400, body)
        return Refreshed(result["access_token"], float(result.get("expires_in") or DEFAULT_EXPIRES_IN),
                         token_cache=state)
