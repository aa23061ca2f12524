"""seoinsight.outbound: the one parse of an endpoint URL, bounded answers, refused redirects, host-only errors."""

import http.server
import re
import threading

import pytest
import requests
import urllib3.util

from seoinsight import outbound

# The forms a check has to get right: what a credential may be sent to, and what it must not be.
ACCEPTED = [
    ("https://graph.microsoft.com/v1.0", ("https", "graph.microsoft.com", 443)),
    ("https://oauth2.googleapis.com/token", ("https", "oauth2.googleapis.com", 443)),
    ("http://127.0.0.1:8080/token", ("http", "127.0.0.1", 8080)),
    ("http://localhost/ingest?api_key=x", ("http", "localhost", 80)),
    ("HTTP://LOCALHOST:5/", ("http", "localhost", 5)),
    ("http://[::1]:9000/", ("http", "::1", 9000)),
    ("http://127.0.0.9:1/", ("http", "127.0.0.9", 1)),
    ("https://example.com:8443/a#frag", ("https", "example.com", 8443)),
]

REFUSED = [
    # The differential of the review: urlsplit saw 127.0.0.1, requests connected to 127.0.0.2.
    ("http://127.0.0.2:8000\\@127.0.0.1/ingest", "backslash"),
    ("http://127.0.0.1\\.evil.example/", "backslash"),
    ("http://user:pw@127.0.0.1/", "user name or password"),
    ("http://127.0.0.1:80@evil.example/", "user name or password"),
    ("http://127.0.0.1%2f@evil.example/", "user name or password"),
    ("http://127.0.0.1 @evil.example/", "space"),
    ("http://127.0.0.1\t/", "control character"),
    ("http://127.0.0.1\n.evil.example/", "control character"),
    ("ftp://127.0.0.1/", "not an http(s) URL"),
    ("file:///etc/passwd", "not an http(s) URL"),
    ("127.0.0.1:8080", "not an http(s) URL"),
    ("http:///path-only", "no host"),
    ("http://127.0.0.1:99999/", "not a URL"),
]

PLAIN_HTTP_OFF_THE_MACHINE = [
    "http://example.com/token",
    "http://evil?@127.0.0.1/",  # the query holds the '@': the host is evil
    "http://127.1/",  # loopback to some resolvers, an unparsable host to others: refused, not guessed
    "http://0x7f000001/",
    "http://10.0.0.1/",
]


@pytest.mark.parametrize(("url", "expected"), ACCEPTED)
def test_an_unambiguous_url_is_parsed_to_what_the_client_connects_to(url, expected):
    parsed = outbound.endpoint(url)
    assert (parsed.scheme, parsed.host, parsed.port) == expected
    theirs = urllib3.util.parse_url(url)
    assert (theirs.host or "").strip("[]").lower() == parsed.host
    assert outbound.endpoint_problem(url) == ""


@pytest.mark.parametrize(("url", "why"), REFUSED)
def test_an_ambiguous_or_foreign_url_is_refused_with_the_reason(url, why):
    with pytest.raises(outbound.EndpointError, match=re.escape(why)):
        outbound.endpoint(url)
    assert why in outbound.endpoint_problem(url)


@pytest.mark.parametrize("url", PLAIN_HTTP_OFF_THE_MACHINE)
def test_plain_http_carries_a_credential_only_to_loopback(url):
    assert outbound.endpoint_problem(url) != ""


@pytest.mark.parametrize(("url", "shown"), [
    ("https://down.example/ingest?api_key=s3cret", "https://down.example"),
    ("http://127.0.0.1:8080/a/b?code=s3cret#x", "http://127.0.0.1:8080"),
    ("https://graph.microsoft.com:443/v1.0/me/messages/delta?$deltatoken=s3cret", "https://graph.microsoft.com"),
    ("http://[::1]:81/x?k=s3cret", "http://[::1]:81"),
    ("http://a\\@b/?k=s3cret", "an unparsable URL"),
])
def test_where_names_the_origin_only(url, shown):
    assert outbound.where(url) == shown
    assert "s3cret" not in outbound.where(url)


def test_an_exception_from_requests_is_described_without_the_path_or_query():
    try:
        # Nothing listens on port 9 of loopback: a connection error whose text holds the URL's target.
        requests.get("http://127.0.0.1:9/ingest?api_key=s3cret", timeout=2)
    except requests.RequestException as exc:
        text = str(exc)
        described = outbound.describe(exc)
    else:  # pragma: no cover - something listens on the discard port
        pytest.skip("something answers on 127.0.0.1:9")
    assert "s3cret" in text  # what the library says, the reason for describe()
    assert "s3cret" not in described and "/ingest" not in described
    assert described.startswith("ConnectionError: ") and "127.0.0.1" in described


class _Handler(http.server.BaseHTTPRequestHandler):
    sent = 0

    def do_GET(self):  # noqa: N802 - http.server's name
        if self.path.startswith("/redirect"):
            self.send_response(int(self.path.rsplit("/", 1)[1]))
            self.send_header("Location", "http://127.0.0.1:9/elsewhere?token=s3cret")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        # A body with no length, ended only by closing the connection: nothing announces how much is coming.
        self.send_response(200)
        self.send_header("Connection", "close")
        self.end_headers()
        block = b"x" * 65536
        try:
            for _ in range(2000):  # 128 MiB at most, were the client to read it all
                self.wfile.write(block)
                type(self).sent += len(block)
        except OSError:
            pass

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    _Handler.sent = 0
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_read_capped_returns_a_small_answer_whole(server):
    response = requests.get(f"{server}/redirect/204", stream=True, timeout=5, allow_redirects=False)
    assert outbound.read_capped(response, 1024) == b""


def test_read_capped_stops_at_the_limit_of_an_answer_of_unannounced_length(server):
    with requests.Session() as session:
        response = session.get(f"{server}/huge", stream=True, timeout=5)
        with pytest.raises(outbound.BodyTooLarge) as raised:
            outbound.read_capped(response, 100_000, "the downstream's answer")
    assert raised.value.limit == 100_000 and 100_000 < raised.value.read <= 100_000 + 65536
    assert "the downstream's answer passed 100,000 bytes" in str(raised.value)
    assert _Handler.sent < 64 * 1024 * 1024  # the connection was closed: the server could not send it all


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_refused_and_names_the_host_only(server, status):
    response = requests.get(f"{server}/redirect/{status}", timeout=5, allow_redirects=False)
    with pytest.raises(outbound.RedirectRefused) as raised:
        outbound.refuse_redirect(response, "the downstream")
    text = str(raised.value)
    assert f"HTTP {status}" in text and "http://127.0.0.1:9" in text
    assert "s3cret" not in text and "elsewhere" not in text


def test_a_2xx_is_not_a_redirect(server):
    response = requests.get(f"{server}/redirect/204", timeout=5, allow_redirects=False)
    assert outbound.refuse_redirect(response) is None
