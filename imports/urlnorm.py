"""URL normalization: the dedup key of every imported URL, as pure functions.

``normalize_url`` decides when two spellings are the same page, so re-importing
an export updates rows instead of doubling them. It follows RFC 3986 section 6
(syntax-based normalization) with a few SEO-minded choices:

    >>> normalize_url("http://EXAMPLE.com:80/%7euser/./a/../b?q=1#frag")
    'http://example.com/~user/b?q=1'
    >>> normalize_url("example.com/caf\u00e9")
    'https://example.com/caf%C3%A9'

- http and https only; a missing scheme ("example.com/a", "//example.com/a")
  means https. The scheme is part of the key: http:// and https:// stay distinct.
- ``/a`` and ``/a/`` stay distinct, and so do query strings in another order:
  sites may serve different pages for them.
- An empty query ("/a?") is dropped, the fragment always is.
- A user name or password ("https://user@host/") is rejected, not dropped: no
  real page URL carries one, and "https://google.com@evil.com/" is a classic
  disguise, so the row is better counted as an error than silently rewritten.
- Longer than ``MAX_LENGTH`` is rejected: sitemaps cap URLs at 2,048
  characters, and a PostgreSQL btree (the UNIQUE key) cannot hold ~2.7 KB+.
- International host names use Python's IDNA 2003 codec ("faß.de" becomes
  "fass.de", where IDNA 2008 would keep the ß).
"""

from __future__ import annotations

import ipaddress
import re
from functools import lru_cache
from urllib.parse import unquote

MAX_LENGTH = 2048

DEFAULT_PORTS = {"http": 80, "https": 443}


class InvalidUrl(ValueError):
    """The text cannot be an http(s) page URL; the message says why, briefly."""


_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
# RFC 3986 appendix B, after the scheme and its "//" are gone.
_PARTS = re.compile(r"([^/?#]*)([^?#]*)(?:\?([^#]*))?", re.DOTALL)
_HOST = re.compile(r"[a-z0-9_-]{1,63}(?:\.[a-z0-9_-]{1,63})*")
# An escape to normalize, or a character that must be escaped. What path and
# query may hold as is: unreserved, sub-delims, ":" "@" "/", and "?" in queries.
_PATH_FIX = re.compile(r"%[0-9A-Fa-f]{2}|[^A-Za-z0-9\-._~!$&'()*+,;=:@/]")
_QUERY_FIX = re.compile(r"%[0-9A-Fa-f]{2}|[^A-Za-z0-9\-._~!$&'()*+,;=:@/?]")


def normalize_url(raw: str) -> str:
    """The canonical form of an http(s) URL; ``InvalidUrl`` with a reason if it is not one."""
    text = raw.strip()
    if not text:
        raise InvalidUrl("empty URL")
    # Escapes can shrink a URL at most threefold; longer cannot fit, and this
    # keeps the work bounded for hostile megabyte-long cells.
    if len(text) > 3 * MAX_LENGTH:
        raise InvalidUrl(f"URL longer than {MAX_LENGTH} characters")
    scheme, rest = _split_scheme(text)
    authority, path, query = _PARTS.match(rest).groups()
    host, port = _split_authority(authority, scheme)
    path = _remove_dot_segments(_PATH_FIX.sub(_fix_escape, path)) if path else "/"
    query = _QUERY_FIX.sub(_fix_escape, query) if query else ""
    url = f"{scheme}://{host}{port}{path}" + (f"?{query}" if query else "")
    if len(url) > MAX_LENGTH:
        raise InvalidUrl(f"URL longer than {MAX_LENGTH} characters")
    return url


def in_scope(url_normalized: str, *, url_prefix: str = "", search_console_property: str = "") -> bool:
    """Whether a normalized URL belongs to a site target.

    ``url_prefix`` and a URL-prefix property ("https://example.com/") match by
    string prefix of the normalized forms, as Search Console does: the prefix
    "https://example.com/blog" also covers "/blog-archive". A domain property
    ("sc-domain:example.com") matches the host and its subdomains, any scheme
    or port. With both arguments both must match; with neither, every URL is in
    scope. A malformed prefix or property raises ``InvalidUrl``.
    """
    if url_prefix and not url_normalized.startswith(_normalized_prefix(url_prefix)):
        return False
    prop = search_console_property.strip()
    if not prop:
        return True
    if prop[:10].lower() == "sc-domain:":
        domain = _normalized_host(prop[10:].strip())
        host = host_of(url_normalized)
        return host == domain or host.endswith("." + domain)
    return url_normalized.startswith(_normalized_prefix(prop))


def _split_scheme(text: str) -> tuple[str, str]:
    if text.startswith("//"):
        return "https", text[2:]
    match = _SCHEME.match(text)
    if match:
        scheme, after = match.group(1).lower(), text[match.end():]
        if after.startswith("//"):
            if scheme not in DEFAULT_PORTS:
                raise InvalidUrl(f"scheme '{scheme}' is not http or https")
            return scheme, after[2:]
        if scheme in DEFAULT_PORTS:
            raise InvalidUrl(f"missing '//' after '{scheme}:'")
        # "example.com:8080/a" is a host and port, "mailto:x" a scheme.
        if not after[:1].isdigit():
            raise InvalidUrl(f"scheme '{scheme}' is not http or https")
    return "https", text


def _split_authority(authority: str, scheme: str) -> tuple[str, str]:
    if "@" in authority:
        raise InvalidUrl("user name or password in URL")
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            raise InvalidUrl("invalid IPv6 host")
        host = _ipv6(authority[1:end])
        rest = authority[end + 1:]
        if rest and not rest.startswith(":"):
            raise InvalidUrl("invalid IPv6 host")
        port = rest[1:]
    else:
        host, _, port = authority.partition(":") if authority.count(":") == 1 else (authority, "", "")
        host = _normalized_host(host)
    return host, _port(port, scheme)


def _port(port: str, scheme: str) -> str:
    if not port:  # "example.com:" means the default port
        return ""
    if not (port.isascii() and port.isdigit()):
        raise InvalidUrl(f"invalid port '{port[:10]}'")
    number = int(port)
    if not 0 < number < 65536:
        raise InvalidUrl(f"port {number} out of range")
    return "" if number == DEFAULT_PORTS[scheme] else f":{number}"


@lru_cache(maxsize=1024)
def _normalized_host(host: str) -> str:
    if "%" in host:
        try:
            host = unquote(host, errors="strict")
        except UnicodeDecodeError:
            raise InvalidUrl("invalid host") from None
    if host.endswith("."):
        host = host[:-1]
    if not host:
        raise InvalidUrl("no host (a relative URL?)")
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            raise InvalidUrl("invalid international host name") from None
    host = host.lower()
    if len(host) > 253 or not _HOST.fullmatch(host):
        raise InvalidUrl(f"invalid host '{host[:60]}'")
    return host


def _ipv6(literal: str) -> str:
    try:
        return f"[{ipaddress.IPv6Address(literal).compressed}]"
    except ValueError:
        raise InvalidUrl("invalid IPv6 host") from None


def _fix_escape(match: re.Match) -> str:
    text = match.group()
    if len(text) == 3:  # "%xx": decode if unreserved, else uppercase the hex
        char = chr(int(text[1:], 16))
        return char if char in _UNRESERVED else text.upper()
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, from text decoded wrongly upstream
        raise InvalidUrl("URL holds an invalid character") from None
    return "".join(f"%{byte:02X}" for byte in data)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4 for an absolute path, segment by segment (linear time)."""
    if "/." not in path:  # every dot segment starts after a slash
        return path
    segments = path.split("/")[1:]
    out: list[str] = []
    last = len(segments) - 1
    for index, segment in enumerate(segments):
        if segment == "..":
            if out:
                out.pop()
        elif segment != ".":
            out.append(segment)
            continue
        if index == last:  # "/a/.." and "/a/." end with a slash
            out.append("")
    return "/" + "/".join(out)


@lru_cache(maxsize=256)
def _normalized_prefix(prefix: str) -> str:
    return normalize_url(prefix)


def host_of(url_normalized: str) -> str:
    """The host of a URL as ``normalize_url`` wrote it (the spelling ``seoinsight.hosts`` matches sites by).

    >>> host_of("https://shop.example.com:8443/a"), host_of("https://[::1]/")
    ('shop.example.com', '[::1]')
    """
    authority = url_normalized.partition("://")[2].partition("/")[0]
    if authority.startswith("["):
        return authority[: authority.find("]") + 1]
    return authority.partition(":")[0]
