"""Outbound HTTP to a configured endpoint: one parse of its URL, bounded answers, errors that name the host only.

Every client that carries a credential (the outbox's POST, the Gmail and Graph
APIs, the OAuth token endpoints, Search Console) goes through these rules:

* ``endpoint(url)`` parses a URL the way the client that connects reads it
  (urllib3's ``parse_url``, which ``requests`` uses) *and* the way the standard
  library reads it, and refuses the URL when the two disagree, or when it holds
  what only a differential would need (a backslash, userinfo, whitespace or a
  control character). A check that passes ``http://a\\@127.0.0.1/`` as local
  while the client connects to ``a`` is what this closes.
* ``read_capped(response, limit)`` reads a streamed answer to at most ``limit``
  bytes and raises :class:`BodyTooLarge` past it: what a peer sends is never
  held whole on its word (a lying Content-Length included).
* ``refuse_redirect(response)`` turns any 3xx into :class:`RedirectRefused`
  naming the host it pointed to: a credential is sent to the host it was
  entered for and nowhere else.
* ``where(url)`` and ``describe(exc)`` give the scheme, host and port, never the
  path or the query, where a URL appears in an error, a log line or a page
  (keys in query strings, ``?code=``, are common).
* ``address_kind(ip)`` says whether an address is one the public internet routes
  (""), or loopback, private, link-local, reserved...: the one classification of
  addresses an org's user may not make the server connect to (``public_addresses``).
"""

from __future__ import annotations

import ipaddress
import re
import socket
import urllib.parse
from dataclasses import dataclass

import urllib3.util

LOOPBACK_NAMES = ("localhost",)
# Anything a parser might read as a separator or skip: refused rather than interpreted.
_SUSPICIOUS = re.compile(r"[\\\s\x00-\x1f\x7f]")
_URL_IN_TEXT = re.compile(r"(?i)\b(https?)://[^\s'\"<>)]+")


class EndpointError(ValueError):
    """The URL cannot be trusted with a credential; the message says why (and never echoes the query)."""


class BodyTooLarge(Exception):
    """A peer's answer passed the bytes allowed for it; ``read`` is how many were read before stopping."""

    def __init__(self, what: str, *, limit: int, read: int):
        super().__init__(f"{what} passed {limit:,} bytes (read {read:,} before stopping)")
        self.limit = limit
        self.read = read


class RedirectRefused(Exception):
    """A credential-carrying request was answered with a redirect, which is never followed."""


@dataclass(frozen=True)
class Endpoint:
    scheme: str
    host: str  # lower case; an IPv6 address without brackets
    port: int

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    @property
    def origin(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = {"http": 80, "https": 443}[self.scheme]
        return f"{self.scheme}://{host}" + ("" if self.port == default else f":{self.port}")


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and localhost: the only hosts plain http may carry a credential to."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class AddressRefused(Exception):
    """A host resolved to an address the rules refuse; the message names the kind, never what lives there."""


def address_kind(ip: str) -> str:
    """What kind of non-public address ``ip`` is, or "" for one the public internet routes.

    An IPv4 address mapped into IPv6 (``::ffff:10.0.0.1``) is judged as the IPv4 address it carries.

    >>> address_kind("93.184.215.14"), address_kind("2606:4700::1111")
    ('', '')
    >>> address_kind("127.0.0.1"), address_kind("::ffff:10.1.2.3"), address_kind("169.254.169.254")
    ('loopback', 'private', 'link-local')
    >>> address_kind("100.64.0.1"), address_kind("0.0.0.0"), address_kind("not an address")
    ('not globally routed', 'unspecified', 'not an IP address')
    """
    try:
        address = ipaddress.ip_address(str(ip).split("%", 1)[0])  # an IPv6 zone id ("fe80::1%eth0") names no host
    except ValueError:
        return "not an IP address"
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    # Most specific first: 127.0.0.1 is also "private" to the ipaddress module.
    for kind, test in (("unspecified", address.is_unspecified), ("loopback", address.is_loopback),
                       ("link-local", address.is_link_local), ("multicast", address.is_multicast),
                       ("reserved", address.is_reserved), ("private", address.is_private)):
        if test:
            return kind
    return "" if address.is_global else "not globally routed"


def public_addresses(host: str, port: int, *, allow_private: bool = False) -> list[tuple]:
    """``socket.getaddrinfo(host, port)`` for TCP, each address checked by ``address_kind``.

    Connect to what this returns, never to ``host`` again: a second lookup could answer otherwise (DNS
    rebinding). Raises AddressRefused when any address is not public (unless ``allow_private``): a name
    that also resolves to an inside address is refused whole. ``socket.gaierror`` when nothing resolves.
    """
    found = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
    if not allow_private:
        for *_, sockaddr in found:
            kind = address_kind(sockaddr[0])
            if kind:
                # The kind only: naming the address would make this a resolver of inside names.
                raise AddressRefused(f"{host} is not a public address ({kind})")
    return found


def endpoint(url: str) -> Endpoint:
    """The scheme, host and port a client will connect to for ``url``; raises EndpointError when unsure.

    >>> endpoint("https://graph.microsoft.com/v1.0")
    Endpoint(scheme='https', host='graph.microsoft.com', port=443)
    >>> endpoint("http://127.0.0.1:8080/token").loopback
    True
    >>> endpoint("http://127.0.0.2:99\\\\@127.0.0.1/x")
    Traceback (most recent call last):
    ...
    seoinsight.outbound.EndpointError: a backslash, a space or a control character in the URL
    """
    url = str(url)
    if _SUSPICIOUS.search(url):
        raise EndpointError("a backslash, a space or a control character in the URL")
    try:
        theirs = urllib3.util.parse_url(url)
        ours = urllib.parse.urlsplit(url)
        our_port = ours.port
    except ValueError as exc:
        raise EndpointError(f"not a URL ({type(exc).__name__})") from None
    scheme = (ours.scheme or "").lower()
    if scheme not in ("http", "https"):
        raise EndpointError("not an http(s) URL")
    if ours.username is not None or ours.password is not None or theirs.auth:
        raise EndpointError("a user name or password in the URL")
    host = (ours.hostname or "").lower()
    if not host:
        raise EndpointError("no host in the URL")
    their_host = (theirs.host or "").strip("[]").lower()
    port = our_port or {"http": 80, "https": 443}[scheme]
    their_port = theirs.port or {"http": 80, "https": 443}.get((theirs.scheme or "").lower())
    if (theirs.scheme or "").lower() != scheme or their_host != host or their_port != port:
        raise EndpointError("the URL reads differently to different parsers")
    return Endpoint(scheme, host, port)


def endpoint_problem(url: str) -> str:
    """Why ``url`` may not receive a credential, or "" (https anywhere; plain http to loopback only).

    >>> endpoint_problem("https://oauth2.googleapis.com/token"), endpoint_problem("http://127.0.0.1:8080/token")
    ('', '')
    >>> endpoint_problem("http://example.com/token")
    'http only on 127.0.0.1 or localhost: a credential would cross the network in clear text'
    """
    try:
        parsed = endpoint(url)
    except EndpointError as exc:
        return str(exc)
    if parsed.scheme == "http" and not parsed.loopback:
        return "http only on 127.0.0.1 or localhost: a credential would cross the network in clear text"
    return ""


def where(url: str) -> str:
    """What an error may say about ``url``: its origin, never its path or query.

    >>> where("https://down.example/ingest?api_key=s3cret")
    'https://down.example'
    >>> where("no url at all")
    'an unparsable URL'
    """
    try:
        return endpoint(url).origin
    except EndpointError:
        try:
            parts = urllib.parse.urlsplit(str(url)) if "://" in str(url) else None
        except ValueError:  # "http://[::1/": what an error says about a URL must not raise itself
            parts = None
        if parts is not None and parts.hostname and not _SUSPICIOUS.search(str(url)):
            return f"{parts.scheme}://{parts.hostname}"
        return "an unparsable URL"


def scrub(text: str) -> str:
    """``text`` with every http(s) URL in it cut to its origin (the path and query may hold a key).

    >>> scrub("Max retries exceeded with url: /ingest?api_key=s3cret (Caused by ...) at http://h:1/a?b=c")
    'Max retries exceeded with url: … (Caused by ...) at http://h:1'
    """
    text = _URL_IN_TEXT.sub(lambda m: where(m.group(0)), str(text))
    # urllib3 names the request target alone ("with url: /path?query"): keep the words, drop the target.
    return re.sub(r"(?i)(with url: )\S+", r"\1…", text)


def describe(exc: BaseException) -> str:
    """An exception's class and message, with every URL's path and query taken out."""
    return f"{type(exc).__name__}: {scrub(str(exc))}"


def read_capped(response, limit: int, what: str = "the answer") -> bytes:
    """At most ``limit`` bytes of a ``requests`` response sent with ``stream=True``; BodyTooLarge past it.

    The connection is closed on overflow (the rest is never read). Content-Length is
    not trusted either way: the count is of bytes actually received.
    """
    chunks = []
    read = 0
    try:
        for chunk in response.iter_content(chunk_size=65536):
            read += len(chunk)
            if read > limit:
                raise BodyTooLarge(what, limit=limit, read=read)
            chunks.append(chunk)
    finally:
        if read > limit:
            response.close()
    return b"".join(chunks)


def refuse_redirect(response, what: str = "the server") -> None:
    """Raise RedirectRefused for a 3xx answer (``allow_redirects=False`` made it visible)."""
    if 300 <= response.status_code < 400:
        location = response.headers.get("Location", "")
        target = where(urllib.parse.urljoin(response.url or "", location)) if location else "nowhere"
        raise RedirectRefused(f"{what} answered HTTP {response.status_code}, a redirect to {target}, "
                              "which is not followed: a credential goes only to the host it was set up for")


def hide_query(text: str, url: str) -> str:
    """``text`` with the values of ``url``'s query taken out, wherever they appear (a peer's answer that
    echoes the request target, a bare ``/path?key=…`` no URL pattern recognises).

    >>> hide_query("no route for POST /ingest?api_key=s3cret-value", "https://down.example/ingest?api_key=s3cret-value")
    'no route for POST /ingest?…'
    """
    query = urllib.parse.urlsplit(str(url)).query
    if not query:
        return text
    secrets = {query, urllib.parse.unquote_plus(query)}
    secrets.update(value for _, value in urllib.parse.parse_qsl(query, keep_blank_values=True) if len(value) >= 4)
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "…")
    return text
