"""OAuth access tokens for API and XOAUTH2 mailboxes, refreshed so that a grant never silently dies.

``access_token(mailbox_or_grant, refresh=...)`` hands out a valid access token. From ``REFRESH_MARGIN``
before its expiry on, it refreshes under ``SELECT … FOR UPDATE`` of the grant row, in a transaction of its
own: two pollers never both refresh (the second finds the first's token once it has the lock), and a
rotated refresh token is committed before the access token that came with it is handed out, so it is never
lost. A refusal that means the grant is dead moves it to ``needs_reauth`` with the provider's reason, and
it is never refreshed again until ``connect`` replaces it: no retry storm. Network errors, 5xx and
throttling are transient and leave the grant active. Nothing here logs a token or a secret.

The poller (``mailbox_poll``) records ``NeedsReauthorization`` and ``TokenRefreshError`` on the mailbox, and
its claim skips a mailbox whose grant is not active (``sql.CLAIM_DUE_MAILBOXES``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from seoinsight import crypto

from ..models import GrantState, Mailbox, OAuthGrant
from .refresh import HeldTokens, Refresh, Refreshed, TokenEndpointError
from .rules import REFRESH_MARGIN, Verdict, classify_token_error, should_refresh

__all__ = ["REFRESH_MARGIN", "NeedsReauthorization", "RefreshDeferred", "RefreshRefused", "TokenRefreshError",
           "access_token", "connect", "disconnect"]

logger = logging.getLogger("mailpoll.oauth")  # its name before the move: operators grep it

Clock = Callable[[], datetime]


class NeedsReauthorization(Exception):
    """The grant is dead (revoked, expired, consent withdrawn): someone has to reconnect the mailbox."""

    def __init__(self, grant: OAuthGrant, reason: str):
        self.grant_id, self.mailbox_id, self.provider, self.reason = grant.pk, grant.mailbox_id, grant.provider, reason
        super().__init__(f"mailbox={grant.mailbox_id} needs re-authorization ({grant.provider}): {reason}")


class TokenRefreshError(Exception):
    """A refresh failed but the grant stays active: the poller records it and backs off the mailbox."""

    def __init__(self, grant: OAuthGrant, reason: str):
        self.grant_id, self.mailbox_id, self.reason = grant.pk, grant.mailbox_id, reason
        super().__init__(f"mailbox={grant.mailbox_id} token refresh failed ({grant.provider}): {reason}")


class RefreshDeferred(TokenRefreshError):
    """Transient: the token endpoint was unreachable, failed (5xx) or throttled us; the next poll retries."""


class RefreshRefused(TokenRefreshError):
    """The endpoint refused our client or request (other 4xx): fix the client configuration, not the grant."""


def access_token(mailbox_or_grant: Mailbox | OAuthGrant, refresh: Refresh, *, clock: Clock = timezone.now,
                 margin: timedelta = REFRESH_MARGIN, rejected: str | None = None) -> str:
    """A valid access token of the mailbox's grant, refreshed through ``refresh`` if it is due.

    ``rejected``: a token the provider just refused (a 401 before its expiry: revoked sessions, clock
    skew). It is refreshed even if not due, unless another poller has replaced it meanwhile, in which
    case that newer token is handed out: a refusal never causes two refreshes.

    Raises NeedsReauthorization (the grant is or just became dead), RefreshDeferred or RefreshRefused.
    Must be called outside any transaction: the rotated refresh token has to be committed when this returns.
    """
    if connection.in_atomic_block:
        raise RuntimeError("access_token() runs its own transaction: a refresh inside an outer one would hand "
                           "out a token whose rotated refresh token is not committed yet")
    grant = _grant_of(mailbox_or_grant)
    token = _usable(grant, clock(), margin)
    if token is not None and token != rejected:
        return token
    with transaction.atomic():
        grant = OAuthGrant.objects.select_for_update().get(pk=grant.pk)
        # Read again under the lock: a poller that held it before us may have refreshed meanwhile, and its
        # token is used rather than refreshing once more (which would race its rotation).
        token = _usable(grant, clock(), margin)
        if token is not None and token != rejected:
            return token
        outcome = _refresh_locked(grant, refresh, clock)
    # The transaction has committed (the new tokens, or the failure): only now is anything handed out.
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


def connect(mailbox: Mailbox, provider: str, *, refresh_token: str = "", token_cache: str = "",
            access_token: str = "", expires_in: float | None = None, clock: Clock = timezone.now) -> OAuthGrant:
    """Store a new grant for ``mailbox`` (its consent just completed), replacing any grant it had, active.

    This is how a ``needs_reauth`` grant comes back: the end of the admin's Connect flow (``oauth.connect``).
    """
    now = clock()
    has_access = bool(access_token) and expires_in is not None
    row = OAuthGrant(
        mailbox=mailbox, provider=provider, state=GrantState.ACTIVE,
        refresh_token=_encrypt(refresh_token), token_cache=_encrypt(token_cache),
        access_token=_encrypt(access_token) if has_access else "",
        access_expires_at=now + timedelta(seconds=expires_in) if has_access else None,
        authorized_at=now, last_refreshed_at=None, failure_reason="", failed_at=None,
    )
    # One INSERT … ON CONFLICT (mailbox) DO UPDATE: the grant (re)starts active whatever it was. Against a
    # refresh in progress it waits for that refresh's row lock, and then replaces what it saved.
    OAuthGrant.objects.bulk_create(
        [row], update_conflicts=True, unique_fields=["mailbox"],
        update_fields=["provider", "state", "refresh_token", "token_cache", "access_token", "access_expires_at",
                       "authorized_at", "last_refreshed_at", "failure_reason", "failed_at"],
    )
    logger.info("mailbox=%s OAuth grant connected (%s)", mailbox.pk, provider)
    return OAuthGrant.objects.get(mailbox=mailbox)


def disconnect(mailbox: Mailbox, why: str) -> bool:
    """Forget the mailbox's grant, whatever its state; True if it had one.

    For when the grant no longer fits the mailbox (its app, issuer or IMAP server changed): its refresh
    token must never be sent to the new one. The mailbox is then "not connected" until Connect makes a
    new grant, and the claim skips it meanwhile. A refresh in progress holds the row lock; the DELETE
    waits for it, then removes what it saved.
    """
    deleted = OAuthGrant.objects.filter(mailbox=mailbox).delete()[0] > 0
    if deleted:
        logger.info("mailbox=%s OAuth grant removed: %s", mailbox.pk, why)
    return deleted


def _grant_of(mailbox_or_grant) -> OAuthGrant:
    if isinstance(mailbox_or_grant, OAuthGrant):
        return OAuthGrant.objects.get(pk=mailbox_or_grant.pk)
    return OAuthGrant.objects.get(mailbox_id=mailbox_or_grant.pk)


def _usable(grant: OAuthGrant, now: datetime, margin: timedelta) -> str | None:
    """The grant's access token if it is good for use at ``now``; None if a refresh is due."""
    if grant.state == GrantState.NEEDS_REAUTH:
        raise NeedsReauthorization(grant, grant.failure_reason)
    if not grant.access_token or should_refresh(grant.access_expires_at, now, margin):
        return None
    return crypto.decrypt(grant.access_token)


def _refresh_locked(grant: OAuthGrant, refresh: Refresh, clock: Clock) -> str | Exception:
    """Refresh the locked, active ``grant`` and write the outcome; the token, or the exception to raise."""
    held = HeldTokens(refresh_token=_decrypt(grant.refresh_token), token_cache=_decrypt(grant.token_cache))
    # The expiry counts from before the request: the token's life started no later than our asking.
    asked_at = clock()
    try:
        result = refresh(held)
    except TokenEndpointError as exc:
        return _record_failure(grant, exc, clock())
    _save_refreshed(grant, result, asked_at)
    logger.info("mailbox=%s access token refreshed (%s), valid %ds%s", grant.mailbox_id, grant.provider,
                result.expires_in, ", refresh token rotated" if result.refresh_token else "")
    return result.access_token


def _save_refreshed(grant: OAuthGrant, result: Refreshed, asked_at: datetime) -> None:
    changes = {
        "access_token": crypto.encrypt(result.access_token),
        "access_expires_at": asked_at + timedelta(seconds=result.expires_in),
        "last_refreshed_at": asked_at, "failure_reason": "", "failed_at": None,
    }
    if result.refresh_token is not None:
        changes["refresh_token"] = crypto.encrypt(result.refresh_token)
    if result.token_cache is not None:
        changes["token_cache"] = _encrypt(result.token_cache)
        if result.refresh_token is None:
            # msal keeps the current refresh token inside its cache from now on; the bare one stored at Connect is
            # spent (or soon will be) and is not kept as a secret at rest for nothing.
            changes["refresh_token"] = ""
    # active -> active with new tokens. Guarded on active: under our lock nothing else can have moved it, so
    # zero rows would mean the state machine was bypassed.
    _exactly_one(OAuthGrant.objects.filter(pk=grant.pk, state=GrantState.ACTIVE).update(**changes), grant)


def _record_failure(grant: OAuthGrant, exc: TokenEndpointError, now: datetime) -> Exception:
    classified = classify_token_error(exc.status, exc.body, exc.detail)
    if classified.verdict is Verdict.REAUTHORIZE:
        # active -> needs_reauth: the provider refused the grant itself; refreshing again could only fail again
        # (and would hammer the endpoint). The dead access token goes too.
        _exactly_one(OAuthGrant.objects.filter(pk=grant.pk, state=GrantState.ACTIVE).update(
            state=GrantState.NEEDS_REAUTH, failure_reason=classified.reason, failed_at=now,
            access_token="", access_expires_at=None), grant)
        logger.warning("mailbox=%s OAuth grant needs re-authorization (%s): %s", grant.mailbox_id, grant.provider,
                       classified.reason)
        return NeedsReauthorization(grant, classified.reason)
    # active stays active, the failure recorded for the operator: the grant itself is not in question.
    _exactly_one(OAuthGrant.objects.filter(pk=grant.pk, state=GrantState.ACTIVE).update(
        failure_reason=classified.reason, failed_at=now), grant)
    logger.warning("mailbox=%s token refresh failed, %s (%s): %s", grant.mailbox_id, classified.verdict.value,
                   grant.provider, classified.reason)
    error = RefreshDeferred if classified.verdict is Verdict.TRANSIENT else RefreshRefused
    return error(grant, classified.reason)


def _exactly_one(updated: int, grant: OAuthGrant) -> None:
    if updated != 1:
        raise RuntimeError(f"mailbox={grant.mailbox_id} OAuth grant {grant.pk} left 'active' under its row lock")


def _encrypt(plaintext: str) -> str:
    return crypto.encrypt(plaintext) if plaintext else ""


def _decrypt(token: str) -> str:
    return crypto.decrypt(token) if token else ""
