"""A message's headers and Message-ID, decoded over hostile input: pure, no database."""

from __future__ import annotations

import base64
import hashlib
import re
from datetime import UTC, datetime

import pytest

from mailpoll.message.headers import dedup_ref, message_ref, normalize_message_id, parse_headers
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
