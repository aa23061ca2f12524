"""From read as a strict RFC 5322 address list (issue 35 item 11): one plain mailbox, or a problem.

``read_from`` is pure; the table is what lenient parsers get wrong (``a@b <c@d>`` read as ``a@b``). What a
message's sender is stored as follows from it (``_sender`` through ``parse_headers``), and ``sender_problem``
recognises a stored sender that is not one plain address, whatever decoding did to it.
"""

import pytest

from mailpoll.message.headers import FromHeader, parse_headers, read_from, sender_problem


@pytest.mark.parametrize("value, expected", [
    ("ann@client.example", FromHeader("ann@client.example", "")),
    ("Ann Lee <ann@client.example>", FromHeader("ann@client.example", "")),
    ("<ann@client.example>", FromHeader("ann@client.example", "")),
    ("ann@client.example (Ann)", FromHeader("ann@client.example", "")),
    ('"ann@client.example" <ann@client.example>', FromHeader("ann@client.example", "")),  # the same address
    ("=?utf-8?q?Ren=C3=A9e?= <renee@client.example>", FromHeader("renee@client.example", "")),
    ("Renée <renée@client.example>", FromHeader("renée@client.example", "")),  # RFC 6532
    ('"john doe"@client.example', FromHeader('"john doe"@client.example', "")),
    # The forged sender of the review: lenient parsers read ceo@victim.example.
    ("ceo@victim.example <attacker@evil.example>",
     FromHeader("ceo@victim.example", "From does not read as one address (invalid address in address-list)")),
    ("ceo@victim.example<attacker@evil.example>",
     FromHeader("ceo@victim.example", "From does not read as one address (invalid address in address-list)")),
    ('"ceo@victim.example" <attacker@evil.example>',
     FromHeader("attacker@evil.example", "the From display name reads as another address")),
    ("=?utf-8?q?ceo@victim.example?= <attacker@evil.example>",
     FromHeader("attacker@evil.example", "the From display name reads as another address")),
    ('"CEO (ceo@victim.example)" <attacker@evil.example>',
     FromHeader("attacker@evil.example", "the From display name reads as another address")),
    ("ann@client.example, attacker@evil.example", FromHeader("ann@client.example", "2 addresses in From")),
    ("Staff: ceo@victim.example;", FromHeader("ceo@victim.example", "group syntax in From")),
    ("Nobody:;", FromHeader("", "group syntax in From")),
    ("Ann <ann@client.example", FromHeader("ann@client.example",
                                           "From does not read as one address (missing trailing '>' on angle-addr)")),
    ("Ann Lee ann@client.example", FromHeader('"Ann Lee ann"@client.example', "From does not read as one address "
                                              "(local-part is not dot-atom, quoted-string, or obs-local-part)")),
    ("ann", FromHeader("ann", "From does not read as one address (addr-spec local part with no domain)")),
    ("ann@", FromHeader("", "the From header does not parse")),
    ("", FromHeader("", "no From address")),
    (None, FromHeader("", "no From address")),
    ("(" * 30 + "ann@client.example", FromHeader("", "the From header is too long or nested to read")),
    ("a" * 2001 + "@client.example", FromHeader("", "the From header is too long or nested to read")),
])
def test_read_from(value, expected):
    assert read_from(value) == expected


@pytest.mark.parametrize("header, stored, plain", [
    (b"Ann Lee <ann@client.example>", "ann@client.example", True),
    (b"ceo@victim.example <attacker@evil.example>", "ceo@victim.example <attacker@evil.example>", False),
    (b"ann@client.example, attacker@evil.example", "ann@client.example, attacker@evil.example", False),
    (b"Staff: ceo@victim.example;", "Staff: ceo@victim.example;", False),
    # Decoded, this one would read as a plain address: it is stored with what says otherwise in front.
    (b"=?utf-8?q?ceo@victim.example?=", "(not one plain address) ceo@victim.example", False),
])
def test_the_stored_sender_is_an_address_only_for_one_plain_mailbox(header, stored, plain):
    sender = parse_headers(b"From: " + header + b"\r\nSubject: x\r\n\r\n").sender

    assert sender == stored
    assert (sender_problem(sender) == "") is plain
