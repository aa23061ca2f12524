"""The Gmail source through googleapiclient and google-auth, against tests/support/fake_gmail.py.

No test needs the database: the source only reads the API and yields batches.
"""

from __future__ import annotations

import logging
from datetime import date

import pytest
from google.auth.exceptions import RefreshError

from mailpoll.providers import gmail, gmail_rules
from mailpoll.providers.base import ProviderError
from mailpoll.providers.changes import Batch, CursorExpired, Throttled, TooBig
from tests.support.gmail_mailboxes import CLIENT_SECRET, REFRESH_TOKEN
from tests.support.gmail_sources import message
from tests.support.gmail_sources import fixture_fake, fixture_pauses, fixture_source  # noqa: F401
from tests.support.google import service_account_key
from tests.support.loopback import free_port

JAN_2024_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
DAY_MS = 86_400_000


def contents(batches: list[Batch]) -> list:
    return [content for batch in batches for _, content in batch.items]


# -- pure decisions --------------------------------------------------------------

@pytest.mark.parametrize(("attempt", "jitter", "retry_after", "expected"), [
    (1, 0.0, None, 0.5),
    (1, 0.5, None, 0.75),
    (2, 0.0, None, 1.0),
    (4, 0.999, None, 8 * 0.9995),
    (6, 0.0, None, 16.0),  # the step is capped at BACKOFF_MAX ...
    (12, 0.999, None, 32 * 0.9995),  # ... whatever the attempt
    (1, 0.0, "7", 7.0),  # Retry-After wins
    (3, 0.9, "0", 0.0),
    (1, 0.0, "3600", 32.0),  # capped
    (2, 0.0, "Wed, 21 Oct 2026 07:28:00 GMT", 1.0),  # a date is ignored
])
def test_backoff_delay(attempt, jitter, retry_after, expected):
    assert gmail_rules.backoff_delay(attempt, jitter, retry_after) == pytest.approx(expected)


@pytest.mark.parametrize(("status", "reasons", "call", "attempt", "expected"), [
    (429, [], gmail_rules.CALL_OTHER, 1, gmail_rules.RETRY),
    (429, [], gmail_rules.CALL_HISTORY, 4, gmail_rules.RETRY),
    (429, [], gmail_rules.CALL_MESSAGE, 5, gmail_rules.THROTTLED),
    (403, ["rateLimitExceeded"], gmail_rules.CALL_OTHER, 2, gmail_rules.RETRY),
    (403, ["userRateLimitExceeded"], gmail_rules.CALL_MESSAGE, 1, gmail_rules.RETRY),
    (403, ["userRateLimitExceeded"], gmail_rules.CALL_MESSAGE, 5, gmail_rules.THROTTLED),
    (403, ["insufficientPermissions"], gmail_rules.CALL_OTHER, 1, gmail_rules.FAIL),  # no access: retrying will not help
    (403, [], gmail_rules.CALL_HISTORY, 1, gmail_rules.FAIL),
    (404, ["notFound"], gmail_rules.CALL_HISTORY, 1, gmail_rules.EXPIRED),
    (404, ["notFound"], gmail_rules.CALL_MESSAGE, 1, gmail_rules.GONE),
    (404, ["notFound"], gmail_rules.CALL_OTHER, 1, gmail_rules.FAIL),
    (400, ["invalidArgument"], gmail_rules.CALL_SWEEP, 1, gmail_rules.EXPIRED),  # a stored page token refused
    (404, ["notFound"], gmail_rules.CALL_SWEEP, 1, gmail_rules.EXPIRED),
    (429, [], gmail_rules.CALL_SWEEP, 1, gmail_rules.RETRY),
    (403, ["insufficientPermissions"], gmail_rules.CALL_SWEEP, 1, gmail_rules.FAIL),  # e.g. the profile of an unknown user
    (401, ["authError"], gmail_rules.CALL_OTHER, 1, gmail_rules.FAIL),
    (400, ["invalidArgument"], gmail_rules.CALL_HISTORY, 1, gmail_rules.FAIL),
    (500, ["backendError"], gmail_rules.CALL_OTHER, 1, gmail_rules.FAIL),
])
def test_decide(status, reasons, call, attempt, expected):
    assert gmail_rules.decide(status, reasons, call=call, attempt=attempt, max_attempts=5) == expected


@pytest.mark.parametrize(("sizes", "max_count", "max_bytes", "expected"), [
    ([], 3, 10, []),
    ([4, 4, 4, 4], 3, 100, [[0, 1, 2], [3]]),  # by count
    ([4, 4, 4, 4], 9, 8, [[0, 1], [2, 3]]),  # by bytes: exactly the budget fits
    ([4, 5, 4], 9, 8, [[0], [1], [2]]),
    ([20, 1, 1], 9, 8, [[0], [1, 2]]),  # one over the budget goes alone
    ([1, 20, 1], 9, 8, [[0], [1], [2]]),
    ([0, 0, 0], 2, 8, [[0, 1], [2]]),
])
def test_size_groups(sizes, max_count, max_bytes, expected):
    ids = [f"m{n}" for n in range(len(sizes))]
    groups = gmail_rules.size_groups(ids, dict(zip(ids, sizes, strict=True)), max_count=max_count, max_bytes=max_bytes)
    assert groups == [[f"m{n}" for n in group] for group in expected]


LABELS = {"INBOX": "INBOX", "SENT": "SENT", "Label_3": "Clients/Reports", "Label_4": "reports", "Label_5": "Reports "}


@pytest.mark.parametrize(("folder", "expected"), [
    ("INBOX", "INBOX"),  # an id
    ("Label_3", "Label_3"),
    ("Clients/Reports", "Label_3"),  # a user label's name
    ("reports", "Label_4"),  # an exact name wins over a case-insensitive one
    ("REPORTS", "Label_4"),  # Gmail's names are unique whatever their case
    ("inbox", "INBOX"),
    ("Reports ", "Label_5"),  # no trimming: a name is what Gmail says
    ("Clients", None),  # no prefix matching
    ("", None),
])
def test_resolve_label(folder, expected):
    assert gmail_rules.resolve_label(folder, LABELS) == expected


@pytest.mark.parametrize(("error", "description", "expected"), [
    ("unauthorized_client", "Client is unauthorized to retrieve access tokens using this method",
     "domain-wide delegation is not granted to client id 1001"),
    ("access_denied", "Requested client not authorized.", "domain-wide delegation is not granted"),
    ("invalid_grant", "Invalid email or User ID", "no Workspace user a@x.example"),
    ("invalid_grant", "Invalid JWT Signature.", "the key itself was refused"),
    ("invalid_grant", "", "the key itself was refused"),
    ("invalid_request", "odd", "check the service account and its key"),
])
def test_service_refusal_hint(error, description, expected):
    hint = gmail_rules.service_refusal_hint(error, description, client_id="1001", subject="a@x.example")
    assert hint.startswith(expected)


# -- first poll ------------------------------------------------------------------

def test_new_only_stores_the_current_history_id_and_fetches_nothing(fake, source):
    for n in range(3):
        fake.add(message(n))
    batches = list(source().initial("new-only"))
    assert batches == [Batch([], str(fake.history_id))]
    assert fake.served("/messages") == [] and fake.served("/history") == []


def test_full_lists_every_page_and_commits_the_history_id_taken_before_listing(fake, source):
    ids = [fake.add(message(n)) for n in range(5)]
    fake.add(message(99), labels=["SENT"])  # another label
    before = str(fake.history_id)
    reading = source(page_size=2).initial("full")
    first = next(reading)
    late = fake.add(message(5))  # arrives while the listing runs
    batches = [first, *reading]
    assert [gmail_rules.is_sweep(b.cursor) for b in batches[:2]] == [True, True] and batches[2].cursor == before
    assert sorted(mid for b in batches for mid, _ in b.items) == sorted(ids)
    assert sorted(contents(batches)) == sorted(message(n) for n in range(5))
    assert len(fake.listings()) == 3 and all(c.query["labelIds"] == ["INBOX"] for c in fake.listings())
    # The cursor committed after the listing still reaches the late message.
    after = list(source().changes(before))
    assert [mid for b in after for mid, _ in b.items] == [late]
    assert contents(after) == [message(5)]


def test_a_listing_cut_short_resumes_from_its_sweep_cursor(fake, source):
    ids = [fake.add(message(n)) for n in range(5)]
    before = str(fake.history_id)
    first = next(source(page_size=2).initial("full"))
    fake.add(message(5))
    rest = list(source(page_size=2).changes(first.cursor))  # the next poll, from the committed cursor
    assert sorted(mid for b in [first, *rest] for mid, _ in b.items) == sorted(ids)
    assert rest[-1].cursor == before
    assert len(fake.listings()) == 3  # no page listed twice


def test_a_sweep_cursor_gmail_no_longer_takes_is_cursor_expired(fake, source):
    for n in range(3):
        fake.add(message(n))
    first = next(source(page_size=2).initial("full"))
    page_token = gmail_rules.parse_sweep(first.cursor)[2]
    fake.delete(page_token)  # the fake's page tokens name the last message served
    with pytest.raises(CursorExpired, match="HTTP 400"):
        list(source(page_size=2).changes(first.cursor))
    with pytest.raises(CursorExpired):
        list(source().changes("sweep?nonsense"))


def test_since_lists_mail_received_from_that_day_on(fake, source):
    fake.add(message(0), internal_ms=JAN_2024_MS - DAY_MS)
    kept = [fake.add(message(n), internal_ms=JAN_2024_MS + n * DAY_MS + 1000) for n in (1, 2)]
    batches = list(source().initial("since", date(2024, 1, 1)))
    assert sorted(mid for b in batches for mid, _ in b.items) == sorted(kept)
    assert fake.listings()[0].query["q"] == [f"after:{JAN_2024_MS // 1000}"]


def test_initial_mode_is_checked(source):
    with pytest.raises(ValueError):
        next(source().initial("since"))
    with pytest.raises(ValueError):
        next(source().initial("everything"))


# -- incremental -----------------------------------------------------------------

def test_history_pages_each_carry_a_cursor_that_resumes_after_them(fake, source):
    start = str(fake.history_id)
    ids = [fake.add(message(n)) for n in range(5)]
    fake.add(message(50), labels=["SPAM"])
    batches = list(source(page_size=2).changes(start))
    assert [mid for b in batches for mid, _ in b.items] == ids
    assert contents(batches) == [message(n) for n in range(5)]
    assert batches[-1].cursor == str(fake.history_id)
    history_calls = fake.served("/history")
    assert all(c.query["historyTypes"] == ["messageAdded", "labelAdded"] and c.query["labelId"] == ["INBOX"]
               for c in history_calls)
    # Committing the first page's cursor and starting again reads only what came after it.
    resumed = list(source(page_size=2).changes(batches[0].cursor))
    assert [mid for b in resumed for mid, _ in b.items] == ids[2:]


def test_a_message_moved_into_the_label_later_is_read(fake, source):
    rescued = fake.add(message(1), labels=["SPAM"])
    start = str(fake.history_id)
    fake.add_labels(rescued, "STARRED")  # another label: not a change of the inbox
    assert [mid for b in source().changes(start) for mid, _ in b.items] == []
    fake.add_labels(rescued, "INBOX")  # "not spam"
    assert [mid for b in source().changes(start) for mid, _ in b.items] == [rescued]


def test_nothing_new_moves_the_cursor_to_the_mailbox_history_id(fake, source):
    start = str(fake.history_id)
    fake.add(message(1), labels=["SENT"])
    assert list(source().changes(start)) == [Batch([], str(fake.history_id))]


def test_a_message_deleted_before_its_fetch_is_left_out(fake, source):
    start = str(fake.history_id)
    kept, gone = fake.add(message(1)), fake.add(message(2))
    fake.vanishing = {gone}
    assert [mid for b in source().changes(start) for mid, _ in b.items] == [kept]
    assert len(fake.served("/messages/", fmt="raw")) == 2  # it was asked for, and answered 404


def test_an_expired_history_id_is_cursor_expired(fake, source):
    fake.add(message(1))
    fake.oldest_history = fake.history_id
    with pytest.raises(CursorExpired, match="no longer takes the cursor of label INBOX"):
        list(source().changes("1000"))


def test_a_history_id_expiring_mid_paging_is_cursor_expired_after_the_good_pages(fake, source):
    start = str(fake.history_id)
    for n in range(4):
        fake.add(message(n))
    reading = source(page_size=2).changes(start)
    first = next(reading)
    assert len(first.items) == 2 and first.cursor is not None
    fake.oldest_history = fake.history_id + 1  # Gmail dropped the history meanwhile
    with pytest.raises(CursorExpired):
        next(reading)


# -- content, sizes, batching ------------------------------------------------------

def test_a_message_over_the_limit_is_too_big_with_its_headers_and_is_not_downloaded(fake, source):
    small = fake.add(message(1))
    big = fake.add(message(2, b"x" * 5000))
    batches = list(source(max_bytes=2000).initial("full"))
    found = dict(item for b in batches for item in b.items)
    assert found[small] == message(1)
    assert isinstance(found[big], TooBig) and found[big].size == len(message(2, b"x" * 5000))
    assert b"Subject: request 2\r\n" in found[big].headers and found[big].headers.endswith(b"\r\n\r\n")
    assert b"xxxx" not in found[big].headers
    assert [c.path.rsplit("/", 1)[1] for c in fake.served("/messages/", fmt="raw")] == [small]


def test_a_message_larger_than_its_estimate_is_too_big_whatever_gmail_announced(fake, source):
    big = fake.add(message(2, b"y" * 5000))
    fake.size_estimates[big] = 100
    [batch] = list(source(max_bytes=2000).changes("1000"))
    [(mid, content)] = batch.items
    assert mid == big and content == TooBig(len(message(2, b"y" * 5000)), message(2, b""))


def test_the_limit_defaults_to_the_mailpoll_setting(fake, source, settings):
    settings.MAILPOLL_MAX_MESSAGE_BYTES = 1500
    big = fake.add(message(3, b"z" * 2000))
    [batch] = list(source(max_bytes=None).changes("1000"))
    assert batch.items[0][0] == big and isinstance(batch.items[0][1], TooBig)


def test_fetches_go_in_batches_of_batch_size(fake, source):
    for n in range(7):
        fake.add(message(n))
    batches = list(source(batch_size=3).changes("1000"))
    assert len(contents(batches)) == 7
    assert fake.batch_sizes == [3, 3, 1, 3, 3]  # minimal, then raw
    # A raw message alone is a plain messages.get: a batch answer is copied over and over while parsed.
    assert [c.batched for c in fake.served("/messages/", fmt="raw")] == [True] * 6 + [False]
    assert all(c.batched for c in fake.served("/messages/", fmt="minimal"))


def test_a_page_of_large_messages_is_cut_into_batches_bounded_in_bytes(fake, source):
    start = str(fake.history_id)
    ids = [fake.add(message(n, b"w" * 900)) for n in range(5)]
    big = fake.add(message(9, b"v" * 5000))
    size = len(message(0, b"w" * 900))
    batches = list(source(batch_bytes=2 * size, max_bytes=4000).changes(start))
    # The too-big message first, then the others two by two.
    assert [[mid for mid, _ in b.items] for b in batches] == [[big, *ids[:2]], ids[2:4], ids[4:]]
    assert batches[0].items[0][1] == TooBig(len(message(9, b"v" * 5000)), message(9, b""))
    assert [b.cursor for b in batches] == [None, None, str(fake.history_id)]
    assert fake.batch_sizes == [6, 1, 2, 2]  # minimal, metadata, then raw by two (the last alone: a plain get)


# -- throttling --------------------------------------------------------------------

def test_throttled_calls_back_off_then_succeed(fake, source, pauses):
    mid = fake.add(message(1))
    fake.throttle = [(429, "rateLimitExceeded"), (403, "userRateLimitExceeded")]
    fake.part_throttle = [(429, "rateLimitExceeded")]
    batches = list(source().changes("1000"))
    assert [m for b in batches for m, _ in b.items] == [mid]
    assert pauses == [0.5, 1.0, 0.5]  # two on history.list, one on the throttled batch part


def test_throttling_that_does_not_stop_is_throttled_after_max_attempts(fake, source, pauses):
    fake.throttle = [(429, "rateLimitExceeded")] * 10
    with pytest.raises(Throttled, match="after 3 attempts"):
        list(source(max_attempts=3).initial("full"))
    assert pauses == [0.5, 1.0]
    assert len(fake.throttle) == 7


def test_throttled_batch_parts_give_up_after_max_attempts(fake, source, pauses):
    fake.add(message(1))
    fake.part_throttle = [(403, "userRateLimitExceeded")] * 10
    with pytest.raises(Throttled):
        list(source(max_attempts=3).changes("1000"))
    assert pauses == [0.5, 1.0]


def test_a_forbidden_call_that_is_not_a_quota_fails_at_once(fake, source, pauses):
    fake.throttle = [(403, "insufficientPermissions")]
    with pytest.raises(ProviderError) as raised:
        list(source().changes("1000"))
    assert not isinstance(raised.value, (Throttled, CursorExpired)) and "HTTP 403" in str(raised.value)
    assert pauses == []


def test_an_unreachable_api_is_a_provider_error_naming_it(fake, pauses):
    credentials = gmail.user_credentials(refresh_token=REFRESH_TOKEN, client_id="client-1.apps",
                                         client_secret=CLIENT_SECRET, token_uri=fake.token_uri)
    nowhere = f"http://127.0.0.1:{free_port()}/"
    reader = gmail.GmailSource(gmail.build_service(credentials, api_endpoint=nowhere), api_endpoint=nowhere,
                               max_bytes=10_000, sleep=pauses.append)
    with pytest.raises(ProviderError, match=r"Gmail API at http://127\.0\.0\.1:\d+ could not be reached: "
                                            r"connection refused"):
        list(reader.changes("1000"))
    assert pauses == []


# -- credentials and secrets -------------------------------------------------------

def test_a_service_account_impersonates_the_mailbox_user(fake, pauses):
    fake.add(message(1))
    credentials = gmail.delegated_credentials(service_account_key(fake.token_uri), "alice@client.example")
    service = gmail.build_service(credentials, api_endpoint=fake.endpoint)
    reader = gmail.GmailSource(service, api_endpoint=fake.endpoint, max_bytes=10_000, sleep=pauses.append)
    assert contents(list(reader.initial("full"))) == [message(1)]
    assert [g["sub"] for g in fake.grants] == ["alice@client.example"]
    assert fake.grants[0]["scope"] == "https://www.googleapis.com/auth/gmail.readonly"


def test_a_user_consent_is_refreshed_with_its_refresh_token(fake, source):
    fake.add(message(1))
    assert contents(list(source().changes("1000"))) == [message(1)]
    assert fake.grants == [{"refresh_token": REFRESH_TOKEN}]


def test_an_access_token_that_stops_working_mid_read_is_refreshed(fake, source):
    start = str(fake.history_id)
    ids = [fake.add(message(n)) for n in range(4)]
    reading = source(page_size=2).changes(start)
    first = next(reading)
    fake.access_tokens.clear()  # revoked or expired early: the API answers 401
    rest = list(reading)
    assert [mid for b in [first, *rest] for mid, _ in b.items] == ids
    assert len(fake.grants) == 2


def test_a_refused_grant_is_left_to_the_token_machinery_without_the_secrets(fake, source):
    fake.refuse = "Token has been expired or revoked."
    with pytest.raises(RefreshError) as raised:
        list(source().changes("1000"))
    assert "invalid_grant" in str(raised.value)
    assert REFRESH_TOKEN not in str(raised.value) and CLIENT_SECRET not in str(raised.value)
    assert fake.calls == []


def test_a_throttled_batch_request_is_sent_again_whole(fake, source, pauses):
    ids = [fake.add(message(n)) for n in range(3)]
    fake.batch_throttle = [(429, "rateLimitExceeded")]
    assert [mid for b in source().changes("1000") for mid, _ in b.items] == ids
    assert pauses == [0.5] and fake.batch_sizes == [3, 3]  # minimal (sent twice, served once), raw


def test_no_token_or_secret_reaches_the_logs_at_debug(fake, source, caplog):
    caplog.set_level(logging.DEBUG)
    fake.add(message(1))
    fake.throttle = [(429, "rateLimitExceeded")]  # a warning of our own is logged too
    list(source().changes("1000"))
    list(gmail.GmailSource(gmail.build_service(
        gmail.delegated_credentials(service_account_key(fake.token_uri), "bob@client.example"),
        api_endpoint=fake.endpoint), api_endpoint=fake.endpoint, max_bytes=10_000).initial("full"))
    assert len(fake.access_tokens) == 2
    logged = caplog.text + "".join(repr(r.args) for r in caplog.records)
    assert "Gmail throttled" in logged and "mailbox=mb-1 folder=INBOX" in logged
    private_key_line = service_account_key(fake.token_uri)["private_key"].splitlines()[1]
    for secret in (*fake.access_tokens, REFRESH_TOKEN, CLIENT_SECRET, private_key_line):
        assert secret not in logged
