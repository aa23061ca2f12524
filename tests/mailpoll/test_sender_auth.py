"""Authentication-Results parsed and judged: whose header counts, what authenticates a From domain. Pure.

The Gmail and Microsoft headers are in the forms those services write (public examples,
addresses replaced); Microsoft's names no authserv-id and adds ``action=none``.
"""

from __future__ import annotations

import random

import pytest

from mailpoll.message.headers import AUTH_RESULTS_MAX_CHARS, CUT_MARK
from mailpoll.message.parse import parse_message
from mailpoll.message.sender_auth import (
    EXCHANGE_ONLINE,
    MAX_HEADERS,
    AuthResultsError,
    SenderAuth,
    judge,
    parse,
)
from tests.mailpoll.corpus import headers, message

OURS = "mx.agency.example"
GMAIL = (
    "mx.google.com;\r\n"
    "       dkim=pass header.i=@example.com header.s=20230601 header.b=Ab1+/xYz;\r\n"
    "       arc=pass (i=1 spf=pass spfdomain=example.com dkim=pass dkdomain=example.com dmarc=pass"
    " fromdomain=example.com);\r\n"
    "       spf=pass (google.com: domain of bounce@example.com designates 2607:f8b0:4864:20::62e as permitted"
    " sender) smtp.mailfrom=bounce@example.com;\r\n"
    "       dmarc=pass (p=REJECT sp=REJECT dis=NONE) header.from=example.com"
)
MICROSOFT = (
    "spf=pass (sender IP is 192.0.2.1) smtp.mailfrom=example.com; dkim=pass (signature was verified)"
    " header.d=example.com;dmarc=pass action=none header.from=example.com;compauth=pass reason=100"
)
# The older form, with the receiving tenant's domain between the clauses (OpenDKIM issue #73).
MICROSOFT_OLD = (
    "spf=pass (sender IP is 192.0.2.1) smtp.mailfrom=example.com; tenant.example; dkim=pass (signature was"
    " verified) header.d=example.com;tenant.example; dmarc=pass action=none header.from=example.com;"
)
MICROSOFT_FAIL = (
    "spf=fail (sender IP is 203.0.113.9) smtp.mailfrom=example.com; dkim=none (message not signed)"
    " header.d=none;dmarc=fail action=oreject header.from=example.com;compauth=fail reason=000"
)


def ours(results: str) -> str:
    return f"{OURS}; {results}"


# --- judge ------------------------------------------------------------------------------

@pytest.mark.parametrize("auth_results, authserv_id, sender, expected", [
    # Gmail and Microsoft as they write it
    ([GMAIL], "mx.google.com", "anne@example.com", (True, "dmarc=pass for example.com (mx.google.com)")),
    ([MICROSOFT], EXCHANGE_ONLINE, "anne@example.com", (True, "dmarc=pass for example.com (Exchange Online)")),
    ([MICROSOFT_OLD], EXCHANGE_ONLINE, "anne@example.com", (True, "dmarc=pass for example.com (Exchange Online)")),
    ([MICROSOFT_FAIL], EXCHANGE_ONLINE, "anne@example.com", (False, "dmarc=fail for example.com (Exchange Online)")),
    # dmarc
    ([ours("dmarc=pass header.from=example.com")], OURS, "anne@example.com",
     (True, "dmarc=pass for example.com (mx.agency.example)")),
    ([ours("dmarc=pass")], OURS, "anne@example.com", (True, "dmarc=pass for example.com (mx.agency.example)")),
    ([ours("dmarc=pass header.from=other.example")], OURS, "anne@example.com",
     (False, "dmarc=pass for other.example, not example.com (mx.agency.example)")),
    ([ours("dmarc=fail header.from=example.com")], OURS, "anne@example.com",
     (False, "dmarc=fail for example.com (mx.agency.example)")),
    ([ours("dkim=pass header.d=example.com; dmarc=fail header.from=example.com")], OURS, "anne@example.com",
     (False, "dmarc=fail for example.com (mx.agency.example)")),  # the domain may ask for strict alignment
    ([ours("dmarc=none header.from=example.com")], OURS, "anne@example.com",
     (False, "dmarc=none for example.com (mx.agency.example)")),
    ([ours("dmarc=bestguesspass header.from=example.com")], OURS, "anne@example.com",
     (False, "dmarc=bestguesspass for example.com (mx.agency.example)")),
    # dkim alignment
    ([ours("dkim=pass header.d=example.com")], OURS, "anne@example.com",
     (True, "dkim=pass for example.com, aligned with example.com (mx.agency.example)")),
    ([ours("dkim=pass header.d=example.com")], OURS, "anne@reports.example.com",
     (True, "dkim=pass for example.com, aligned with reports.example.com (mx.agency.example)")),
    ([ours("dkim=pass header.d=mail.example.com")], OURS, "anne@example.com",
     (False, "dkim=pass for mail.example.com, not aligned with example.com (mx.agency.example)")),
    ([ours("dkim=pass header.d=mailer.other.example")], OURS, "anne@example.com",
     (False, "dkim=pass for mailer.other.example, not aligned with example.com (mx.agency.example)")),
    ([ours("dkim=pass header.d=ample.com")], OURS, "anne@example.com",
     (False, "dkim=pass for ample.com, not aligned with example.com (mx.agency.example)")),
    ([ours("dkim=pass header.d=com")], OURS, "anne@example.com",
     (False, "dkim=pass for com, not aligned with example.com (mx.agency.example)")),
    ([ours("dkim=pass header.i=@example.com header.s=20230601")], OURS, "anne@example.com",
     (True, "dkim=pass for example.com, aligned with example.com (mx.agency.example)")),
    ([ours("dkim=pass header.i=robot@example.com")], OURS, "anne@example.com",
     (True, "dkim=pass for example.com, aligned with example.com (mx.agency.example)")),
    ([ours("dkim=pass header.d=other.example header.i=@example.com")], OURS, "anne@example.com",
     (False, "dkim=pass for other.example, not aligned with example.com (mx.agency.example)")),
    ([ours("dkim=pass header.d=other.example; dkim=pass header.d=example.com")], OURS, "anne@example.com",
     (True, "dkim=pass for example.com, aligned with example.com (mx.agency.example)")),
    ([ours("dkim=fail header.d=example.com; spf=pass smtp.mailfrom=example.com")], OURS, "anne@example.com",
     (False, "no dmarc or dkim pass for example.com (mx.agency.example)")),
    (["MX.Agency.Example; DKIM=Pass Header.D=Example.COM."], OURS, "Anne@EXAMPLE.com",
     (True, "dkim=pass for example.com, aligned with example.com (mx.agency.example)")),
    # whose header counts
    ([GMAIL], OURS, "anne@example.com", (False, "no Authentication-Results header from mx.agency.example")),
    ([MICROSOFT], OURS, "anne@example.com", (False, "no Authentication-Results header from mx.agency.example")),
    (["mx.other.example; dmarc=pass header.from=example.com"], OURS, "anne@example.com",
     (False, "no Authentication-Results header from mx.agency.example")),
    (["mx.\u212aelvin.example; dmarc=pass header.from=example.com"], "mx.kelvin.example", "anne@example.com",
     (False, "no Authentication-Results header from mx.kelvin.example")),  # KELVIN SIGN is not 'k'
    ([], OURS, "anne@example.com", (False, "no Authentication-Results header from mx.agency.example")),
    ([ours("dmarc=pass")], "  ", "anne@example.com", (False, "no authserv-id configured for this mailbox")),
    # the From address
    ([ours("dmarc=pass")], OURS, "", (False, "no From address")),
    ([ours("dmarc=pass")], OURS, "anne", (False, "From does not read as one address (addr-spec local part with no "
                                              "domain)")),
    ([ours("dmarc=pass")], OURS, "anne@", (False, "the From header does not parse")),
    ([ours("dmarc=pass")], OURS, "@example.com", (False, "From does not read as one address (invalid address in "
                                                     "address-list)")),
    ([ours("dmarc=pass")], OURS, "anne@exämple.com", (False, "From address has no valid domain")),
])
def test_judge(auth_results, authserv_id, sender, expected):
    assert judge(auth_results, authserv_id, sender) == SenderAuth(*expected)


@pytest.mark.parametrize("auth_results, expected", [
    # a sender's forgery below our header is never read, whatever it says
    ([ours("dmarc=fail header.from=example.com"), ours("dmarc=pass header.from=example.com")],
     (False, "dmarc=fail for example.com (mx.agency.example)")),
    ([ours("spf=pass smtp.mailfrom=example.com"), ours("dmarc=pass header.from=example.com")],
     (False, "no dmarc or dkim pass for example.com (mx.agency.example)")),
    # a header on top with another authserv-id is someone else's, whatever it says
    (["mx.other.example; dmarc=pass header.from=example.com", ours("dmarc=fail header.from=example.com")],
     (False, "dmarc=fail for example.com (mx.agency.example)")),
    (["spam-filter.agency.example; spf=pass smtp.mailfrom=example.com",
      ours("dkim=pass header.d=example.com"), "relay.example.net; dmarc=fail header.from=example.com"],
     (True, "dkim=pass for example.com, aligned with example.com (mx.agency.example)")),
    # garbage around ours is skipped; our own header unreadable refuses, never falls through to a lower one
    (["\x00\x01 garbage;;;", "(unclosed", ours("dkim=pass header.d=example.com")],
     (True, "dkim=pass for example.com, aligned with example.com (mx.agency.example)")),
    ([ours("dkim=pass header.d=example.com (unclosed"), ours("dmarc=pass header.from=example.com")],
     (False, "the Authentication-Results header from mx.agency.example is unreadable: unclosed comment"
             " at character 59")),
    ([ours("dmarc=pass header.from=example.com (" + "x" * 2000 + ")"), ours("dmarc=pass")],
     (False, "the Authentication-Results header from mx.agency.example is unreadable: over 2000 characters long")),
])
def test_only_the_topmost_header_with_our_authserv_id_is_read(auth_results, expected):
    assert judge(auth_results, OURS, "anne@example.com") == SenderAuth(*expected)


@pytest.mark.parametrize("auth_results, expected", [
    ([], (False, "no Authentication-Results header from Exchange Online")),
    ([GMAIL, MICROSOFT], (False, "the topmost Authentication-Results header is from mx.google.com, not Exchange Online")),
    ([MICROSOFT_FAIL, MICROSOFT], (False, "dmarc=fail for example.com (Exchange Online)")),  # forged one below
    (["(unclosed", MICROSOFT], (False, "the topmost Authentication-Results header is unreadable")),
    (["spf=pass smtp.mailfrom=example.com; dkim=pass header.d=example.com header.d=example.com", MICROSOFT],
     (False, "the topmost Authentication-Results header is unreadable: property header.d given twice at character 87")),
])
def test_exchange_online_reads_the_topmost_header_only(auth_results, expected):
    assert judge(auth_results, EXCHANGE_ONLINE, "anne@example.com") == SenderAuth(*expected)


def test_headers_past_the_cap_are_not_read():
    others = ["mx.other.example; none"] * MAX_HEADERS
    aligned = ours("dkim=pass header.d=example.com")
    assert judge(others[1:] + [aligned], OURS, "anne@example.com").authenticated
    assert judge(others + [aligned], OURS, "anne@example.com") == SenderAuth(
        False, "no Authentication-Results header from mx.agency.example")


def test_a_header_cut_to_the_cap_is_never_read_as_a_shorter_one():
    """The sender's padding pushes our header past the cap; cut plainly, it would name the victim's domain."""
    padding = "p" * 1000
    head = f"{OURS}; spf=pass (domain of {padding} designates 192.0.2.1) smtp.mailfrom=x@attacker.example; "
    filler = "(" + "q" * (AUTH_RESULTS_MAX_CHARS - len(head) - len("() dkim=pass header.d=victim.example")) + ") "
    value = head + filler + "dkim=pass header.d=victim.example.attacker.example"
    assert value[:AUTH_RESULTS_MAX_CHARS].endswith("header.d=victim.example")
    assert judge([value[:AUTH_RESULTS_MAX_CHARS]], OURS, "ceo@victim.example").authenticated  # what the cap guards

    stored = parse_message(message(headers(extra=[f"Authentication-Results: {value}"]), b"body")).auth_results
    assert stored[0].endswith(CUT_MARK) and len(stored[0]) == AUTH_RESULTS_MAX_CHARS
    verdict = judge(stored, OURS, "ceo@victim.example")
    assert not verdict.authenticated
    assert verdict.reason.startswith("the Authentication-Results header from mx.agency.example is unreadable")


# --- parse ------------------------------------------------------------------------------

def methods(value: str) -> list[tuple[str, str, dict]]:
    return [(each.method, each.result, dict(each.properties)) for each in parse(value).results]


def test_parse_gmail():
    assert parse(GMAIL).authserv_id == "mx.google.com"
    assert methods(GMAIL) == [
        ("dkim", "pass", {"header.i": "@example.com", "header.s": "20230601", "header.b": "Ab1+/xYz"}),
        ("arc", "pass", {}),
        ("spf", "pass", {"smtp.mailfrom": "bounce@example.com"}),
        ("dmarc", "pass", {"header.from": "example.com"}),
    ]


@pytest.mark.parametrize("value", [MICROSOFT, MICROSOFT_OLD])
def test_parse_microsoft_without_authserv_id(value):
    assert parse(value).authserv_id == ""
    assert methods(value)[:3] == [
        ("spf", "pass", {"smtp.mailfrom": "example.com"}),
        ("dkim", "pass", {"header.d": "example.com"}),
        ("dmarc", "pass", {"action": "none", "header.from": "example.com"}),
    ]


@pytest.mark.parametrize("value, authserv_id, expected", [
    ("mx.example; none", "mx.example", []),
    ("mx.example 1; none (nothing checked)", "mx.example", []),
    ('"mx.example"; auth=pass smtp.auth=anne@example.com', "mx.example",
     [("auth", "pass", {"smtp.auth": "anne@example.com"})]),
    ("mx.example (c) 1 (c);(c)dkim(c)/(c)1(c)=(c)pass (c) reason (c) = (c) \"good sig\" (c) header (c) . (c) d (c)"
     " = (c) example.com (c)", "mx.example", [("dkim", "pass", {"header.d": "example.com"})]),
    ("mx.example; dkim=pass (a (nested) comment with \\) and é) header.i=\"a b\"@example.com", "mx.example",
     [("dkim", "pass", {"header.i": "a b@example.com"})]),
    ("mx.example; iprev=pass policy.iprev=2001:db8::1; spf=none smtp.helo=[192.0.2.1];", "mx.example",
     [("iprev", "pass", {"policy.iprev": "2001:db8::1"}), ("spf", "none", {"smtp.helo": "[192.0.2.1]"})]),
])
def test_parse_rfc_forms(value, authserv_id, expected):
    assert parse(value).authserv_id == authserv_id
    assert methods(value) == expected


@pytest.mark.parametrize("value, problem, authserv_id", [
    ("", "no authserv-id at character 0", None),
    ("; dmarc=pass", "no authserv-id at character 0", None),
    ("mx.example (unclosed", "unclosed comment at character 20", "mx.example"),
    ("mx.example (" + "(" * 8 + ")" * 9 + "; none", "comments nested over 8 deep at character 20", "mx.example"),
    ("mx.example 2; dmarc=pass", "unsupported version 2 at character 12", "mx.example"),
    ("mx.example dmarc=pass", "expected ';', found 'd' at character 11", "mx.example"),
    ("mx.example; dmarc=passheader.from=example.com", "expected a space before a property at character 28",
     "mx.example"),
    ("mx.example; dkim=pass header.d=a.example header.d=b.example", "property header.d given twice at character 59",
     "mx.example"),
    ("mx.example; dkim=pass header.d=example.com garbage!!", "expected '=', found '!' at character 50", "mx.example"),
    ("mx.example; dkim=pass header.d=", "expected a property value at character 31", "mx.example"),
    ("mx.example; dkim=pass header.d=\u212a.example", "expected a property value at character 31", "mx.example"),
    ("mx.example; dmarc=pass; none", "expected '=', found the end at character 28", "mx.example"),
    ('mx.example; dkim=pass header.i="unclosed', "unclosed quoted string at character 40", "mx.example"),
    ('"mx\u00e9"; none', "unexpected character in a quoted string at character 3", None),
    ("mx.\u212aelvin.example; none", "expected ';', found '\u212a' at character 3", "mx."),
    ("mx.example; dmarc=pass " + "x" * 2000, "over 2000 characters long", "mx.example"),
    ("spf=pass smtp.mailfrom=example.com; dkim=", "expected a result at character 41", ""),
])
def test_parse_refuses(value, problem, authserv_id):
    with pytest.raises(AuthResultsError) as refused:
        parse(value)
    assert (str(refused.value), refused.value.authserv_id) == (problem, authserv_id)


@pytest.mark.parametrize("value", [
    "(" * 2000, ")" * 2000, '"' * 2000, "\\" * 2000, "mx; " + "a=b " * 500, "mx; dkim=pass " + "h.d=x " * 330,
    "mx (" + "\\(" * 998 + ")", "mx; " + ";" * 1996,
])
def test_hostile_values_are_refused_or_read_never_crash(value):
    try:
        parse(value)
    except AuthResultsError:
        pass
    assert judge([value] * MAX_HEADERS, "mx", "anne@example.com").authenticated is False


def test_mutated_headers_never_raise_anything_else():
    """A seeded mutation fuzz over the real forms: judge never raises, parse raises only AuthResultsError."""
    rng = random.Random(8601)
    tokens = ["(", ")", '"', "\\", ";", "=", ".", "/", " ", "@", "none", "dmarc=pass", "\u212a", "\x00", "\ud800"]
    for _ in range(500):
        value = list(rng.choice([GMAIL, MICROSOFT, MICROSOFT_OLD, ours("dkim=pass header.d=example.com")]))
        for _ in range(rng.randint(1, 6)):
            at = rng.randrange(len(value))
            if rng.random() < 0.5:
                value[at:at] = rng.choice(tokens)
            else:
                del value[at:at + rng.randint(1, 10)]
        text = "".join(value)
        try:
            parse(text)
        except AuthResultsError:
            pass
        for authserv_id in ("mx.google.com", EXCHANGE_ONLINE, OURS):
            assert isinstance(judge([text], authserv_id, "anne@example.com"), SenderAuth)
