"""The Microsoft Graph source against a loopback fake, through the real msal and requests (over verified TLS)."""

from __future__ import annotations

import datetime as dt
import logging

import pytest

from mailpoll.providers.base import FolderError, PollInterrupted, ProviderError
from mailpoll.providers.changes import CursorExpired, Throttled, TooBig
from mailpoll.oauth.refresh import HeldTokens, TokenEndpointError
from mailpoll.oauth.rules import Verdict, classify_token_error
from mailpoll.providers.graph import GraphSource, is_cursor_expired, parse_retry_after, throttle_wait
from mailpoll.providers.graph_auth import (
    AppOnlyTokens,
    DelegatedTokens,
    GraphApp,
    MsalRefresh,
    TokenRefused,
)
from tests.support.fake_graph import CLIENT_ID, CLIENT_SECRET, TENANT, USER
from tests.support.graph_sources import LIMIT, consented_cache, mail, run
from tests.support.graph_sources import (  # noqa: F401  (the fixtures fake, app, session, sleeps, source)
    fixture_app,
    fixture_fake,
    fixture_session,
    fixture_sleeps,
    fixture_source,
)
from tests.support.loopback import free_port


def test_full_first_sync_pages_until_the_delta_link_which_alone_is_a_cursor(fake, source):
    raws = [mail(n) for n in range(25)]
    ids = [fake.add("inbox", raw).id for raw in raws]
    batches = run(source())
    assert [len(b.items) for b in batches] == [10, 10, 5]
    assert [b.cursor is None for b in batches] == [True, True, False]
    assert "$deltatoken=" in batches[-1].cursor
    assert [i for b in batches for i, _ in b.items] == ids
    assert [raw for b in batches for _, raw in b.items] == raws
    [first] = [q for _, _, q in fake.requests_to("/delta")][:1]
    assert first["changeType"] == "created" and first["$select"] == "id,receivedDateTime"
    assert "Integer 0x0E08" in first["$expand"]


def test_a_page_is_fetched_in_batches_bounded_in_bytes(fake, source):
    for n in range(5):
        fake.add("inbox", mail(n), exchange_size=1000)
    batches = run(source(fetch_max_bytes=2500))
    assert [len(b.items) for b in batches] == [2, 2, 1]
    assert [b.cursor is None for b in batches] == [True, True, False]


def test_incremental_round_from_the_delta_link_brings_only_what_arrived(fake, source):
    fake.add("inbox", mail(1))
    [batch] = run(source())
    new = fake.add("inbox", mail(2))
    [again] = run(source(), cursor=batch.cursor)
    assert again.items == [(new.id, new.raw)] and again.cursor and again.cursor != batch.cursor
    assert run(source(), cursor=again.cursor)[0].items == []


def test_new_only_fetches_nothing_and_starts_from_latest(fake, source):
    for n in range(3):
        fake.add("inbox", mail(n))
    [batch] = run(source(), mode="new-only")
    assert batch.items == [] and batch.cursor
    assert fake.requests_to("/delta")[0][2]["$deltatoken"] == "latest"
    assert not fake.requests_to("$value")
    new = fake.add("inbox", mail(9))
    assert run(source(), cursor=batch.cursor)[0].items == [(new.id, new.raw)]


def test_since_asks_for_messages_received_from_that_day(fake, source):
    fake.add("inbox", mail(1), received=dt.datetime(2026, 3, 1, 23, 0, tzinfo=dt.UTC))
    kept = fake.add("inbox", mail(2), received=dt.datetime(2026, 3, 2, 8, 0, tzinfo=dt.UTC))
    [batch] = run(source(), mode="since", since=dt.date(2026, 3, 2))
    assert batch.items == [(kept.id, kept.raw)]
    assert fake.requests_to("/delta")[0][2]["$filter"] == "receivedDateTime ge 2026-03-02T00:00:00Z"


def test_an_expired_delta_link_raises_cursor_expired(fake, source):
    fake.add("inbox", mail(1))
    [batch] = run(source())
    fake.expire_state_tokens()
    with pytest.raises(CursorExpired, match="410 SyncStateNotFound"):
        run(source(), cursor=batch.cursor)


def test_410_in_the_middle_of_paging_comes_after_the_pages_already_read(fake, source):
    for n in range(25):
        fake.add("inbox", mail(n))
    fake.gone_on_page = 2
    changes = source().changes("inbox", None)
    first = next(changes)
    assert len(first.items) == 10 and first.cursor is None  # nothing to commit: the round restarts
    with pytest.raises(CursorExpired):
        next(changes)


def test_a_message_exchange_says_is_too_big_is_not_downloaded(fake, source):
    big = fake.add("inbox", mail(1), exchange_size=LIMIT + 1)
    [batch] = run(source())
    [(mid, item)] = batch.items
    assert mid == big.id and isinstance(item, TooBig) and item.size == LIMIT + 1
    assert b"Subject: message 1\r\n" in item.headers and item.headers.endswith(b"\r\n\r\n")
    assert not fake.requests_to("$value")


def test_a_download_over_the_limit_stops_and_becomes_too_big(fake, source):
    # Exchange's size can be below the MIME's (base64 attachments): the download is what counts.
    raw = mail(1, b"x" * (LIMIT * 3))
    fake.add("inbox", raw, exchange_size=100)
    [batch] = run(source())
    [(_, item)] = batch.items
    assert isinstance(item, TooBig) and item.size == len(raw) and b"Message-ID: <m1@example.com>" in item.headers


def test_a_message_gone_between_listing_and_download_is_left_out(fake, source):
    kept = fake.add("inbox", mail(1))
    fake.deleted.add(fake.add("inbox", mail(2)).id)
    [batch] = run(source())
    assert batch.items == [(kept.id, kept.raw)] and batch.cursor


def test_a_message_graph_fails_to_give_is_a_folder_error_naming_it(fake, source):
    broken = fake.add("inbox", mail(1))
    fake.refuse_value[broken.id] = 500
    with pytest.raises(FolderError, match=f"message {broken.id}: 500 ErrorInternalServerError"):
        run(source())


def test_a_refused_delta_is_a_provider_error_not_an_expired_cursor(fake, source):
    fake.refuse_delta = (403, "ErrorAccessDenied")  # e.g. an application access policy leaves this mailbox out
    with pytest.raises(ProviderError, match="403 ErrorAccessDenied") as raised:
        run(source())
    assert not isinstance(raised.value, CursorExpired)


def test_throttling_waits_as_retry_after_says(fake, source, sleeps):
    msg = fake.add("inbox", mail(1))
    fake.throttle = [(429, "3"), (503, "1")]
    [batch] = run(source())
    assert batch.items == [(msg.id, msg.raw)]
    assert sleeps == [3.0, 1.0]


def test_throttling_without_end_gives_up_bounded(fake, source, sleeps):
    fake.add("inbox", mail(1))
    fake.throttle = [(429, "2")] * 50
    with pytest.raises(Throttled) as raised:
        run(source())
    assert raised.value.retry_after == 2.0 and sleeps == [2.0] * 5


def test_at_most_four_requests_of_a_mailbox_in_flight(fake, source):
    for n in range(12):
        fake.add("inbox", mail(n))
    fake.page_size, fake.value_delay = 12, 0.05
    [batch] = run(source())
    assert len(batch.items) == 12
    assert 2 <= fake.peak_inflight <= 4


def test_a_link_outside_the_graph_url_is_refused_before_any_request(fake, source):
    with pytest.raises(ProviderError, match="outside"):
        run(source(), cursor="https://attacker.example/v1.0/delta?$deltatoken=x")
    assert fake.requests == []


def test_an_interrupted_source_makes_no_further_request(fake, source):
    for n in range(3):
        fake.add("inbox", mail(n))
    fake.page_size = 1
    graph = source()
    changes = graph.changes("inbox", None)
    next(changes)
    asked = len(fake.requests)
    graph.interrupt("deadline passed")
    with pytest.raises(PollInterrupted, match="deadline passed"):
        next(changes)
    assert len(fake.requests) == asked


def test_a_wrong_client_secret_is_a_token_refusal(fake, session):
    app = GraphApp(TENANT, CLIENT_ID, "wrong", authority_host=fake.origin)
    with pytest.raises(TokenRefused) as raised:
        AppOnlyTokens(app, session)()
    assert raised.value.error == "invalid_client"


def test_an_unreachable_token_endpoint_is_a_provider_error_not_a_refusal(fake, session):
    # Nothing listens there: transient, never a reason to ask for re-authorization.
    app = GraphApp(TENANT, CLIENT_ID, CLIENT_SECRET, authority_host=f"https://127.0.0.1:{free_port()}")
    with pytest.raises(ProviderError) as raised:
        AppOnlyTokens(app, session)()
    assert not isinstance(raised.value, TokenRefused) and CLIENT_SECRET not in str(raised.value)


def test_an_unreachable_graph_is_a_provider_error(fake, app, session):
    url = f"https://127.0.0.1:{free_port()}/v1.0"
    source = GraphSource(USER, AppOnlyTokens(app, session), session=session, graph_url=url)
    with pytest.raises(ProviderError, match="Graph request failed: ConnectionError"):
        list(source.changes("inbox", None))


def test_delegated_tokens_store_the_rotated_refresh_token_before_using_it(fake, app, session, source):
    fake.access_ttl = 60  # under msal's five-minute margin: every call refreshes
    stored = [consented_cache(fake, app, session)]
    seen_at_request = []

    def save(state):
        stored.append(state)

    tokens = DelegatedTokens(app, session, load=lambda: stored[-1], save=save)

    def token():
        value = tokens()
        seen_at_request.append(len(stored))
        return value

    msg = fake.add("inbox", mail(1))
    [batch] = run(source(token))
    assert batch.items == [(msg.id, msg.raw)]
    refreshes = [g for g in fake.token_grants if g["grant_type"] == "refresh_token"]
    assert len(refreshes) >= 3  # the consent, then one per request of the source
    # Each refresh used the token the previous one rotated in, so each was saved before the next call.
    rotated = [g["refresh_token"] for g in refreshes]
    assert len(set(rotated)) == len(rotated)
    assert len(stored) == len(refreshes) and seen_at_request == list(range(2, len(stored) + 1))


def test_a_revoked_grant_is_a_token_refusal_with_microsofts_code(fake, app, session, source):
    fake.access_ttl = 60
    stored = [consented_cache(fake, app, session)]
    fake.revoked = "AADSTS700082: The refresh token has expired due to inactivity."
    tokens = DelegatedTokens(app, session, load=lambda: stored[-1], save=stored.append)
    fake.add("inbox", mail(1))
    with pytest.raises(TokenRefused) as raised:
        run(source(tokens))
    assert raised.value.error == "invalid_grant" and raised.value.codes == (700082,)
    assert "AADSTS700082" in str(raised.value)


def test_a_cache_without_consent_is_a_token_refusal(app, session):
    with pytest.raises(TokenRefused, match="connect the mailbox"):
        DelegatedTokens(app, session, load=lambda: None, save=lambda state: None)()


def test_msal_refresh_hands_oauth_the_rotated_cache(fake, app, session):
    refresh = MsalRefresh(app, session)
    first = refresh(HeldTokens(token_cache=consented_cache(fake, app, session)))
    assert first.access_token and first.expires_in == 3600 and first.token_cache
    second = refresh(HeldTokens(token_cache=first.token_cache))
    refreshes = [g["refresh_token"] for g in fake.token_grants if g["grant_type"] == "refresh_token"]
    # The second refresh used the token the first one rotated in, which only its returned cache held.
    assert refreshes[2] in first.token_cache and refreshes[2] not in refreshes[:2]
    assert second.token_cache and second.token_cache != first.token_cache


def test_msal_refresh_starts_from_a_bare_refresh_token(fake, app, session):
    refreshed = MsalRefresh(app, session)(HeldTokens(refresh_token=fake.grant_refresh_token()))
    assert refreshed.access_token and refreshed.token_cache and refreshed.refresh_token is None


def test_msal_refresh_of_an_empty_grant_asks_nothing(fake, app, session):
    with pytest.raises(ValueError, match="connect the mailbox"):
        MsalRefresh(app, session)(HeldTokens())
    assert fake.token_grants == []


@pytest.mark.parametrize("case, verdict", [
    ("revoked", Verdict.REAUTHORIZE), ("wrong secret", Verdict.MISCONFIGURED), ("unreachable", Verdict.TRANSIENT),
])
def test_msal_refresh_failures_are_classified_as_oauth_expects(fake, app, session, case, verdict):
    held = HeldTokens(token_cache=consented_cache(fake, app, session))
    if case == "revoked":
        fake.revoked = "AADSTS50173: The provided grant has expired due to it being revoked."
    elif case == "wrong secret":
        app = GraphApp(TENANT, CLIENT_ID, "wrong", authority_host=fake.origin)
    else:
        app = GraphApp(TENANT, CLIENT_ID, CLIENT_SECRET, authority_host=f"https://127.0.0.1:{free_port()}")
    with pytest.raises(TokenEndpointError) as raised:
        MsalRefresh(app, session)(held)
    error = raised.value
    assert classify_token_error(error.status, error.body, error.detail).verdict is verdict


@pytest.mark.django_db(transaction=True)  # oauth.access_token commits its own transaction
def test_a_delegated_mailbox_reads_through_its_oauth_grant(fake, app, session, source):
    from mailpoll.oauth import tokens as oauth
    from mailpoll.models import GrantState, OAuthGrant
    from tests.mailpoll.factories import MailboxFactory

    mailbox = MailboxFactory()
    oauth.connect(mailbox, "microsoft", token_cache=consented_cache(fake, app, session))
    refresh = MsalRefresh(app, session)
    msg = fake.add("inbox", mail(1))
    [batch] = run(source(lambda: oauth.access_token(mailbox, refresh=refresh)))
    assert batch.items == [(msg.id, msg.raw)]
    # The consent, then one refresh under the grant's lock; every later request reused the stored token.
    assert len([g for g in fake.token_grants if g["grant_type"] == "refresh_token"]) == 2
    fake.revoked = "AADSTS700082: The refresh token has expired due to inactivity."
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)
    with pytest.raises(oauth.NeedsReauthorization, match="AADSTS700082"):
        oauth.access_token(mailbox, refresh=refresh, clock=lambda: later)
    assert OAuthGrant.objects.get(mailbox=mailbox).state == GrantState.NEEDS_REAUTH


def test_no_token_or_secret_in_logs_at_debug(fake, app, session, source, caplog):
    caplog.set_level(logging.DEBUG)
    fake.access_ttl = 60
    stored = [consented_cache(fake, app, session)]
    fake.add("inbox", mail(1))
    fake.throttle = [(429, "1")]
    run(source(DelegatedTokens(app, session, load=lambda: stored[-1], save=stored.append)))
    run(source())
    text = caplog.text
    assert "Graph answered 429" in text  # the logs were captured
    assert CLIENT_SECRET not in text
    assert fake.issued and not [token for token in fake.issued if token in text]


# -- pure decisions -----------------------------------------------------------

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


@pytest.mark.parametrize("value, expected", [
    (None, None), ("", None), ("0", 0.0), ("12", 12.0), (" 5 ", 5.0),
    ("Thu, 01 Jan 2026 00:01:00 GMT", 60.0),
    ("Wed, 31 Dec 2025 23:59:00 GMT", 0.0),  # a date in the past: retry now
    ("soon", None), ("-3", None), ("1.5", None),
])
def test_parse_retry_after(value, expected):
    assert parse_retry_after(value, NOW) == expected


@pytest.mark.parametrize("attempt, hint, jitter, expected", [
    (1, None, 0.0, 1.0), (2, None, 0.0, 2.0), (3, None, 0.0, 4.0), (3, None, 0.5, 6.0),
    (1, 30.0, 0.9, 30.0),  # the server's hint is obeyed as given, no jitter
    (5, None, 0.0, 16.0),
    (6, None, 0.0, None),  # out of retries
    (6, 1.0, 0.0, None),
    (1, 121.0, 0.0, None),  # longer than a poll should sleep: give up, retry next poll
    (1, 120.0, 0.0, 120.0),
])
def test_throttle_wait(attempt, hint, jitter, expected):
    assert throttle_wait(attempt, hint, jitter=jitter) == expected


@pytest.mark.parametrize("status, code, expected", [
    (410, "", True), (410, "SyncStateNotFound", True), (400, "SyncStateInvalid", True),
    (400, "resyncRequired", True), (400, "BadRequest", False), (404, "ErrorItemNotFound", False),
    (500, "", False),
])
def test_is_cursor_expired(status, code, expected):
    assert is_cursor_expired(status, code) is expected
