"""Who gave a Connect's consent, and whether that is the mailbox's own account.

A grant is for the account whose address is the mailbox's username: a user signed in as someone else at
the consent screen (a shared browser, an admin's own account) would otherwise connect the mailbox to the
wrong mail, which every later poll would read as the mailbox's. Microsoft names the account in the ID token
the code exchange returns (the consent asks for ``openid profile``); Google's is asked once, with Gmail's
``users.getProfile``, under the new access token.
"""

from __future__ import annotations

import base64
import binascii
import json
import urllib.parse

import requests

from seoinsight.outbound import BodyTooLarge, describe, endpoint_problem, where

from .. import conf
from ..models import OAuthProvider
from .apps import OAuthApp
from .refresh import capped_json

# The ID token's claims that name the account, in Microsoft's order of preference.
ACCOUNT_CLAIMS = ("preferred_username", "upn", "email")


def account_refusal(consented: list[str], username: str) -> str | None:
    """Why the account that consented is not the mailbox's, for the editor; None when it is (case aside).

    >>> account_refusal(["Reports@Example.com"], "reports@example.com") is None
    True
    >>> account_refusal(["ceo@example.com"], "reports@example.com")[:40]
    'The consent was given by ceo@example.com'
    >>> account_refusal([], "reports@example.com")[:48]
    'The provider did not say which account consented'
    """
    names = [name.strip() for name in consented if name and name.strip()]
    if any(name.lower() == username.strip().lower() for name in names):
        return None
    if not names:
        return "The provider did not say which account consented: nothing was stored. Connect again."
    return (f"The consent was given by {names[0]}, not by this mailbox's account {username}: nothing was stored. "
            f"Connect again and sign in as {username}.")


def id_token_accounts(id_token: str) -> list[str]:
    """The account names in an OpenID Connect ID token's claims (``ACCOUNT_CLAIMS``), [] if it has none.

    The token came straight from the configured token endpoint over TLS, in answer to our code and verifier:
    its signature need not be checked for this (OIDC Core §3.1.3.7); only what it names is read.

    >>> body = base64.urlsafe_b64encode(json.dumps({"preferred_username": "a@b", "upn": "A@B"}).encode()).decode()
    >>> id_token_accounts(f"h.{body.rstrip('=')}.s")
    ['a@b', 'A@B']
    >>> id_token_accounts("not a token")
    []
    """
    parts = id_token.split(".") if isinstance(id_token, str) else []
    if len(parts) != 3:
        return []
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        return []
    if not isinstance(claims, dict):
        return []
    return [claims[name] for name in ACCOUNT_CLAIMS if isinstance(claims.get(name), str)]


class AccountUnknown(Exception):
    """Who consented could not be asked (the message names the host only): nothing is stored."""


def consented_accounts(app: OAuthApp, tokens) -> list[str]:
    """The account names of whoever consented: Microsoft's ID token; Google's Gmail profile, asked once.

    The profile is Gmail's ``users.getProfile`` at MAILPOLL_GMAIL_API_URL with the new access token (both
    Google scopes we ask for allow it), the URL refused as the checks refuse it, no redirect followed, the
    answer bounded.
    """
    if app.issuer == OAuthProvider.MICROSOFT:
        return id_token_accounts(tokens.id_token)
    url = urllib.parse.urljoin(str(conf.get("MAILPOLL_GMAIL_API_URL")).rstrip("/") + "/", "gmail/v1/users/me/profile")
    problem = endpoint_problem(url)
    if problem:
        raise AccountUnknown(f"the Gmail API URL is refused ({problem})")
    try:
        with requests.get(url, headers={"Authorization": f"Bearer {tokens.access_token}",
                                        "Accept": "application/json"},
                          timeout=conf.get("MAILPOLL_SOCKET_TIMEOUT"), allow_redirects=False, stream=True,
                          verify=conf.get("MAILPOLL_API_CA_BUNDLE") or True) as response:
            body = capped_json(response)
    except (requests.RequestException, BodyTooLarge) as exc:
        raise AccountUnknown(f"{where(url)}: {describe(exc)[:300]}") from None
    if response.status_code != 200 or body is None:
        raise AccountUnknown(f"{where(url)} answered HTTP {response.status_code} to getProfile")
    address = body.get("emailAddress")
    return [address] if isinstance(address, str) else []
