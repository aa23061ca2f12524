"""The refresh call (``oauth_refresh.TokenEndpoint``) refuses the URLs the checks refuse, reads a bounded
answer and names the token endpoint by its host only."""

import pytest

from mailpoll.oauth.refresh import ANSWER_LIMIT, HeldTokens, TokenEndpoint, TokenEndpointError
from tests.support.fake_oauth import CLIENT_ID, CLIENT_SECRET, FakeTokenEndpoint
from tests.support.loopback import free_port


@pytest.fixture
def google():
    fake = FakeTokenEndpoint("google").start()
    yield fake
    fake.stop()


def refresh(uri: str, token: str = "1//refresh") -> Exception:
    with pytest.raises(TokenEndpointError) as caught:
        TokenEndpoint(uri, CLIENT_ID, CLIENT_SECRET, timeout=5)(HeldTokens(refresh_token=token))
    return caught.value


def test_the_fake_refreshes_at_its_plain_address(google):
    result = TokenEndpoint(google.uri, CLIENT_ID, CLIENT_SECRET, timeout=5)(HeldTokens(refresh_token=google.grant()))
    assert result.access_token == google.issued[-1]


@pytest.mark.parametrize("form", [
    "http://127.0.0.2:{port}\\@127.0.0.1:{port}/token",  # urlsplit: 127.0.0.1; requests: 127.0.0.2
    "http://robot:pw@127.0.0.1:{port}/token",
    "http://127.0.0.1 :{port}/token",
    "http://127.1:{port}/token",
])
def test_a_token_url_read_differently_by_two_parsers_is_never_sent_the_refresh_token(google, form):
    port = google.uri.split(":")[2].split("/")[0]
    token = google.grant()

    error = refresh(form.format(port=port), token)

    assert google.refreshes == 0 and google.exchanges == []
    assert error.status is None and error.detail.startswith("not sent to the token endpoint")
    assert token not in str(error.detail)


def test_an_unreachable_token_endpoint_is_named_by_its_host_only():
    port = free_port()

    error = refresh(f"http://127.0.0.1:{port}/oauth2/s3cret-path?key=s3cret-query")

    assert error.detail.startswith(f"http://127.0.0.1:{port}: ConnectionError")
    assert "s3cret" not in error.detail and "/oauth2" not in error.detail


def test_an_oversized_answer_is_cut(google):
    google.fail_next(200, {"access_token": "ya29.x", "padding": "x" * (ANSWER_LIMIT + 10)})

    error = refresh(google.uri)

    assert "BodyTooLarge" in error.detail
