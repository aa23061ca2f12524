"""The Graph source against a Graph that misbehaves (issue 19): redirects, links and cursors outside the API,
answers too large or of the wrong shape, throttling past the poll's deadline, token endpoints that redirect.

Through the real requests and msal, over verified TLS to the loopback fake; the other host a redirect points at
is a plain listener that records whatever reaches it (``fake_graph.Sink``).
"""

from __future__ import annotations

import threading
import time

import pytest
import requests

from mailpoll.oauth.refresh import HeldTokens, TokenEndpointError
from mailpoll.oauth.rules import Verdict, classify_token_error
from mailpoll.providers.base import PollInterrupted, ProviderError
from mailpoll.providers.changes import CursorExpired, Throttled, TooBig
from mailpoll.providers.graph import GraphSource
from mailpoll.providers.graph_auth import AppOnlyTokens, DelegatedTokens, GraphApp, MsalRefresh, new_session
from mailpoll.providers.graph_rules import NotGraph, decode_json, delta_page, header_block, page_cap, throttle_wait, under_api
from tests.support.fake_graph import CLIENT_ID, CLIENT_SECRET, ELSEWHERE, TENANT, USER, Sink
from tests.support.graph_sources import LIMIT, consented_cache, mail, run
from tests.support.graph_sources import (  # noqa: F401  (the fixtures fake, app, session, sleeps, source)
    fixture_app,
    fixture_fake,
    fixture_session,
    fixture_sleeps,
    fixture_source,
)
from tests.support.guards import finishes_within


@pytest.fixture
def sink():
    other = Sink()
    yield other
    other.stop()


# -- redirects: never followed, never a cursor ------------------------------------------------------------------

@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_on_delta_is_refused_naming_the_host_and_the_other_host_gets_nothing(fake, sink, source, status):
    fake.add("inbox", mail(1))
    fake.redirect_delta = (status, f"{sink.origin}/v1.0/users/x/messages/delta?$skiptoken=do-not-show")
    with pytest.raises(ProviderError) as raised:
        run(source())
    text = str(raised.value)
    assert f"HTTP {status}" in text and sink.origin in text and "do-not-show" not in text and "/v1.0" not in text
    assert sink.received == []


def test_a_plain_requests_session_is_not_redirected_either(fake, sink, app, session):
    plain = requests.Session()
    plain.verify, plain.trust_env = fake.ca_file, False
    fake.add("inbox", mail(1))
    fake.redirect_delta = (307, f"{sink.origin}/v1.0/users/x/messages/delta")
    graph = GraphSource(USER, AppOnlyTokens(app, session), session=plain, graph_url=fake.graph_url)
    with pytest.raises(ProviderError, match=f"Graph answered HTTP 307, a redirect to {sink.origin}, which is not"):
        run(graph)
    assert sink.received == []


def test_a_redirect_within_the_host_but_outside_the_api_never_yields_a_cursor(fake, source):
    fake.add("inbox", mail(1))
    fake.redirect_delta = (302, f"{fake.origin}{ELSEWHERE}/v1.0/users/{USER}/mailFolders/inbox/messages/delta")
    batches = []
    with pytest.raises(ProviderError, match="HTTP 302"):
        batches.extend(source().changes("inbox", None))
    assert batches == [] and not fake.requests_to(ELSEWHERE)


@pytest.mark.parametrize("link", ["@odata.deltaLink", "@odata.nextLink"])
def test_a_link_graph_hands_back_outside_the_api_is_an_error_not_a_cursor(fake, source, link):
    for n in range(15 if link == "@odata.nextLink" else 3):
        fake.add("inbox", mail(n))
    fake.links_base = f"{fake.origin}{ELSEWHERE}/v1.0"
    batches = []
    with pytest.raises(ProviderError, match="outside") as raised:
        batches.extend(source().changes("inbox", None))
    assert "$deltatoken" not in str(raised.value) and "$skiptoken" not in str(raised.value)
    assert all(batch.cursor is None for batch in batches)
    assert not fake.requests_to(ELSEWHERE)  # the token never went there


def test_a_stored_cursor_outside_the_api_is_expired_and_nothing_is_asked(fake, source):
    stored = "https://graph.old-cloud.example/v1.0/users/u/mailFolders/inbox/messages/delta?$deltatoken=secret-t"
    with pytest.raises(CursorExpired) as raised:
        run(source(), cursor=stored)
    text = str(raised.value)
    assert "outside" in text and "https://graph.old-cloud.example" in text and "secret-t" not in text
    assert fake.requests == []


# -- token endpoints that redirect: msal's requests carry the client secret and the refresh token ---------------

@pytest.mark.parametrize("status", [307, 308])
def test_an_app_only_token_request_answered_with_a_redirect_sends_nothing_to_the_other_host(
        fake, sink, app, session, status):
    fake.token_redirect = (status, f"{sink.origin}/{TENANT}/oauth2/v2.0/token")
    with pytest.raises(ProviderError) as raised:
        AppOnlyTokens(app, session)()
    assert f"HTTP {status}" in str(raised.value) and sink.origin in str(raised.value)
    assert CLIENT_SECRET not in str(raised.value)
    assert sink.received == []


@pytest.mark.parametrize("status", [307, 308])
def test_a_delegated_refresh_answered_with_a_redirect_sends_nothing_to_the_other_host(
        fake, sink, app, session, status):
    cache = consented_cache(fake, app, session)
    fake.token_redirect = (status, f"{sink.origin}/{TENANT}/oauth2/v2.0/token")
    with pytest.raises(TokenEndpointError) as raised:
        MsalRefresh(app, session)(HeldTokens(token_cache=cache))
    error = raised.value
    classified = classify_token_error(error.status, error.body, error.detail)
    assert classified.verdict is Verdict.TRANSIENT  # not a refusal of the grant: never "needs re-authorization"
    assert sink.origin in classified.reason
    with pytest.raises(ProviderError):
        DelegatedTokens(app, session, load=lambda: cache, save=lambda state: None, scopes=["Mail.Send"])()
    assert sink.received == []


def test_the_session_never_follows_a_redirect_even_when_asked_to(fake, sink):
    fake.token_redirect = (307, f"{sink.origin}/token")
    with pytest.raises(Exception) as raised:
        new_session(fake.ca_file).post(f"{fake.authority}/oauth2/v2.0/token", data={"client_secret": "s"},
                                       allow_redirects=True)
    assert "HTTP 307" in str(raised.value) and sink.received == []


# -- bounded answers ------------------------------------------------------------------------------------------

def test_a_token_answer_over_its_cap_is_cut_and_named(fake, app, session):
    fake.token_answer_bytes = 20 * 1024 * 1024
    with pytest.raises(ProviderError, match="passed 1,048,576 bytes") as raised:
        AppOnlyTokens(app, session)()
    assert fake.origin in str(raised.value) and "/oauth2" not in str(raised.value)
    assert fake.huge_sent < fake.token_answer_bytes

def test_a_delta_page_over_its_cap_is_cut_and_named(fake, source):
    fake.add("inbox", mail(1))
    fake.huge_delta_bytes = page_cap(10) + 5 * 1024 * 1024
    with pytest.raises(ProviderError) as raised:
        run(source(page_size=10))
    assert f"{page_cap(10):,} bytes" in str(raised.value) and "delta page" in str(raised.value)
    assert fake.huge_sent < fake.huge_delta_bytes  # the rest was never read


def test_a_header_answer_over_its_cap_leaves_a_rejected_message_without_headers(fake, source):
    big = fake.add("inbox", mail(1), exchange_size=LIMIT + 1)
    fake.headers_body = b'{"internetMessageHeaders": [{"name": "X", "value": "' + b"y" * (3 << 20) + b'"}]}'
    [batch] = run(source())
    [(mid, item)] = batch.items
    assert mid == big.id and isinstance(item, TooBig) and item.headers == b""


def test_a_lying_content_length_is_not_the_size_of_the_rejected_message(fake, source):
    raw = mail(1, b"x" * (LIMIT * 40))  # more than one read: the limit is passed before the connection ends
    fake.add("inbox", raw, exchange_size=100)
    fake.value_claimed_length = 10 ** 10
    [batch] = run(source())
    [(_, item)] = batch.items
    assert isinstance(item, TooBig) and LIMIT < item.size <= len(raw)


# -- answers that are not Graph's shape --------------------------------------------------------------------------

@pytest.mark.parametrize("body, says", [
    (b'"a string"', "not an object"),
    (b"[]", "not an object"),
    (b"not json at all", "not JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "not JSON"),  # deeper than the decoder's recursion
    (b'{"value": "x", "@odata.deltaLink": "y"}', "value"),
    (b'{"value": [1, 2], "@odata.deltaLink": "y"}', "item"),
    (b'{"value": [], "@odata.deltaLink": 7}', "deltaLink"),
    (b'\xff\xfe{', "not JSON"),
])
def test_a_delta_answer_that_is_not_graphs_shape_is_named_so(fake, source, body, says, caplog):
    fake.delta_body = body
    with pytest.raises(NotGraph) as raised:
        run(source())
    text = str(raised.value)
    assert text.startswith("folder inbox: Graph answered something that is not its API (") and says in text
    assert "Error" not in text.split("(", 1)[1]  # no Python exception's name or text
    assert "mailbox=7" in caplog.text  # the details are in the log, for staff


@pytest.mark.parametrize("body", [b'"x"', b'{"internetMessageHeaders": "x"}',
                                  b'{"internetMessageHeaders": [{"name": 1}]}', b"{" * 50_000])
def test_a_header_answer_that_is_not_graphs_shape_is_named_so(fake, source, body):
    fake.add("inbox", mail(1), exchange_size=LIMIT + 1)
    fake.headers_body = body
    with pytest.raises(NotGraph, match="not its API"):
        run(source())


@pytest.mark.parametrize("page, problem", [
    ({"value": [], "@odata.deltaLink": "d"}, None),
    ({"value": [{"id": "a"}], "@odata.nextLink": "n"}, None),
    ({"value": [{"id": "a", "@removed": {"reason": "deleted"}}], "@odata.deltaLink": "d"}, None),
    ({"@odata.deltaLink": "d"}, None),  # no value: an empty page
    ("page", "not an object"),
    ([], "not an object"),
    ({"value": {}, "@odata.deltaLink": "d"}, "value"),
    ({"value": ["a"], "@odata.deltaLink": "d"}, "item"),
    ({"value": [{"id": 3}], "@odata.deltaLink": "d"}, "id"),
    ({"value": [{"id": ""}], "@odata.deltaLink": "d"}, "id"),
    ({"value": [{"id": "a", "singleValueExtendedProperties": "x"}], "@odata.deltaLink": "d"}, "properties"),
    ({"value": [{"id": "a", "singleValueExtendedProperties": ["x"]}], "@odata.deltaLink": "d"}, "properties"),
    ({"value": [], "@odata.deltaLink": ["d"]}, "deltaLink"),
    ({"value": [], "@odata.nextLink": {}}, "nextLink"),
    ({"value": []}, "neither"),
])
def test_delta_page_shapes(page, problem):
    if problem is None:
        items, delta, next_link = delta_page(page)
        assert isinstance(items, list) and (delta or next_link)
    else:
        with pytest.raises(NotGraph, match=problem):
            delta_page(page)


@pytest.mark.parametrize("answer, expected", [
    ({"internetMessageHeaders": [{"name": "Subject", "value": "hi"}]}, b"Subject: hi\r\n\r\n"),
    ({"internetMessageHeaders": []}, b""),
    ({"id": "x"}, b""),
    ({"internetMessageHeaders": None}, b""),
    ("x", NotGraph), ({"internetMessageHeaders": "x"}, NotGraph), ({"internetMessageHeaders": ["x"]}, NotGraph),
    ({"internetMessageHeaders": [{"name": "a"}]}, NotGraph), ({"internetMessageHeaders": [{"name": 1, "value": "v"}]},
                                                              NotGraph),
])
def test_header_block_shapes(answer, expected):
    if expected is NotGraph:
        with pytest.raises(NotGraph):
            header_block(answer)
    else:
        assert header_block(answer) == expected


@pytest.mark.parametrize("body, ok", [
    (b'{"a": 1}', True), (b"[1]", True), (b"", False), (b"{", False), (b"[" * 100_000, False), (b"\xff", False),
])
def test_decode_json(body, ok):
    if ok:
        assert decode_json(body, "x") is not None
    else:
        with pytest.raises(NotGraph, match="not JSON"):
            decode_json(body, "x")


@pytest.mark.parametrize("url, ok", [
    ("https://graph.microsoft.com/v1.0/users/u/mailFolders/inbox/messages/delta?$deltatoken=x", True),
    ("https://GRAPH.microsoft.com:443/v1.0/users/u", True),
    ("https://graph.microsoft.com/v1.0", False),  # the base itself is no link of a resource
    ("https://graph.microsoft.com/v1.01/users/u", False),
    ("https://graph.microsoft.com/beta/users/u", False),
    ("https://graph.microsoft.com/v1.0/../beta/users/u", False),
    ("https://graph.microsoft.com/v1.0/users/%2e%2e/x", False),  # a dot segment to a server that decodes
    ("http://graph.microsoft.com/v1.0/users/u", False),
    ("https://graph.microsoft.com:8443/v1.0/users/u", False),
    ("https://graph.microsoft.us/v1.0/users/u", False),
    ("https://graph.microsoft.com\\@evil.example/v1.0/users/u", False),
    ("https://evil.example@graph.microsoft.com/v1.0/users/u", False),
    ("/v1.0/users/u", False), ("", False), (None, False), (7, False),
])
def test_under_api(url, ok):
    assert under_api(url, "https://graph.microsoft.com/v1.0") is ok


@pytest.mark.parametrize("attempt, hint, left, expected", [
    (1, 100.0, 20.0, None),  # past the poll's deadline: not waited for
    (1, 3.0, 20.0, 3.0),
    (1, 19.0, 20.0, 19.0),
    (1, 20.0, 20.0, None),
    (2, None, 1.5, None),  # 2 s of backoff, 1.5 s left
    (1, None, float("inf"), 1.0),
])
def test_throttle_wait_within_the_time_left(attempt, hint, left, expected):
    assert throttle_wait(attempt, hint, time_left=left) == expected


# -- throttling within the deadline, interruptibly -------------------------------------------------------------

def test_a_retry_after_past_the_time_left_is_not_waited_for_and_says_until_when(fake, source):
    fake.add("inbox", mail(1))
    fake.throttle = [(429, "100")]
    waited = []
    graph = source(sleep=waited.append, time_left=lambda: 5.0)
    with pytest.raises(Throttled) as raised:
        run(graph)
    assert waited == [] and raised.value.retry_after == 100.0
    assert "throttled until " in str(raised.value) and "UTC" in str(raised.value)


def test_a_throttle_wait_ends_at_once_when_the_source_is_interrupted(fake, app, session):
    fake.add("inbox", mail(1))
    fake.throttle = [(429, "60")]
    graph = GraphSource(USER, AppOnlyTokens(app, session), mailbox=7, session=session, graph_url=fake.graph_url)
    threading.Timer(0.5, graph.interrupt, args=("pollmail is stopping",)).start()
    started = time.monotonic()
    with finishes_within(30, "a throttle wait that interrupt() does not end"), \
            pytest.raises(PollInterrupted, match="pollmail is stopping"):
        run(graph)
    assert time.monotonic() - started < 30


# -- errors name the host only ------------------------------------------------------------------------------------

def test_a_graph_error_message_with_a_url_is_recorded_without_its_path_or_query(fake, source):
    fake.refuse_delta = (403, "ErrorAccessDenied")
    fake.refuse_delta_message = f"see {fake.graph_url}/users/u/messages?$skiptoken=private-token for details"
    with pytest.raises(ProviderError) as raised:
        run(source())
    assert "403 ErrorAccessDenied" in str(raised.value) and "private-token" not in str(raised.value)
    assert fake.origin in str(raised.value)


def test_an_authority_msal_cannot_read_is_named_by_its_host_only(fake, session):
    app = GraphApp("tenant-in-the-path", CLIENT_ID, CLIENT_SECRET, authority_host=fake.origin)
    with pytest.raises(ProviderError) as raised:
        AppOnlyTokens(app, session)()
    assert fake.origin in str(raised.value) and "tenant-in-the-path" not in str(raised.value)
    with pytest.raises(TokenEndpointError) as refused:
        MsalRefresh(app, session)(HeldTokens(refresh_token="rt"))
    assert "tenant-in-the-path" not in refused.value.detail
