import re

import pytest

from imports.urlnorm import MAX_LENGTH, InvalidUrl, in_scope, normalize_url


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # the worked example: case, default port, unreserved escape, dot segments, fragment
        ("http://EXAMPLE.com:80/%7euser/./a/../b?q=1#frag", "http://example.com/~user/b?q=1"),
        # whitespace and scheme
        ("  https://example.com/a \n", "https://example.com/a"),
        ("HTTPS://Example.COM/Path", "https://example.com/Path"),
        ("HtTp://example.com/", "http://example.com/"),
        ("example.com/a", "https://example.com/a"),
        ("//example.com/a", "https://example.com/a"),
        ("example.com", "https://example.com/"),
        ("localhost:8080/a", "https://localhost:8080/a"),
        # ports
        ("https://example.com:443/", "https://example.com/"),
        ("http://example.com:443/", "http://example.com:443/"),
        ("https://example.com:80/", "https://example.com:80/"),
        ("https://example.com:8443/a", "https://example.com:8443/a"),
        ("https://example.com:0443/", "https://example.com/"),
        ("https://example.com:/a", "https://example.com/a"),
        # host
        ("https://example.com./a", "https://example.com/a"),
        ("https://bücher.de/", "https://xn--bcher-kva.de/"),
        ("https://BÜCHER.DE/", "https://xn--bcher-kva.de/"),
        ("https://例え.テスト/", "https://xn--r8jz45g.xn--zckzah/"),
        ("https://ＥＸＡＭＰＬＥ.com/", "https://example.com/"),
        ("https://my_host.example.com/", "https://my_host.example.com/"),
        ("http://192.168.0.1:8080/x", "http://192.168.0.1:8080/x"),
        ("http://[2001:DB8::1]:8080/x", "http://[2001:db8::1]:8080/x"),
        ("http://[2001:db8:0:0:0:0:0:1]/", "http://[2001:db8::1]/"),
        # path: empty, trailing slash kept, dot segments (RFC 3986 5.2.4 examples)
        ("https://example.com", "https://example.com/"),
        ("https://example.com?q=1", "https://example.com/?q=1"),
        ("https://example.com/a", "https://example.com/a"),
        ("https://example.com/a/", "https://example.com/a/"),
        ("https://example.com/a/b/c/./../../g", "https://example.com/a/g"),
        ("https://example.com/mid/content=5/../6", "https://example.com/mid/6"),
        ("https://example.com/a/b/..", "https://example.com/a/"),
        ("https://example.com/a/.", "https://example.com/a/"),
        ("https://example.com/../../a", "https://example.com/a"),
        ("https://example.com/a//b", "https://example.com/a//b"),
        ("https://example.com/a/..b/.c", "https://example.com/a/..b/.c"),
        ("https://example.com/%2e%2E/a", "https://example.com/a"),
        # percent-encoding
        ("https://example.com/%7Euser", "https://example.com/~user"),
        ("https://example.com/%41%62%2D", "https://example.com/Ab-"),
        ("https://example.com/a%2fb", "https://example.com/a%2Fb"),
        ("https://example.com/caf%c3%a9", "https://example.com/caf%C3%A9"),
        ("https://example.com/café", "https://example.com/caf%C3%A9"),
        ("https://example.com/a b", "https://example.com/a%20b"),
        ("https://example.com/a\tb", "https://example.com/a%09b"),
        ("https://example.com/100%", "https://example.com/100%25"),
        ("https://example.com/%zz", "https://example.com/%25zz"),
        ('https://example.com/"<>{}|\\^`', "https://example.com/%22%3C%3E%7B%7D%7C%5C%5E%60"),
        ("https://example.com/a[1]", "https://example.com/a%5B1%5D"),
        ("https://example.com/p;x=1,2:@!$&'()*+", "https://example.com/p;x=1,2:@!$&'()*+"),
        # query: order kept, escapes normalized, "?" and "/" allowed, empty dropped
        ("https://example.com/?b=2&a=1", "https://example.com/?b=2&a=1"),
        ("https://example.com/?q=a b&r=é", "https://example.com/?q=a%20b&r=%C3%A9"),
        ("https://example.com/?q=%7e%2f", "https://example.com/?q=~%2F"),
        ("https://example.com/?next=/a?b", "https://example.com/?next=/a?b"),
        ("https://example.com/?q=a+b", "https://example.com/?q=a+b"),
        ("https://example.com/a?", "https://example.com/a"),
        ("https://example.com/a?#x", "https://example.com/a"),
        ("https://example.com/a#x?y", "https://example.com/a"),
        ("https://example.com/./?q=./..", "https://example.com/?q=./.."),
    ],
)
def test_normalize_url(raw, expected):
    assert normalize_url(raw) == expected


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("", "empty URL"),
        ("   \t\n", "empty URL"),
        ("javascript:alert(1)", "scheme 'javascript' is not http or https"),
        ("JavaScript:alert(1)", "scheme 'javascript' is not http or https"),
        ("mailto:", "scheme 'mailto' is not http or https"),
        ("mailto:someone@example.com", "scheme 'mailto' is not http or https"),
        ("ftp://example.com/file", "scheme 'ftp' is not http or https"),
        ("data:text/html,<script>", "scheme 'data' is not http or https"),
        ("http:example.com", "missing '//'"),
        ("https:/example.com", "missing '//'"),
        ("https://", "no host"),
        ("https:///path", "no host"),
        ("/relative/path", "no host"),
        ("https://user:pass@example.com/", "user name or password"),
        ("https://google.com@evil.com/", "user name or password"),
        ("https://exa mple.com/", "invalid host"),
        ("https://example.com\\@evil.com/", "user name or password"),
        ("https://example.com\\evil.com/", "invalid host"),
        ("https://<script>/", "invalid host"),
        ("https://a..b/", "invalid host"),
        ("https://" + "a" * 64 + ".com/", "invalid host"),
        ("https://bü..de/", "invalid international host"),
        ("https://example.com:99999/", "port 99999 out of range"),
        ("https://example.com:0/", "port 0 out of range"),
        ("https://example.com:8o/", "invalid port"),
        ("https://example.com:80:80/", "invalid host"),
        ("https://[::1/", "invalid IPv6 host"),
        ("https://[not:an:ip]/", "invalid IPv6 host"),
        ("https://[::1]x/", "invalid IPv6 host"),
        ("https://example.com/\ud800", "invalid character"),
        ("https://example.com/" + "a" * MAX_LENGTH, f"longer than {MAX_LENGTH}"),
        ("https://example.com/" + "a" * 10_000_000, f"longer than {MAX_LENGTH}"),
    ],
)
def test_invalid_urls_say_why(raw, reason):
    with pytest.raises(InvalidUrl, match=re.escape(reason)):
        normalize_url(raw)


def test_invalid_url_is_a_value_error():
    assert issubclass(InvalidUrl, ValueError)


def test_longest_accepted_url():
    url = "https://example.com/" + "a" * (MAX_LENGTH - len("https://example.com/"))
    assert normalize_url(url) == url


@pytest.mark.parametrize(
    "raw",
    [
        "http://EXAMPLE.com:80/%7euser/./a/../b?q=1#frag",
        "https://bücher.de/a b/../c?q=é",
        "example.com/%2e%2e/x%2fy",
        "https://example.com/a/b/..",
    ],
)
def test_normalizing_twice_changes_nothing(raw):
    once = normalize_url(raw)
    assert normalize_url(once) == once


@pytest.mark.parametrize(
    ("url", "scope", "expected"),
    [
        ("https://example.com/a", {}, True),
        ("https://example.com/a", {"url_prefix": "https://example.com/"}, True),
        ("https://example.com/a", {"url_prefix": "https://example.com"}, True),
        ("https://example.com/a", {"url_prefix": "HTTPS://EXAMPLE.COM:443"}, True),
        ("https://example.com/a", {"url_prefix": "example.com"}, True),
        ("http://example.com/a", {"url_prefix": "https://example.com/"}, False),
        ("https://example.com.evil.net/", {"url_prefix": "https://example.com"}, False),
        ("https://www.example.com/", {"url_prefix": "https://example.com/"}, False),
        ("https://example.com/blog/x", {"url_prefix": "https://example.com/blog/"}, True),
        ("https://example.com/blogroll", {"url_prefix": "https://example.com/blog/"}, False),
        ("https://example.com/blog-old", {"url_prefix": "https://example.com/blog"}, True),
        ("https://example.com/", {"search_console_property": "sc-domain:example.com"}, True),
        ("http://example.com:8080/", {"search_console_property": "sc-domain:example.com"}, True),
        ("https://www.example.com/a", {"search_console_property": "sc-domain:example.com"}, True),
        ("https://a.b.example.com/a", {"search_console_property": "SC-DOMAIN:Example.COM"}, True),
        ("https://notexample.com/", {"search_console_property": "sc-domain:example.com"}, False),
        ("https://example.com.evil.net/", {"search_console_property": "sc-domain:example.com"}, False),
        ("https://xn--bcher-kva.de/", {"search_console_property": "sc-domain:bücher.de"}, True),
        ("https://example.com/a", {"search_console_property": "https://example.com/"}, True),
        ("https://www.example.com/a", {"search_console_property": "https://example.com/"}, False),
        ("http://example.com/a", {"search_console_property": "https://example.com/"}, False),
        (
            "https://www.example.com/shop/x",
            {"url_prefix": "https://www.example.com/shop/", "search_console_property": "sc-domain:example.com"},
            True,
        ),
        (
            "https://www.example.com/blog/x",
            {"url_prefix": "https://www.example.com/shop/", "search_console_property": "sc-domain:example.com"},
            False,
        ),
    ],
)
def test_in_scope(url, scope, expected):
    assert in_scope(url, **scope) is expected


@pytest.mark.parametrize(
    "scope",
    [{"url_prefix": "javascript:x"}, {"search_console_property": "sc-domain:"}, {"url_prefix": "https://"}],
)
def test_malformed_scope_raises(scope):
    with pytest.raises(InvalidUrl):
        in_scope("https://example.com/", **scope)
