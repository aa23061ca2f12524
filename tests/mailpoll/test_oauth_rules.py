"""The pure OAuth rules as tables: refresh now?, what a token endpoint's refusal means, warnings ahead of cliffs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from mailpoll.oauth.refresh import DEFAULT_EXPIRES_IN, expires_in_seconds
from mailpoll.oauth.rules import (REASON_MAX, REFRESH_MARGIN, Verdict, classify_token_error, cliff_warning,
                                  should_refresh)
from tests.support.fake_oauth import microsoft_error

NOON = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
REAUTH, TRANSIENT, MISCONFIGURED = Verdict.REAUTHORIZE, Verdict.TRANSIENT, Verdict.MISCONFIGURED


@pytest.mark.parametrize("expires_at, now, margin, expected", [
    (None, NOON, REFRESH_MARGIN, True),  # no access token yet
    (NOON, NOON + timedelta(seconds=1), REFRESH_MARGIN, True),  # expired
    (NOON, NOON, REFRESH_MARGIN, True),
    (NOON, NOON - REFRESH_MARGIN, REFRESH_MARGIN, True),  # exactly at the margin
    (NOON, NOON - REFRESH_MARGIN - timedelta(seconds=1), REFRESH_MARGIN, False),
    (NOON, NOON - timedelta(hours=1), REFRESH_MARGIN, False),
    (NOON, NOON - timedelta(minutes=30), timedelta(minutes=45), True),  # a wider margin
    (NOON, NOON - timedelta(seconds=1), timedelta(0), False),  # no margin: valid to the last second
])
def test_should_refresh(expires_at, now, margin, expected):
    assert should_refresh(expires_at, now, margin) is expected


GOOGLE_REVOKED = {"error": "invalid_grant", "error_description": "Token has been expired or revoked."}


@pytest.mark.parametrize("status, body, detail, verdict, reason", [
    # The grant is dead: Google's one shape for revoked, expired and testing apps' 7 days.
    (400, GOOGLE_REVOKED, "", REAUTH, "invalid_grant: Token has been expired or revoked."),
    (400, {"error": "invalid_grant", "error_description": "Bad Request"}, "", REAUTH, "invalid_grant: Bad Request"),
    # Microsoft: the AADSTS line is kept (without its trace ids), with what the code means.
    (400, "ms:invalid_grant:700082", "", REAUTH, "invalid_grant: AADSTS700082: The refresh token has expired"),
    (400, "ms:invalid_grant:50173", "", REAUTH, "invalid_grant: AADSTS50173: The provided grant has expired"),
    (400, "ms:interaction_required:50076", "", REAUTH, "interaction_required: AADSTS50076"),
    # msal hands over the error dict without a status: the body alone decides.
    (None, {"error": "invalid_grant", "error_codes": [700082]}, "", REAUTH, "invalid_grant (unused for 90 days"),
    # An AADSTS code of a dead grant under another error still means a dead grant.
    (400, {"error": "invalid_request", "error_description": "AADSTS70043: The refresh token has expired"}, "",
     REAUTH, "invalid_request: AADSTS70043"),
    # Transient: the network, the server, throttling.
    (None, None, "ConnectionError: refused", TRANSIENT, "no answer: ConnectionError: refused"),
    (None, None, "ReadTimeout: read timed out", TRANSIENT, "no answer: ReadTimeout"),
    (500, None, "Internal Server Error", TRANSIENT, "HTTP 500: Internal Server Error"),
    (502, None, "", TRANSIENT, "HTTP 502"),
    (503, {"error": "temporarily_unavailable"}, "", TRANSIENT, "temporarily_unavailable"),
    (400, {"error": "server_error"}, "", TRANSIENT, "server_error"),
    (429, {"error": "rate_limited"}, "", TRANSIENT, "rate_limited"),
    (408, None, "Request Timeout", TRANSIENT, "HTTP 408"),
    (200, None, "the answer holds no access token", TRANSIENT, "HTTP 200: the answer holds no access token"),
    # Other 4xx: our client or request is wrong; reconnecting the mailbox would not help.
    (401, {"error": "invalid_client", "error_description": "Unauthorized"}, "", MISCONFIGURED,
     "invalid_client: Unauthorized"),
    (401, "ms:invalid_client:7000222", "", MISCONFIGURED, "invalid_client: AADSTS7000222"),
    (400, {"error": "unauthorized_client"}, "", MISCONFIGURED, "unauthorized_client"),
    (400, {"error": "invalid_scope"}, "", MISCONFIGURED, "invalid_scope"),
    (404, None, "Not Found", MISCONFIGURED, "HTTP 404: Not Found"),  # a wrong token URL
    (403, None, "Forbidden", MISCONFIGURED, "HTTP 403"),  # a proxy in the way
])
def test_classify_token_error(status, body, detail, verdict, reason):
    if isinstance(body, str):
        _, error, code = body.split(":")
        body = microsoft_error(error, int(code))  # trace ids and all
    classified = classify_token_error(status, body, detail)
    assert classified.verdict is verdict
    assert classified.reason.startswith(reason) and "Trace ID" not in classified.reason


def test_a_reason_is_bounded():
    body = {"error": "invalid_grant", "error_description": "x" * 10_000}
    assert len(classify_token_error(400, body).reason) == REASON_MAX


DAY0 = datetime(2026, 1, 1, tzinfo=UTC)


POLL, RECONNECT = "poll the mailbox", "reconnect the mailbox"


@pytest.mark.parametrize("provider, days_since_consent, days_since_refresh, testing_app, deadline_day, said", [
    # Microsoft: 90 days without a refresh; warned from 14 days before. A refresh in time saves it.
    ("microsoft", 75, None, False, None, None),
    ("microsoft", 76, None, False, 90, ("expires", POLL)),
    ("microsoft", 95, None, False, 90, ("expired", RECONNECT)),
    ("microsoft", 200, 10, False, None, None),  # refreshed 10 days ago: the clock restarted
    ("microsoft", 200, 80, False, 120 + 90, ("expires", POLL)),
    ("microsoft", 5, None, True, None, None),  # "testing" means nothing at Microsoft
    # Google, a Testing app: 7 days after consent, however often it refreshes; warned from 2 days before.
    ("google", 4, 0, True, None, None),
    ("google", 5, 0, True, 7, ("expires", RECONNECT)),
    ("google", 8, 0, True, 7, ("expired", RECONNECT)),
    ("google", 8, 0, False, None, None),  # a published app has no 7-day limit
    # Google, any app: six months unused.
    ("google", 170, None, False, 183, ("expires", POLL)),
    ("google", 400, 1, False, None, None),
])
def test_cliff_warning(provider, days_since_consent, days_since_refresh, testing_app, deadline_day, said):
    now = DAY0 + timedelta(days=days_since_consent)
    last = None if days_since_refresh is None else now - timedelta(days=days_since_refresh)
    warning = cliff_warning(provider, authorized_at=DAY0, last_refreshed_at=last, now=now, testing_app=testing_app)
    if deadline_day is None:
        assert warning is None
        return
    assert warning.deadline == DAY0 + timedelta(days=deadline_day)
    when, advice = said
    assert f"the refresh token {when} around" in warning.message and advice in warning.message


@pytest.mark.parametrize("value, expected", [
    (3599, 3599.0), ("3599", 3599.0), (None, DEFAULT_EXPIRES_IN), ("soon", DEFAULT_EXPIRES_IN),
    (-5, DEFAULT_EXPIRES_IN), (float("nan"), DEFAULT_EXPIRES_IN), (1e12, DEFAULT_EXPIRES_IN), (0, 0.0),
])
def test_expires_in_as_answered(value, expected):
    assert expires_in_seconds(value) == expected
