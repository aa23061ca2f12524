"""A message's headers and Message-ID, decoded over hostile input: pure, no database."""

from __future__ import annotations

import base64
import hashlib
import re
from datetime import UTC, datetime

import pytest

from mailpoll.message.headers import (
    AUTH_RESULTS_MAX_CHARS,
    CUT_MARK,
    MAX_HEADERS_READ,
    MAX_RECIPIENTS,
    MessageHeaders,
    dedup_ref,
    message_ref,
    normalize_message_id,
    parse_headers,
    plus_tag,
)
from mailpoll.message.parse import parse_message
from tests.mailpoll import corpus
from tests.mailpoll.corpus import hostile_corpus

CORPUS = dict(hostile_corpus())


def parsed(name: str):
    return parse_message(CORPUS[name])


# --- headers ----------------------------------------------------------------------------

def test_subject_in_koi8r_rfc2047():
    assert parsed("koi8r-subject").subject == "Отчёт о кликах"


def test_unknown_charset_in_subject_and_body():
    message = parsed("unknown-charset")
    assert message.subject == "Rapport mensuel"
    assert message.body_text == "Monthly report, plain ASCII really."
    assert "unknown charset 'x-foo' in the body" in message.defects


def test_raw_8bit_headers_encoded_names_and_a_bad_date():
    message = parsed("header-8bit-and-bad-date")
    assert message.subject == "Données du mois"
    assert message.sender == "renee@client.example"
    assert message.date is None


def test_nul_bytes_and_overlong_header_lines():
    message = parsed("nul-and-long-headers")
    assert message.subject.startswith("Weekly report x") and len(message.subject) == 1000
    assert message.message_id == "nul@client.example"
    assert message.body_text == "Body with a NUL."


def test_date_is_aware():
    assert parsed("plain-csv").date == datetime(2025, 1, 6, 9, 15, tzinfo=UTC)


@pytest.mark.parametrize("value, expected", [
    ("<abc@x>", "abc@x"),
    ("  <abc@x>  ", "abc@x"),
    ("abc@x", "abc@x"),
    ("<abc@x> (added by a gateway)", "abc@x"),
    ("<ab\r\n c@x>", "abc@x"),
    ("<>", None),
    ("", None),
    (None, None),
    ("<" + "a" * 300 + "@x>", "a" * 300 + "@x"),  # whatever its length: message_ref names it
])
def test_normalize_message_id(value, expected):
    assert normalize_message_id(value) == expected


LONG_ID = "a" * 300 + "@x"


@pytest.mark.parametrize("message_id, expected", [
    ("abc@x", "abc@x"),
    ("a" * 250, "a" * 250),
    (LONG_ID, "message-id-sha256:" + hashlib.sha256(LONG_ID.encode()).hexdigest()),
    ("sha256:" + "0" * 64, "message-id-sha256:" + hashlib.sha256(("sha256:" + "0" * 64).encode()).hexdigest()),
    (None, None),
])
def test_message_ref(message_id, expected):
    assert message_ref(message_id) == expected


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("message_id, raw, expected", [
    ("abc@x", b"one copy", "abc@x"),
    ("abc@x", b"another copy, one more Received: line", "abc@x"),
    (None, b"no Message-ID", "sha256:" + sha256(b"no Message-ID")),
    ("", b"an empty one", "sha256:" + sha256(b"an empty one")),
    (LONG_ID, b"any bytes", "message-id-sha256:" + sha256(LONG_ID.encode())),
    ("sha256:" + sha256(b"x"), b"x", "message-id-sha256:" + sha256(("sha256:" + sha256(b"x")).encode())),
])
def test_dedup_ref(message_id, raw, expected):
    """The one dedup key: the Message-ID's ref whatever the bytes, the bytes' hash only without an id."""
    assert dedup_ref(message_id, raw) == expected


def test_a_long_message_id_names_every_copy_of_the_message_alike():
    """A resend has one more Received: line: other raw bytes, the same normalized Message-ID."""
    first = corpus.mixed(corpus.headers(message_id=LONG_ID), [corpus.text(), corpus.attachment("a.csv", corpus.CSV)])
    resent = b"Received: from relay.example by mx.example; Mon, 06 Jan 2025 10:16:00 +0100\r\n" + first
    refs = {parse_message(first).source_ref, parse_message(resent).source_ref}
    assert refs == {message_ref(LONG_ID)}
    assert parse_message(first).message_id == LONG_ID


@pytest.mark.parametrize("raw, expected", [
    (b"From: =?utf-8?q?Ren=C3=A9e?= <renee@client.example>\r\nSubject: =?UTF-8?Q?Donn=C3=A9es_d=E2=80=99octobre?=\r\n"
     b"Message-ID: <big@client.example>\r\n\r\n",
     ("big@client.example", "renee@client.example", "Données d’octobre")),
    (b"From: Ren\xc3\xa9e <ren\xc3\xa9e@client.example>\r\nSubject: Donn\xe9es\r\n\r\n",  # raw 8-bit: UTF-8, cp1252
     (None, "renée@client.example", "Données")),
    (b"Subject: =?koi8-r?B?" + base64.b64encode("Отчёт".encode("koi8-r")) + b"?=\r\n\r\n", (None, "", "Отчёт")),
    (b"", (None, "", "")),
])
def test_parse_headers_decodes_like_parse_message(raw, expected):
    head = parse_headers(raw)
    assert (head.message_id, head.sender, head.subject) == expected
    if raw:
        message = parse_message(raw + b"body")
        assert (message.message_id, message.sender, message.subject) == expected


def test_missing_message_id_names_the_message_by_its_hash():
    message = parsed("no-message-id")
    assert message.message_id is None
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", message.source_ref)


def test_same_message_id_different_content_share_the_source_ref():
    first, second = parsed("duplicate-id-a"), parsed("duplicate-id-b")
    assert first.source_ref == second.source_ref == corpus.DUPLICATE_ID
    assert first.body_text != second.body_text


# --- recipients, Authentication-Results, plus tags ----------------------------------------

@pytest.mark.parametrize("lines, expected", [
    ([b"To: Reports <Reports+Acme@Agency.example>", b"Cc: anne@client.example, \"Doe, John\" <john@client.example>",
      b"Delivered-To: reports+acme@agency.example"],
     ("reports+acme@agency.example", "anne@client.example", "john@client.example")),
    ([b"Delivered-To: first@agency.example", b"Cc: cc@client.example", b"To: to@client.example",
      b"Delivered-To: second@agency.example"],
     ("to@client.example", "cc@client.example", "first@agency.example", "second@agency.example")),
    ([b"To: =?utf-8?q?Ren=C3=A9e?= <ren=?utf-8?q?=C3=A9?=e@client.example>"], ("renée@client.example",)),
    ([b"To: Ren\xc3\xa9e <Ren\xc3\xa9e@client.example>"], ("renée@client.example",)),  # raw 8-bit, as the sender
    ([b"To: undisclosed-recipients:;", b"Cc: not an address, <>"], ()),
    ([b"To: team: a@client.example, b@client.example;"], ("a@client.example", "b@client.example")),
    ([b"To: " + b"a" * 310 + b"@client.example, short@client.example"], ("short@client.example",)),  # no cut address
    ([b"To: " + b"(" * 5000 + b"a@client.example"], ()),  # nested past the stdlib's recursion limit
])
def test_recipients(lines, expected):
    head = parse_headers(b"\r\n".join(lines) + b"\r\n\r\n")
    assert head.recipients == expected
    assert parse_message(b"\r\n".join(lines) + b"\r\nSubject: x\r\n\r\nbody").recipients == expected


def test_recipients_are_capped_in_number_and_never_read_cut_short():
    many = b"To: " + b", ".join(b"user%d@client.example" % n for n in range(150)) + b"\r\n\r\n"
    assert parse_headers(many).recipients == tuple(f"user{n}@client.example" for n in range(MAX_RECIPIENTS))
    long = b"To: " + b", ".join(b"u%d@client.example" % n for n in range(2000)) + b"\r\n\r\n"  # past the read cap
    read = parse_headers(long).recipients
    assert len(read) == MAX_RECIPIENTS and all(each.endswith("@client.example") for each in read)


def test_a_nested_from_header_does_not_crash():
    raw = b"From: " + b"(" * 5000 + b"anne@client.example\r\nSubject: x\r\n\r\n"
    assert parse_headers(raw).sender == ("(" * 500)


@pytest.mark.parametrize("lines, expected", [
    ([b"Authentication-Results: mx.google.com;\r\n       dkim=pass header.i=@example.com;\r\n\tdmarc=pass",
      b"Received: by relay.example; Mon, 06 Jan 2025 10:15:00 +0100",
      b"Authentication-Results: relay.example; spf=pass smtp.mailfrom=example.com"],
     ("mx.google.com; dkim=pass header.i=@example.com; dmarc=pass",
      "relay.example; spf=pass smtp.mailfrom=example.com")),
    ([b"Authentication-Results: mx.example; dkim=pass\x00header.d=example.com (caf\xc3\xa9\x1b)"],
     ("mx.example; dkim=pass\ufffdheader.d=example.com (café\ufffd)",)),  # controls never join two tokens
    ([b"Authentication-Results: " + b"x" * 3000], ("x" * (AUTH_RESULTS_MAX_CHARS - 1) + CUT_MARK,)),
    ([b"Authentication-Results: x" + b" " * 9000 + b"y"], ("x" + CUT_MARK,)),  # longer than read: marked cut
    ([b"Subject: no authentication results"], ()),
])
def test_auth_results(lines, expected):
    assert parse_headers(b"\r\n".join(lines) + b"\r\n\r\n").auth_results == expected


def test_auth_results_are_capped_in_number_from_the_top():
    lines = b"".join(b"Authentication-Results: mx%d.example; none\r\n" % n for n in range(30))
    assert parse_headers(lines + b"\r\n").auth_results == tuple(
        f"mx{n}.example; none" for n in range(MAX_HEADERS_READ))


def test_headers_built_without_the_new_fields_keep_working():
    head = MessageHeaders(message_id=None, source_ref=None, sender="", subject="", date=None)
    assert (head.recipients, head.auth_results) == ((), ())


@pytest.mark.parametrize("address, expected", [
    ("reports+acme@agency.example", "acme"),
    ("Reports+ACME@agency.example", "acme"),
    ("reports+acme+q1@agency.example", "acme+q1"),
    ("reports@agency.example", ""),
    ("reports+@agency.example", ""),
    ("reports+acme", ""),
    ("odd@local+part@agency.example", "part"),
    ("reports@plus+domain.example", ""),
    ("", ""),
])
def test_plus_tag(address, expected):
    assert plus_tag(address) == expected
