"""Pure decisions about OAuth tokens: refresh now?, what a token endpoint's refusal means, known cliffs.

No I/O here: ``mailpoll.oauth`` applies these under its row lock; the tests hold them to tables.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

# An access token is refreshed this long before it expires, not after a 401: a poll that starts with it has
# time to finish, and clocks a little apart do not hand out a token the API already refuses.
REFRESH_MARGIN = timedelta(minutes=5)

# The longest reason kept on a grant: the provider's first line is what an operator needs.
REASON_MAX = 500


def should_refresh(expires_at: datetime | None, now: datetime, margin: timedelta = REFRESH_MARGIN) -> bool:
    """True when the access token expiring at ``expires_at`` must be replaced before use at ``now``.

    No token (``None``) is refreshed; a token is refreshed from ``margin`` before its expiry on.

    >>> from datetime import datetime, timezone as tz
    >>> noon = datetime(2026, 1, 1, 12, tzinfo=tz.utc)
    >>> should_refresh(noon, noon - timedelta(minutes=6)), should_refresh(noon, noon - timedelta(minutes=5))
    (False, True)
    """
    return expires_at is None or now >= expires_at - margin


class Verdict(enum.Enum):
    # The grant is dead (revoked, expired, consent withdrawn): only a person reconnecting it helps.
    REAUTHORIZE = "reauthorize"
    # The endpoint could not answer now (network, 5xx, throttled): the grant is fine, try again later.
    TRANSIENT = "transient"
    # The endpoint refused our client or request (wrong or expired client secret, bad URL): the grant may be
    # fine, reconnecting it would not help; an operator fixes the configuration.
    MISCONFIGURED = "misconfigured"


# RFC 6749 §5.2 and OpenID Connect errors that mean the user has to authorize again.
REAUTH_ERRORS = frozenset({"invalid_grant", "interaction_required", "consent_required", "login_required"})
# RFC 6749 §4.1.2.1 errors some token endpoints also answer with (Microsoft does): try later.
TRANSIENT_ERRORS = frozenset({"temporarily_unavailable", "server_error"})
TRANSIENT_STATUSES = frozenset({408, 425, 429})

# Microsoft Entra (AADSTS) codes that mean the grant is dead, whatever the ``error`` says, with what they mean.
REAUTH_AADSTS = {
    700082: "unused for 90 days (Microsoft's inactivity limit)",
    50173: "revoked (password changed or reset, or sessions revoked)",
    70008: "expired or revoked",
    70043: "expired under a Conditional Access sign-in frequency policy",
    50076: "multi-factor authentication is now required",
    50079: "multi-factor authentication registration is now required",
    65001: "consent to the application was withdrawn or never given",
}
# Microsoft's codes for "our client is wrong": these come with ``invalid_client`` (already MISCONFIGURED), and
# AADSTS50173-style revocations never use them. Listed so a new error text does not change the verdict.
MISCONFIGURED_AADSTS = {
    7000215: "the client secret is wrong",
    7000222: "the client secret has expired",
    700016: "the application is not found in the tenant",
}

_AADSTS = re.compile(r"\bAADSTS(\d+)\b")


@dataclass(frozen=True)
class Classified:
    verdict: Verdict
    reason: str  # what the provider said, for the grant's failure_reason: never a token


def aadsts_codes(body: Mapping | None) -> list[int]:
    """Microsoft's error codes of a token endpoint answer: ``error_codes``, else ``AADSTS<n>`` in the text.

    >>> aadsts_codes({"error": "invalid_grant", "error_codes": [700082]})
    [700082]
    >>> aadsts_codes({"error_description": "AADSTS50173: The provided grant has expired"})
    [50173]
    """
    if not isinstance(body, Mapping):
        return []
    codes = body.get("error_codes")
    if isinstance(codes, list) and all(isinstance(c, int) and not isinstance(c, bool) for c in codes) and codes:
        return list(codes)
    return [int(c) for c in _AADSTS.findall(str(body.get("error_description") or ""))]


def classify_token_error(status: int | None, body: Mapping | None, detail: str = "") -> Classified:
    """What a failed refresh means: ``status`` is the HTTP status (None: no answer, or a library that does not
    say), ``body`` the decoded JSON answer if it was a JSON object, ``detail`` what went wrong otherwise.

    >>> classify_token_error(400, {"error": "invalid_grant", "error_description": "Token has been expired or revoked."})
    Classified(verdict=<Verdict.REAUTHORIZE: 'reauthorize'>, reason='invalid_grant: Token has been expired or revoked.')
    >>> classify_token_error(None, None, "ConnectionError").verdict
    <Verdict.TRANSIENT: 'transient'>
    """
    body = body if isinstance(body, Mapping) else None
    error = str(body.get("error") or "") if body else ""
    codes = aadsts_codes(body)
    reason = _reason(status, body, error, codes, detail)
    if error in REAUTH_ERRORS or any(c in REAUTH_AADSTS for c in codes):
        return Classified(Verdict.REAUTHORIZE, reason)
    if error in TRANSIENT_ERRORS or status is None or status >= 500 or status in TRANSIENT_STATUSES:
        return Classified(Verdict.TRANSIENT, reason)
    if error or 400 <= status < 500:
        return Classified(Verdict.MISCONFIGURED, reason)
    # A 2xx or 3xx that is no token (a proxy's page, a redirect we do not follow): not the endpoint speaking.
    return Classified(Verdict.TRANSIENT, reason)


def _reason(status, body, error: str, codes: list[int], detail: str) -> str:
    description = str(body.get("error_description") or "") if body else ""
    # Microsoft appends Trace ID, Correlation ID and Timestamp lines: the first line is the message.
    first_line = description.strip().splitlines()[0].strip() if description.strip() else ""
    head = error or (f"HTTP {status}" if status is not None else "no answer")
    text = first_line or detail
    reason = f"{head}: {text}" if text else head
    meaning = next((REAUTH_AADSTS.get(c) or MISCONFIGURED_AADSTS.get(c) for c in codes
                    if c in REAUTH_AADSTS or c in MISCONFIGURED_AADSTS), None)
    if meaning:
        reason += f" ({meaning})"
    return reason[:REASON_MAX]


# -- Known cliffs: refresh tokens that die on a schedule ------------------------------------------------------

@dataclass(frozen=True)
class Cliff:
    provider: str
    lifetime: timedelta
    warn_ahead: timedelta
    # "refresh": the clock restarts at every refresh (an inactivity limit); "authorization": it does not.
    measured_from: str
    what: str
    testing_apps_only: bool = False


CLIFFS = (
    Cliff("microsoft", timedelta(days=90), timedelta(days=14), "refresh",
          "Microsoft revokes a refresh token unused for 90 days"),
    Cliff("google", timedelta(days=7), timedelta(days=2), "authorization",
          "a Google app in Testing status gets refresh tokens that expire 7 days after consent",
          testing_apps_only=True),
    Cliff("google", timedelta(days=183), timedelta(days=14), "refresh",
          "Google revokes a refresh token unused for six months"),
)


@dataclass(frozen=True)
class CliffWarning:
    deadline: datetime
    message: str


def cliff_warning(provider: str, *, authorized_at: datetime, last_refreshed_at: datetime | None,
                  now: datetime, testing_app: bool = False) -> CliffWarning | None:
    """The warning to show about the grant's nearest known cliff, from its ``warn_ahead`` on; None before.

    A deadline already past still warns: the grant has probably died and the next refresh will say so.

    >>> from datetime import datetime, timezone as tz
    >>> day0 = datetime(2026, 1, 1, tzinfo=tz.utc)
    >>> cliff_warning("microsoft", authorized_at=day0, last_refreshed_at=None, now=day0 + timedelta(days=75))
    >>> cliff_warning("microsoft", authorized_at=day0, last_refreshed_at=None, now=day0 + timedelta(days=77)).deadline
    datetime.datetime(2026, 4, 1, 0, 0, tzinfo=datetime.timezone.utc)
    """
    deadlines = []
    for cliff in CLIFFS:
        if cliff.provider != provider or (cliff.testing_apps_only and not testing_app):
            continue
        start = authorized_at
        if cliff.measured_from == "refresh" and last_refreshed_at is not None:
            start = max(authorized_at, last_refreshed_at)
        deadline = start + cliff.lifetime
        if now >= deadline - cliff.warn_ahead:
            deadlines.append((deadline, cliff))
    if not deadlines:
        return None
    deadline, cliff = min(deadlines, key=lambda pair: pair[0])
    when = "expired" if now >= deadline else "expires"
    return CliffWarning(deadline, f"the refresh token {when} around {deadline:%Y-%m-%d %H:%M} UTC: {cliff.what}; "
                                  + ("reconnect the mailbox" if now >= deadline or cliff.measured_from != "refresh"
                                     else "poll the mailbox (a refresh restarts the clock) or reconnect it"))
