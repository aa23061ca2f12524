"""What the Gmail source makes of answers that are not the Gmail API's (issue 19): too large, malformed, redirected.

The pure rules (what may become a cursor, the bytes an answer may take) table by table, then the real
source (googleapiclient, httplib2) against tests/support/fake_gmail.py's hostile knobs. No database.
"""

from __future__ import annotations

import pytest

from mailpoll.providers import gmail, gmail_rules
from mailpoll.providers.base import ProviderError
from mailpoll.providers.changes import CursorExpired, TooBig
from mailpoll.providers.gmail_rules import NotGmail
from tests.support.gmail_sources import LIMIT, message
from tests.support.gmail_sources import fixture_fake, fixture_other, fixture_pauses, fixture_source  # noqa: F401

MB = 1024 * 1024


def items(batches) -> dict:
    return {mid: content for batch in batches for mid, content in batch.items}


# -- the rules ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [
    ("1042", "1042"), (1042, "1042"), ("0", "0"), ("18446744073709551615", "18446744073709551615"),
    ({"x": 1}, None), ([1], None), (True, None), (None, None), ("", None), ("12a", None), (" 12", None),
    ("1" * 21, None), (-1, None), (2 ** 64, None), (1.5, None), ("١٢", None),  # Arabic-Indic digits
])
def test_history_id(value, expected):
    if expected is None:
        with pytest.raises(NotGmail, match="not its API"):
            gmail_rules.history_id(value)
    else:
        assert gmail_rules.history_id(value) == expected


@pytest.mark.parametrize("value, expected", [
    (None, None), ("", None), ("08123456789", "08123456789"), ("AB/c+d==", "AB/c+d=="),
    ({"x": 1}, "bad"), (12, "bad"), ("a b", "bad"), ("x&page=1", "bad"), ("x" * 513, "bad"),
])
def test_page_token(value, expected):
    if expected == "bad":
        with pytest.raises(NotGmail):
            gmail_rules.page_token(value)
    else:
        assert gmail_rules.page_token(value) == expected


@pytest.mark.parametrize("cursor, problem", [
    ("1042", ""), (gmail_rules.sweep_cursor("1042", "after:1704067200", "0912"), ""),
    ("{'x': 1}", "not a Gmail history id"), ("", "not a Gmail history id"), ("9" * 21, "not a Gmail history id"),
    ("sweep?start=1042&q=", "not a Gmail sweep cursor"), ("sweep?start=x&q=&page=1", "not a Gmail sweep cursor"),
    ("sweep?start=1&q=&page=1&page=2", "not a Gmail sweep cursor"), ("sweep?start=1&q=&page=", "not a Gmail sweep cursor"),
])
def test_stored_cursor_problem(cursor, problem):
    assert gmail_rules.stored_cursor_problem(cursor) == problem


@pytest.mark.parametrize("fmt, estimates, expected", [
    ("minimal", [5] * 3, 3 * gmail_rules.MINIMAL_BYTES),
    ("metadata", [5] * 2, 2 * gmail_rules.HEADERS_BYTES),
    # Alone: what any message within the limit takes, base64-encoded, whatever its estimate.
    ("raw", [100], 1_333_336 + gmail_rules.PART_OVERHEAD),
    ("raw", [10 * LIMIT], 1_333_336 + gmail_rules.PART_OVERHEAD),
    # Together: held to the estimates (base64, an eighth more, each part's envelope).
    ("raw", [100, 100, 100], 3 * (136 + 12 + gmail_rules.PART_OVERHEAD)),
    ("raw", [3 * LIMIT, 0], 1_333_336 + 125_000 + 2 * gmail_rules.PART_OVERHEAD),
])
def test_answer_bytes(fmt, estimates, expected):
    assert gmail_rules.answer_bytes(fmt, estimates, max_bytes=LIMIT) == expected


# -- answers over their bound -----------------------------------------------------------------------------

def test_messages_far_larger_than_their_estimates_are_too_big_with_the_bytes_read(fake, source):
    huge = [fake.add(message(n)) for n in range(3)]
    small = fake.add(message(3))
    for mid in huge:
        fake.size_estimates[mid], fake.huge_raw[mid] = 100, 20 * MB  # "100 bytes", 20 MB each
    found = items(source().initial("full"))
    assert found[small] == message(3)
    for n, mid in enumerate(huge):
        content = found[mid]
        assert isinstance(content, TooBig)
        # What was read before stopping, at most one message's bound: not the estimate, not the 20 MB.
        assert LIMIT * 4 / 3 < content.size <= gmail_rules.answer_bytes("raw", [0], max_bytes=LIMIT) + 1
        assert f"Subject: request {n}".encode() in content.headers


def test_a_lying_content_length_is_not_the_size_of_a_rejected_message(fake, source):
    mid = fake.add(message(1))
    fake.size_estimates[mid], fake.huge_raw[mid] = 100, 5 * MB
    fake.lying_length = 10 ** 12  # announced for every streamed answer; the body is 5 MB, then the connection closes
    content = items(source().initial("full"))[mid]
    assert isinstance(content, TooBig)
    assert LIMIT < content.size <= gmail_rules.answer_bytes("raw", [0], max_bytes=LIMIT) + 1


def test_a_huge_labels_list_is_an_error_that_says_so_without_reading_it(fake, source):
    fake.huge_labels = 100 * MB
    with pytest.raises(gmail.AnswerTooLarge) as raised:
        source().labels()
    assert "labels.list" in str(raised.value) and "passed 4,194,304 bytes" in str(raised.value)
    assert raised.value.read <= 4 * MB + 1
    assert "/gmail/v1" not in str(raised.value)


# -- redirects ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("status", [307, 308])
def test_a_redirected_batch_post_is_refused_and_the_other_host_receives_nothing(fake, other, source, status):
    fake.add(message(1))
    start = str(fake.history_id - 1)
    fake.after.append(lambda call: fake.redirect.append((status, f"{other.endpoint}batch/gmail/v1?key=s3cret"))
                      if call.path.endswith("/history") else None)
    with pytest.raises(ProviderError) as raised:
        list(source().changes(start))
    error = str(raised.value)
    assert f"HTTP {status}" in error and f"redirect to {other.endpoint.rstrip('/')}" in error
    assert "s3cret" not in error and "/batch" not in error
    assert other.requests == 0


@pytest.mark.parametrize("status", [307, 308])
def test_a_redirected_api_get_is_refused(fake, other, source, status):
    fake.redirect.append((status, f"{other.endpoint}gmail/v1/users/me/labels"))
    with pytest.raises(ProviderError, match=f"HTTP {status}, a redirect to {other.endpoint.rstrip('/')}"):
        source().labels()
    assert other.requests == 0


# -- answers not in the API's shape -----------------------------------------------------------------------

@pytest.mark.parametrize("body", [b'["x"]', b'{"labels": "abc"}', b"<html>not json</html>", b"[" * 100_000,
                                  b'{"labels": [{"id": {"x": 1}}]}', b'{"labels": [{"name": "x"}]}'])
def test_a_labels_answer_not_in_the_apis_shape_is_not_gmail(fake, source, body):
    fake.answers["labels"] = (200, "application/json", body)
    with pytest.raises(NotGmail, match=r"^Gmail answered something that is not its API \(labels.list"):
        source().labels()


def test_a_history_id_that_is_not_one_is_not_gmail_and_no_cursor_is_yielded(fake, source):
    fake.add(message(1))
    start = str(fake.history_id - 1)
    fake.history_extra = {"historyId": {"x": 1}}
    batches = []
    with pytest.raises(NotGmail, match=r"\(history.list: a historyId that is a dict\)$"):
        batches.extend(source().changes(start))
    assert batches == []


@pytest.mark.parametrize("extra", [{"nextPageToken": {"x": 1}}, {"history": [{"id": "5", "messagesAdded": "x"}]},
                                   {"history": [{"id": {"x": 1}}]}, {"history": "abc"}])
def test_a_history_page_not_in_the_apis_shape_is_not_gmail(fake, source, extra):
    fake.add(message(1))
    fake.history_extra = extra
    with pytest.raises(NotGmail):
        list(source().changes(str(fake.history_id - 1)))


@pytest.mark.parametrize("answer", [(200, "text/html", b"<html>Sign in</html>"),
                                    (200, "multipart/mixed; boundary=x", b"--x\r\nContent-ID: nope\r\n\r\nHTTP/1.1 200 OK"
                                                                          b"\r\n\r\n{}\r\n--x--\r\n"),
                                    (200, "multipart/mixed; boundary=x", b"--x--\r\n")])
def test_a_batch_answer_not_in_the_apis_shape_is_not_gmail(fake, source, answer):
    fake.add(message(1))
    fake.answers["batch"] = answer
    with pytest.raises(NotGmail, match="batch of 1 messages.get"):
        list(source().initial("full"))


@pytest.mark.parametrize("cursor", ["{'x': 1}", "12abc", "9" * 30, "sweep?start=1042&q=", "sweep?start=x&q=&page=1"])
def test_a_stored_cursor_that_is_no_gmail_cursor_is_expired(fake, source, cursor):
    with pytest.raises(CursorExpired, match="resyncing the label"):
        list(source().changes(cursor))
    assert fake.calls == []
