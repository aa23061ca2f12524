"""How a grant is refreshed: the tiny interface a provider implements, and a plain RFC 6749 §6 refresh.

A refresh callable takes the grant's ``HeldTokens`` and returns ``Refreshed``, or raises
``TokenEndpointError`` for anything the token endpoint (or the way to it) did wrong; any other exception is a
bug and propagates. ``TokenEndpoint`` is the refresh Google and Microsoft both accept, over ``requests``;
google-auth or msal (with its serialized cache) can implement the same interface later.
Secrets are ``repr=False``: a logged or printed object never shows them. The token endpoint's URL is refused
as the system checks refuse it (``token_endpoint_problem``: https, or plain http to loopback, read alike by
every parser), its answer is read to ``ANSWER_LIMIT`` bytes at most, and an error names its host only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import requests

from seoinsight.outbound import BodyTooLarge, describe, endpoint_problem, read_capped, where

from .. import conf

GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"
MICROSOFT_TOKEN_URI = "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token"

# Used when an answer leaves ``expires_in`` out (RFC 6749 §5.1 allows it); both providers say 3599 or 3600.
DEFAULT_EXPIRES_IN = 3600.0
# A token answer is a few KB (Microsoft's ID token included); anything past this is not a token endpoint speaking.
ANSWER_LIMIT = 256 * 1024


@dataclass(frozen=True)
class HeldTokens:
    """What a grant refreshes with, decrypted; either may be empty."""

    refresh_token: str = field(default="", repr=False)
    token_cache: str = field(default="", repr=False)  # msal's serialized cache


@dataclass(frozen=True)
class Refreshed:
    """A refresh's result. ``None`` for ``refresh_token`` / ``token_cache``: unchanged (Google does not rotate)."""

    access_token: str = field(repr=False)
    expires_in: float
    refresh_token: str | None = field(default=None, repr=False)
    token_cache: str | None = field(default=None, repr=False)


class TokenEndpointError(Exception):
    """The token endpoint refused, failed, or could not be reached (``status`` None: no HTTP answer).

    ``body`` is its JSON error object if it sent one (what ``oauth.rules.classify_token_error`` reads);
    ``detail`` says what went wrong otherwise. Neither ever holds a token we sent.
    """

    def __init__(self, status: int | None, body: Mapping | None = None, detail: str = ""):
        self.status, self.body, self.detail = status, body, detail
        super().__init__(f"token endpoint: HTTP {status}" if status is not None else "token endpoint: no answer",
                         (body or {}).get("error") or detail)


Refresh = Callable[[HeldTokens], Refreshed]


@dataclass(frozen=True)
class TokenEndpoint:
    """An RFC 6749 §6 refresh_token grant POSTed to ``token_uri`` (client_secret_post; none for a public client).

    ``scope``: Microsoft wants the scopes again on a refresh; Google ignores it. ``timeout``: seconds to
    connect and to read, by default ``MAILPOLL_SOCKET_TIMEOUT`` — the caller holds a row lock meanwhile.
    """

    token_uri: str
    client_id: str
    client_secret: str = field(default="", repr=False)
    scope: str = ""
    timeout: float | None = None

    def __call__(self, held: HeldTokens) -> Refreshed:
        if not held.refresh_token:
            raise ValueError("this grant has no refresh token: refresh it through its provider's library")
        form = {"grant_type": "refresh_token", "refresh_token": held.refresh_token, "client_id": self.client_id}
        if self.client_secret:
            form["client_secret"] = self.client_secret
        if self.scope:
            form["scope"] = self.scope
        timeout = self.timeout if self.timeout is not None else conf.get("MAILPOLL_SOCKET_TIMEOUT")
        problem = token_endpoint_problem(self.token_uri)
        if problem:
            raise TokenEndpointError(None, None, problem)
        try:
            # A private endpoint's CA (MAILPOLL_API_CA_BUNDLE) is used as given: no environment override, no proxy.
            with requests.Session() as session:
                bundle = conf.get("MAILPOLL_API_CA_BUNDLE")
                if bundle:
                    session.verify, session.trust_env = bundle, False
                with session.post(self.token_uri, data=form, timeout=timeout, allow_redirects=False, stream=True,
                                  headers={"Accept": "application/json"}) as response:
                    body = capped_json(response)
        except (requests.RequestException, BodyTooLarge) as exc:
            # Named by its host only (the exception's text holds the path and query); never the form.
            raise TokenEndpointError(None, None, f"{where(self.token_uri)}: {describe(exc)[:300]}") from None
        if response.status_code != 200:
            raise TokenEndpointError(response.status_code, body, f"{response.reason or ''}".strip())
        token = body.get("access_token") if body else None
        if not isinstance(token, str) or not token:
            raise TokenEndpointError(response.status_code, None, "the answer holds no access token")
        rotated = body.get("refresh_token")
        return Refreshed(token, expires_in_seconds(body.get("expires_in")),
                         refresh_token=rotated if isinstance(rotated, str) and rotated else None)


def token_endpoint_problem(url: str) -> str:
    """Why a refresh token or a code may not be sent to ``url`` (``seoinsight.outbound.endpoint_problem``), or "".

    >>> token_endpoint_problem("https://oauth2.googleapis.com/token")
    ''
    >>> token_endpoint_problem("http://127.0.0.2:99\\\\@127.0.0.1/token")
    'not sent to the token endpoint at an unparsable URL: a backslash, a space or a control character in the URL'
    """
    problem = endpoint_problem(url)
    return f"not sent to the token endpoint at {where(url)}: {problem}" if problem else ""


def capped_json(response, limit: int = ANSWER_LIMIT) -> dict | None:
    """The JSON object of a streamed answer read to ``limit`` bytes at most (BodyTooLarge past it); None if the
    answer is not one."""
    data = read_capped(response, limit, "the token endpoint's answer")
    try:
        body = json.loads(data)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def expires_in_seconds(value) -> float:
    """``expires_in`` as seconds (Microsoft's v1 endpoint sends a string); the default if absent or absurd."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return DEFAULT_EXPIRES_IN
    return seconds if 0 <= seconds < 10 * 365 * 86400 else DEFAULT_EXPIRES_IN
