"""Where an org's IMAP mailbox may make the server connect: mail ports, on public addresses.

An org's staff choose a mailbox's host and port; unchecked, *Test connection* and the poller would probe
the server's own network. ``port_problem`` and ``host_problem`` are the form's checks, before saving;
``addresses`` the connect-time one (``transport.Channel.connect``): it resolves once and returns the checked
addresses to connect to, so a name that answers otherwise the second time (DNS rebinding) reaches nothing
new. A deployment opens inside addresses with MAILPOLL_ALLOW_PRIVATE_HOSTS, more ports with MAILPOLL_EXTRA_PORTS.
"""

from __future__ import annotations

from seoinsight import outbound

from .. import conf
from .base import ProviderError

MAIL_PORTS = (993, 143)  # IMAP over TLS, IMAP (STARTTLS)
ANY_PORT = "*"


class DestinationRefused(ProviderError):
    """The mailbox's host or port is one an org may not point the server at; the message says which rule."""


def extra_ports(text: str | None = None) -> frozenset[int] | None:
    """The ports MAILPOLL_EXTRA_PORTS adds; None for any port. Words that are no port are left out
    (``mailpoll.E004`` names them).

    >>> sorted(extra_ports("995, 1143")), extra_ports("*"), extra_ports("")
    ([995, 1143], None, frozenset())
    """
    text = str(conf.get("MAILPOLL_EXTRA_PORTS") if text is None else text)
    words = [word.strip() for word in text.split(",") if word.strip()]
    if ANY_PORT in words:
        return None
    return frozenset(int(word) for word in words if word.isdigit() and 0 < int(word) < 65536)


def bad_port_words(text: str) -> list[str]:
    """The words of a MAILPOLL_EXTRA_PORTS text that are neither a port nor ``*``.

    >>> bad_port_words("993, imaps, 70000, *")
    ['imaps', '70000']
    """
    words = [word.strip() for word in str(text).split(",") if word.strip()]
    return [word for word in words if word != ANY_PORT and not (word.isdigit() and 0 < int(word) < 65536)]


def port_problem(port: int) -> str:
    """Why ``port`` may not be a mailbox's, or ""."""
    allowed = extra_ports()
    if port in MAIL_PORTS or allowed is None or port in allowed:
        return ""
    ports = ", ".join(str(each) for each in sorted({*MAIL_PORTS, *allowed}))
    return f"port {port} is not an IMAP port: a mailbox may use {ports} (MAILPOLL_EXTRA_PORTS adds others)"


def allow_private() -> bool:
    return bool(conf.get("MAILPOLL_ALLOW_PRIVATE_HOSTS"))


def host_problem(host: str) -> str:
    """Why ``host`` may not be a mailbox's, or "": it resolves to an inside address. A name that does not
    resolve now passes (a DNS hiccup must not block an edit); the connection is checked again each time."""
    if allow_private():
        return ""
    try:
        outbound.public_addresses(host, MAIL_PORTS[0])
    except outbound.AddressRefused as exc:
        return f"{exc}: a mailbox's server must be on the internet (MAILPOLL_ALLOW_PRIVATE_HOSTS opens others)"
    except (OSError, UnicodeError, ValueError):
        return ""
    return ""


def literal_problem(host: str, port: int) -> str:
    """What ``problem`` would say of ``host``:``port`` without asking DNS (the port; an IP address or
    localhost as the host), or "": for ``manage.py check``, which must not wait on a resolver."""
    problem = port_problem(port)
    if problem or allow_private():
        return problem
    kind = "loopback" if host.lower() in outbound.LOOPBACK_NAMES else outbound.address_kind(host)
    return "" if kind in ("", "not an IP address") else f"{host} is not a public address ({kind})"


def addresses(host: str, port: int) -> list[tuple]:
    """``getaddrinfo`` results to connect to for ``host``:``port``, every one checked; DestinationRefused
    if the port or any address is refused, ``socket.gaierror`` if the name does not resolve."""
    problem = port_problem(port)
    if problem:
        raise DestinationRefused(f"not allowed: {problem}")
    try:
        return outbound.public_addresses(host, port, allow_private=allow_private())
    except outbound.AddressRefused as exc:
        raise DestinationRefused(f"not allowed: {exc}") from None

