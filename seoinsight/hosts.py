"""Host names of sites, as pure functions: what an operator types, made into the one spelling data is matched by.

A site's data (Search Console, crawls, analytics exports) is keyed by the host its pages are served on, so a
site keeps host names only: ``https://www.Example.co.uk:443/shop`` is the domain ``example.co.uk`` with the
alias ``www.example.co.uk``. The spelling is the one ``imports.urlnorm`` gives a URL's host — lowercase, IDNA
2003 ASCII ("bücher.de" is "xn--bcher-kva.de"), no port, no trailing dot — so a stored host and an imported
URL's host compare as plain text.

``www.`` is the only prefix ever taken off a domain, and only when what remains still has a dot; no list of
public suffixes is needed ("www.x.co.uk" is "x.co.uk", "shop.x.co.uk" stays as it is).

Refused, each with a plain message: another scheme than http(s); a user name ("user@host"); spaces; IP
addresses and single names ("localhost", "intranet"); labels that are not letters, digits and inner hyphens
(a wildcard, an underscore); names longer than DNS allows. A site is a public host name: pages read from an
address or a machine's own name are a staging copy, whose figures must not mix into the site's.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Iterable

SCHEMES = ("http", "https")
MAX_LENGTH = 253  # a DNS name, without its trailing dot

# A scheme with its "//" ("https://"), or a scheme-like word without one ("mailto:") that is not a port.
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://|([A-Za-z][A-Za-z0-9+-]*):(?!\d)")
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_ORIGIN = re.compile(r"[^/?#]*(?://[^/?#]*)?")


def normalise_host(text: str) -> str:
    """The host named by ``text`` — a bare host or an http(s) URL — in its one spelling.

    Raises ValueError with a message meant for the operator.

    >>> normalise_host("HTTPS://Shop.Example.com:8443/a?b#c")
    'shop.example.com'
    >>> normalise_host("bücher.de.")
    'xn--bcher-kva.de'
    >>> normalise_host("localhost")
    Traceback (most recent call last):
    ...
    ValueError: "localhost" is a single name, not a domain: give the site's full domain name, e.g. example.com.
    """
    text = text.strip()
    rest = _after_scheme(text)
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if not authority:
        raise ValueError("Enter a domain, e.g. example.com.")
    if any(char.isspace() for char in authority):
        raise ValueError(f'"{_short(authority)}" has a space: a domain has none.')
    if "@" in authority:
        raise ValueError("Leave out the user name: give the host alone, e.g. example.com.")
    host = _without_port(authority).removesuffix(".")
    _refuse_ip_address(host)
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            raise ValueError(f'"{_short(host)}" is not a valid international domain name.') from None
    host = host.lower()
    _check_labels(host)
    return host


def normalise_domain(text: str) -> tuple[str, str | None]:
    """A site's domain from ``text``, and its ``www.`` host when ``text`` named that one (as an alias).

    >>> normalise_domain("https://www.X.co.uk/")
    ('x.co.uk', 'www.x.co.uk')
    >>> normalise_domain("Shop.Example.com")
    ('shop.example.com', None)
    >>> normalise_domain("www.com")
    ('www.com', None)
    """
    host = normalise_host(text)
    if host.startswith("www.") and "." in host[4:]:
        return host[4:], host
    return host, None


def site_aliases(domain: str, www: str | None, aliases: Iterable[str]) -> list[str]:
    """The aliases a site keeps: ``www`` first, each normalised, without repeats or the domain itself.

    Raises ValueError naming the first alias refused.

    >>> site_aliases("x.co.uk", "www.x.co.uk", ["X.co.uk", "https://shop.x.co.uk/", "WWW.x.co.uk"])
    ['www.x.co.uk', 'shop.x.co.uk']
    """
    kept = [www] if www else []
    for alias in aliases:
        if not alias.strip():
            continue
        try:
            host = normalise_host(alias)
        except ValueError as exc:
            raise ValueError(f'Alias "{_short(alias.strip())}": {exc}') from None
        if host != domain and host not in kept:
            kept.append(host)
    return kept


def site_hosts(site) -> set[str]:
    """Every host of ``site`` (anything with ``domain`` and ``aliases``): the hosts its URLs may be on."""
    return {site.domain, *site.aliases}


def prefix_problem(url_prefix: str, hosts: set[str], *, confirmed: bool = False) -> str | None:
    """Why ``url_prefix`` will not do as the prefix of a target of a site with ``hosts``, or None.

    It must be an absolute http(s) URL; its host must be one of ``hosts`` unless the operator ``confirmed``
    it (a target may knowingly take data of another host). No prefix is no problem: the target then goes by
    its Search Console property.

    >>> hosts = {"example.com", "www.example.com"}
    >>> prefix_problem("https://WWW.example.com/blog/", hosts) is None
    True
    >>> prefix_problem("example.com/blog/", hosts, confirmed=True)
    'Give the URL prefix as a full address, with https:// or http://, e.g. https://example.com/.'
    >>> prefix_problem("https://shop.example.com/", hosts, confirmed=True) is None
    True
    """
    text = url_prefix.strip()
    if not text:
        return None
    example = min(sorted(hosts), key=len, default="example.com")
    scheme, sep, _ = text.partition("://")
    if not sep or scheme.lower() not in SCHEMES:
        return f"Give the URL prefix as a full address, with https:// or http://, e.g. https://{example}/."
    try:
        host = normalise_host(text)
    except ValueError as exc:
        return f"The URL prefix has no usable host. {exc}"
    if host in hosts or confirmed:
        return None
    return (f"{host} is not one of this site's hosts ({', '.join(sorted(hosts))}): correct the prefix, "
            f"add {host} to the site's aliases, or tick “Use this prefix anyway”.")


def count_hosts(urls: Iterable[str]) -> Counter[str]:
    """How many of ``urls`` (URLs or bare hosts) are on each host; what names no usable host is left out.

    >>> count_hosts(["https://www.example.com/a", "HTTPS://WWW.example.com/b?c", "example.com", "not a url"])
    Counter({'www.example.com': 2, 'example.com': 1})
    """
    # Many URLs, few origins: each origin is normalised once.
    origins = Counter(_ORIGIN.match(url.strip()).group() for url in urls)
    counts: Counter[str] = Counter()
    for origin, count in origins.items():
        try:
            counts[normalise_host(origin)] += count
        except ValueError:
            continue
    return counts


def _after_scheme(text: str) -> str:
    if text.startswith("//"):
        return text[2:]
    match = _SCHEME.match(text)
    if match is None:
        return text
    scheme = (match.group(1) or match.group(2)).lower()
    if scheme in SCHEMES:
        if match.group(1) is None:
            raise ValueError(f"Write {scheme}:// with its two slashes, e.g. {scheme}://example.com/.")
        return text[match.end():]
    if scheme == "sc-domain":  # a Search Console domain property names the domain
        return text[match.end():]
    raise ValueError(f"Not a web address ({scheme}:): give the site's domain, e.g. example.com.")


def _without_port(authority: str) -> str:
    if authority.startswith("[") or authority.count(":") > 1:
        return authority  # an IPv6 address, refused next
    host, _, port = authority.partition(":")
    if port and not (port.isascii() and port.isdigit()):
        raise ValueError(f'"{_short(port)}" is not a port number.')
    return host


def _refuse_ip_address(host: str) -> None:
    if not host.startswith("["):  # "[…]" is an IPv6 address whatever follows
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return
    raise ValueError(f"{_short(host)} is an IP address: give the domain name the site is served on.")


def _check_labels(host: str) -> None:
    if len(host) > MAX_LENGTH:
        raise ValueError(f"A domain has at most {MAX_LENGTH} characters, this one {len(host)}.")
    labels = host.split(".")
    if len(labels) == 1:
        raise ValueError(f'"{_short(host)}" is a single name, not a domain: give the site\'s full domain name, '
                         "e.g. example.com.")
    for label in labels:
        if not label:
            raise ValueError(f'"{_short(host)}" has an empty part between dots.')
        if not _LABEL.fullmatch(label):
            raise ValueError(f'"{_short(label)}" cannot be part of a domain: letters, digits and hyphens only '
                             "(not first or last), at most 63 characters.")
    if labels[-1].isdigit():
        raise ValueError(f'"{_short(host)}" ends in a number: it is not a domain name.')


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
