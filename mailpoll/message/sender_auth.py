"""Whether a message's From domain is authenticated, read from our own receiving server's Authentication-Results.

Pure: no Django, no database. Anyone can write an ``Authentication-Results`` header
(RFC 8601) into a message, so only the one written by the mailbox's own receiving
server counts; it is named by its authserv-id (``mx.google.com`` for Gmail), which
the operator configures per mailbox. Exchange Online writes its header with no
authserv-id at all; ``EXCHANGE_ONLINE`` selects that form by position instead
(see ``judge``).

The header is parsed here, strictly (RFC 8601 section 2.2), rather than with the
``authres`` package: authres 1.2.0 takes ``spf=pass`` for the authserv-id of
Microsoft's header (then refuses it), silently drops the rest of a header after a
bad property, lower-cases non-ASCII look-alikes into ASCII ids (KELVIN SIGN into
``k``), recurses once per nested comment (RecursionError) and re-copies the string
per token. This parser reads ASCII tokens only, nests comments iteratively to a
cap, rejects a property given twice, and does linear work on input capped at
``MAX_VALUE_CHARS``. Beyond RFC 8601 it accepts only what Exchange Online writes:
no authserv-id, a property without a type (``action=none``), and in that form a
clause that is a lone domain; none of these carries anything ``judge`` reads.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from .headers import AUTH_RESULTS_MAX_CHARS, MAX_HEADERS_READ, sender_problem

# The bounds a message's headers are kept within (headers._auth_results), held here too whatever the caller.
MAX_HEADERS = MAX_HEADERS_READ  # Authentication-Results headers read, from the top
MAX_VALUE_CHARS = AUTH_RESULTS_MAX_CHARS  # a longer value is refused whole, never read cut short
MAX_COMMENT_DEPTH = 8
# The authserv-id setting that selects Exchange Online's header, which names none. '@' cannot
# start a real authserv-id (an RFC 2045 token), so no server's id can ever equal it.
EXCHANGE_ONLINE = "@exchange-online"

_SPACE = re.compile(r"[ \t\r\n]+")
_TOKEN = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`{|}~-]+")  # RFC 2045 token, ASCII only
_KEYWORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_DIGITS = re.compile(r"[0-9]+")
# A property value: atext, '.', '@' (RFC 8601 pvalue), and ':' '[' ']' for IP literals.
_PTEXT = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~.@:\[\]-]+")
_QUOTED_TEXT = re.compile(r'[ !#-\[\]-~]+')  # printable ASCII but '"' and '\'
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_DOMAIN = re.compile(rf"(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*")


@dataclass(frozen=True)
class SenderAuth:
    authenticated: bool
    reason: str  # in plain words, for an operator


@dataclass(frozen=True)
class Result:
    """One ``method=result`` clause and its properties (``header.d`` → value), names lower-cased."""

    method: str
    result: str
    properties: tuple[tuple[str, str], ...] = ()

    def get(self, name: str) -> str | None:
        return dict(self.properties).get(name)


@dataclass(frozen=True)
class AuthResults:
    authserv_id: str  # lower-cased; "" for Exchange Online's form, which names none
    results: tuple[Result, ...]


class AuthResultsError(ValueError):
    """A header that does not parse; ``authserv_id`` is what it claims to come from, None if not even that reads."""

    def __init__(self, problem: str, authserv_id: str | None):
        super().__init__(problem)
        self.authserv_id = authserv_id


def parse(value: str) -> AuthResults:
    """One Authentication-Results value (after the colon), unfolded or not. Raises AuthResultsError.

    >>> parse("mx.example; dkim=pass (good) header.d=example.com").results
    (Result(method='dkim', result='pass', properties=(('header.d', 'example.com'),)),)
    >>> parse("spf=pass smtp.mailfrom=example.com;dmarc=pass action=none header.from=example.com").authserv_id
    ''
    """
    reader = _Reader(value[:MAX_VALUE_CHARS])
    authserv_id = reader.head()
    if len(value) > MAX_VALUE_CHARS:
        raise AuthResultsError(f"over {MAX_VALUE_CHARS} characters long", authserv_id)
    return AuthResults(authserv_id, reader.results())


def judge(headers: Sequence[str], authserv_id: str, from_address: str) -> SenderAuth:
    """Whether the From domain is authenticated by the mailbox's own server. Never raises.

    ``headers``: every Authentication-Results value of the message, topmost first.
    Only the topmost header carrying ``authserv_id`` is read. Trace headers are
    prepended, so that is the last one our server wrote; any lower one carrying
    our id is either our server's own earlier stamp or one the sender wrote, and
    we cannot tell which. RFC 8601 section 5 tells the border server to strip
    headers bearing its own id, but not every server does, so a result found
    only lower down is never trusted. The cost: a server that writes one header
    per check (OpenDKIM, then OpenDMARC) is judged on the topmost alone.

    With ``EXCHANGE_ONLINE``, only the topmost header of all is read, and only if
    it has Exchange Online's form (no authserv-id): Exchange Online stamps every
    message it receives last, above whatever the sender wrote. Anything that
    reaches the mailbox without passing its inbound filter (mail from inside the
    tenant) can put its own header on top, which is why ``docs/mail.md`` limits
    this setting to mailboxes fed from outside only.

    Authenticated on ``dmarc=pass`` (its ``header.from``, when given, equal to the
    From domain), or on ``dkim=pass`` whose signing domain (``header.d``, else the
    domain of ``header.i``) is the From domain or a parent of it. Without a
    public-suffix list, "parent" is any parent of two labels or more: a signature
    by ``co.uk`` would align with ``a.co.uk``, which only that registry could
    sign; sibling subdomains, which DMARC's relaxed alignment accepts, do not
    align here. A ``dmarc=fail`` for the From domain refuses whatever DKIM says:
    the domain may ask for strict alignment. A From domain that is not plain
    ASCII is refused: internationalized domains are not supported. So is a
    ``from_address`` that is not one plain address (``headers.sender_problem``).
    """
    wanted = authserv_id.strip().lower()
    if not wanted:
        return SenderAuth(False, "no authserv-id configured for this mailbox")
    if not from_address.strip():
        return SenderAuth(False, "no From address")
    # Several or odd addresses: which one the server's DMARC check read as From cannot be told.
    problem = sender_problem(from_address)
    if problem:
        return SenderAuth(False, problem)
    domain = _from_domain(from_address)
    if domain is None:
        return SenderAuth(False, "From address has no valid domain")
    headers = list(headers[:MAX_HEADERS])
    if wanted == EXCHANGE_ONLINE:
        found, where = _exchange_header(headers), "Exchange Online"
    else:
        found, where = _own_header(headers, wanted), wanted
    if isinstance(found, SenderAuth):
        return found
    return _decide(found.results, domain, where)


def carries_own_header(headers: Sequence[str], authserv_id: str) -> bool:
    """Whether a message holds a header ``judge`` would read for ``authserv_id`` (readable or not).

    A mailbox whose messages never do has a receiving server that writes none under that id: then the only
    such headers are ones a sender wrote, which is why the mailbox's page warns (``docs/mail.md``).

    >>> carries_own_header(["mx.example; dkim=pass header.d=example.com"], "MX.example")
    True
    >>> carries_own_header(["mx.other; dkim=pass header.d=example.com"], "mx.example")
    False
    """
    wanted = authserv_id.strip().lower()
    headers = list(headers[:MAX_HEADERS])
    if not wanted or not headers:
        return False
    if wanted == EXCHANGE_ONLINE:
        return _claimed_id(headers[0]) == ""
    return any(_claimed_id(value) == wanted for value in headers)


def _own_header(headers: list[str], wanted: str) -> AuthResults | SenderAuth:
    for value in headers:
        if _claimed_id(value) == wanted:
            try:
                return parse(value)
            except AuthResultsError as error:
                return SenderAuth(False, f"the Authentication-Results header from {wanted} is unreadable: {error}")
    return SenderAuth(False, f"no Authentication-Results header from {wanted}")


def _exchange_header(headers: list[str]) -> AuthResults | SenderAuth:
    if not headers:
        return SenderAuth(False, "no Authentication-Results header from Exchange Online")
    claimed = _claimed_id(headers[0])
    if claimed is None:
        return SenderAuth(False, "the topmost Authentication-Results header is unreadable")
    if claimed:
        return SenderAuth(False, f"the topmost Authentication-Results header is from {claimed}, not Exchange Online")
    try:
        return parse(headers[0])
    except AuthResultsError as error:
        return SenderAuth(False, f"the topmost Authentication-Results header is unreadable: {error}")


def _claimed_id(value: str) -> str | None:
    """The authserv-id a header opens with ("" for Exchange Online's form), however the rest of it reads."""
    try:
        return _Reader(value[:MAX_VALUE_CHARS]).head()
    except AuthResultsError as error:
        return error.authserv_id


def _decide(results: tuple[Result, ...], domain: str, where: str) -> SenderAuth:
    dmarc = [each for each in results if each.method == "dmarc"]
    ours = [each for each in dmarc if _dmarc_domain(each) in (None, domain)]
    if any(each.result == "fail" for each in ours):
        return SenderAuth(False, f"dmarc=fail for {domain} ({where})")
    if any(each.result == "pass" for each in ours):
        return SenderAuth(True, f"dmarc=pass for {domain} ({where})")
    signers = [_signing_domain(each) for each in results if each.method == "dkim" and each.result == "pass"]
    for signer in signers:
        if signer and _aligned(signer, domain):
            return SenderAuth(True, f"dkim=pass for {signer}, aligned with {domain} ({where})")
    if signers:
        return SenderAuth(False, f"dkim=pass for {signers[0] or 'no valid domain'}, not aligned with {domain} ({where})")
    if ours:
        return SenderAuth(False, f"dmarc={ours[0].result} for {domain} ({where})")
    if dmarc:
        return SenderAuth(False, f"dmarc={dmarc[0].result} for {dmarc[0].get('header.from')}, not {domain} ({where})")
    return SenderAuth(False, f"no dmarc or dkim pass for {domain} ({where})")


def _dmarc_domain(result: Result) -> str | None:
    """The domain a DMARC result is about; None when it does not say. An unreadable one matches nothing."""
    value = result.get("header.from")
    if value is None:
        return None
    return _domain(value.rpartition("@")[2]) or "(invalid)"


def _signing_domain(result: Result) -> str | None:
    if (d := result.get("header.d")) is not None:
        return _domain(d)
    identity = result.get("header.i") or ""
    return _domain(identity.rpartition("@")[2]) if "@" in identity else None


def _aligned(signer: str, domain: str) -> bool:
    return signer == domain or ("." in signer and domain.endswith("." + signer))


def _from_domain(address: str) -> str | None:
    local, at, domain = address.strip().rpartition("@")
    return _domain(domain) if at and local else None


def _domain(text: str) -> str | None:
    """A plain ASCII DNS name, lower-cased, trailing dot dropped; None for anything else."""
    text = text.strip().rstrip(".")
    if not text.isascii():
        return None
    text = text.lower()
    return text if _DOMAIN.fullmatch(text) else None


class _Reader:
    """A cursor over one header value; every step is a regex match at the cursor, so the work is linear."""

    def __init__(self, text: str):
        self.text = text
        self.pos = 0
        self.authserv_id: str | None = None
        self.exchange_form = False

    def fail(self, problem: str) -> NoReturn:
        raise AuthResultsError(f"{problem} at character {self.pos}", self.authserv_id)

    def head(self) -> str:
        """The authserv-id and version; "" (and the cursor left on the first method) for Exchange Online's form."""
        self.cfws()
        start = self.pos
        authserv_id = self.quoted() if self.peek() == '"' else self.match(_TOKEN)
        if authserv_id is None:
            self.fail("no authserv-id")
        self.authserv_id = authserv_id.lower()  # known from here on, whatever fails after it
        self.cfws()
        if self.peek() in ("=", "/") and _KEYWORD.fullmatch(authserv_id):
            self.pos, self.exchange_form, self.authserv_id = start, True, ""
            return ""
        if (version := self.match(_DIGITS)) is not None and version != "1":
            self.fail(f"unsupported version {version}")
        return self.authserv_id

    def results(self) -> tuple[Result, ...]:
        results: list[Result] = []
        first = True
        while True:
            self.cfws()
            if self.at_end():
                break
            if not (first and self.exchange_form):
                self.expect(";")
                self.cfws()
                if self.at_end():  # a trailing ';', as Microsoft writes
                    break
            first = False
            if not results and not self.exchange_form and self.lone_keyword("none"):
                break
            if self.exchange_form and self.bare_value():
                continue
            results.append(self.resinfo())
        return tuple(results)

    def resinfo(self) -> Result:
        method = self.keyword("method")
        self.cfws()
        if self.accept("/"):
            self.cfws()
            if self.match(_DIGITS) is None:
                self.fail("expected a method version")
            self.cfws()
        self.expect("=")
        self.cfws()
        result = self.keyword("result")
        properties: dict[str, str] = {}
        self.reasonspec()
        while True:
            spaced = self.cfws()
            if self.at_end() or self.peek() == ";":
                break
            if not spaced:
                self.fail("expected a space before a property")
            name, value = self.propspec()
            if name in properties:
                self.fail(f"property {name} given twice")
            properties[name] = value
        return Result(method, result, tuple(properties.items()))

    def reasonspec(self) -> None:
        start = self.pos
        if self.cfws() and (self.match(_KEYWORD) or "").lower() == "reason":
            self.cfws()
            if self.accept("="):
                self.cfws()
                if self.value() is None:
                    self.fail("expected a reason")
                return
        self.pos = start

    def propspec(self) -> tuple[str, str]:
        name = self.keyword("property type")
        self.cfws()
        if self.accept("."):
            self.cfws()
            name += "." + self.keyword("property")
            self.cfws()
        self.expect("=")
        self.cfws()
        if self.peek() == '"':
            value = self.quoted()
            if self.accept("@"):
                value += "@" + (self.match(_PTEXT) or "")
        else:
            value = self.match(_PTEXT)
        if not value:
            self.fail("expected a property value")
        return name.lower(), value

    def lone_keyword(self, word: str) -> bool:
        """``word`` alone up to the end (``; none``); the cursor is left where it was otherwise."""
        start = self.pos
        if (self.match(_KEYWORD) or "").lower() == word:
            self.cfws()
            if self.at_end():
                return True
        self.pos = start
        return False

    def bare_value(self) -> bool:
        """A clause that is a lone domain (``; contoso.com;``), as older Exchange Online headers interleave."""
        start = self.pos
        if self.match(_TOKEN) is not None:
            self.cfws()
            if self.at_end() or self.peek() == ";":
                return True
        self.pos = start
        return False

    def keyword(self, what: str) -> str:
        word = self.match(_KEYWORD)
        if word is None:
            self.fail(f"expected a {what}")
        return word.lower()

    def value(self) -> str | None:
        return self.quoted() if self.peek() == '"' else self.match(_TOKEN)

    def quoted(self) -> str:
        self.expect('"')
        out = []
        while not self.accept('"'):
            if self.accept("\\"):
                if self.at_end() or not self.text[self.pos].isascii():
                    self.fail("bad escape in a quoted string")
                out.append(self.text[self.pos])
                self.pos += 1
            elif (chunk := self.match(_QUOTED_TEXT)) is not None:
                out.append(chunk)
            else:
                self.fail("unclosed quoted string" if self.at_end() else "unexpected character in a quoted string")
        return "".join(out)

    def cfws(self) -> bool:
        """Skips spaces and comments; True if there were any."""
        start = self.pos
        while True:
            if self.match(_SPACE) is None and not (self.peek() == "(" and self.comment()):
                return self.pos > start

    def comment(self) -> bool:
        depth = 0
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            self.pos += 2 if char == "\\" else 1
            if char == "(":
                depth += 1
                if depth > MAX_COMMENT_DEPTH:
                    self.fail(f"comments nested over {MAX_COMMENT_DEPTH} deep")
            elif char == ")":
                depth -= 1
                if depth == 0:
                    return True
        self.pos = len(text)
        self.fail("unclosed comment")

    def match(self, pattern: re.Pattern) -> str | None:
        found = pattern.match(self.text, self.pos)
        if found is None:
            return None
        self.pos = found.end()
        return found.group()

    def accept(self, char: str) -> bool:
        if self.peek() == char:
            self.pos += 1
            return True
        return False

    def expect(self, char: str) -> None:
        if not self.accept(char):
            found = "the end" if self.at_end() else repr(self.text[self.pos])
            self.fail(f"expected {char!r}, found {found}")

    def peek(self) -> str:
        return self.text[self.pos: self.pos + 1]

    def at_end(self) -> bool:
        return self.pos >= len(self.text)
