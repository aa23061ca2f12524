"""Gmail mailboxes against a hostile or failing Google (issue 19): through the poller and a real ``pollmail``.

Huge answers (peak RSS of the ``pollmail`` process), cursors that are not Gmail's, redirects of the API and
of the service account's token request to another loopback host, a failing token endpoint.
"""

from __future__ import annotations

import json

import pytest

from mailpoll.models import FolderCursor, Mailbox, Request, RequestStatus
from mailpoll.sync.poller import Poller
from tests.mailpoll.factories import mail
from tests.support.fake_gmail import huge_base64
from tests.support.gmail_mailboxes import gmail_mailbox
from tests.support.gmail_sources import fixture_other  # noqa: F401  (the fixture other)
from tests.support.processes import ManagedProcess, peak_rss_kb, process_env, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

MB = 1024 * 1024
RSS_CEILING_KB = 300 * 1024


def poll(mailbox: Mailbox) -> Mailbox:
    Poller().poll(mailbox)
    mailbox.refresh_from_db()
    return mailbox


def cursor_of(mailbox, folder="INBOX") -> FolderCursor:
    return FolderCursor.objects.get(mailbox=mailbox, folder=folder)


# -- memory: answers far larger than announced, in a real pollmail -----------------------------------------

def pollmail(processes, media, gmail) -> ManagedProcess:
    return processes(lambda: ManagedProcess("pollmail", "--interval", "60", env=process_env(
        MEDIA_ROOT=media, MAILPOLL_GMAIL_API_URL=gmail.endpoint, MAILPOLL_GOOGLE_TOKEN_URL=gmail.token_uri)))


@pytest.mark.processes
def test_messages_of_150_mb_announced_as_100_bytes_are_rejected_and_pollmail_stays_small(gmail, processes, media):
    huge = [gmail.add(mail(f"huge {n}")) for n in range(3)]
    gmail.add(mail("small"))
    for mid in huge:
        gmail.size_estimates[mid], gmail.huge_raw[mid] = 100, 150 * MB
    mailbox = gmail_mailbox()
    poller = pollmail(processes, media, gmail)
    wait_for(lambda: Mailbox.objects.get(pk=mailbox.pk).last_success_at, timeout=120, message="the poll's end")
    peak = peak_rss_kb(poller)
    print(f"pollmail peak RSS {peak // 1024} MB")
    assert peak < RSS_CEILING_KB, f"pollmail peaked at {peak // 1024} MB"
    assert Request.objects.get(subject="small").status == RequestStatus.ACCEPTED
    rejected = Request.objects.filter(status=RequestStatus.REJECTED)
    assert sorted(rejected.values_list("subject", flat=True)) == ["huge 0", "huge 1", "huge 2"]
    limit = 25 * MB
    for request in rejected:
        # The bytes read before stopping: past the limit's base64, never the 150 MB nor the 100 announced.
        assert limit * 4 // 3 < request.size < limit * 4 // 3 + MB
        assert f"message is {request.size:,} bytes" in request.reject_reason


@pytest.mark.processes
def test_a_labels_list_of_400_mb_is_the_mailboxs_error_and_pollmail_stays_small(gmail, processes, media):
    gmail.huge_labels = 400 * MB
    mailbox = gmail_mailbox()
    poller = pollmail(processes, media, gmail)
    error = wait_for(lambda: Mailbox.objects.get(pk=mailbox.pk).last_error, timeout=120, message="the poll's error")
    peak = peak_rss_kb(poller)
    print(f"pollmail peak RSS {peak // 1024} MB")
    assert peak < RSS_CEILING_KB, f"pollmail peaked at {peak // 1024} MB"
    assert "Gmail's answer to labels.list" in error and "passed 4,194,304 bytes" in error
    assert "/gmail/v1" not in error


# -- cursors -----------------------------------------------------------------------------------------------

def test_a_history_id_that_is_not_one_is_recorded_and_never_committed(gmail):
    gmail.add(mail("first"))
    mailbox = poll(gmail_mailbox())
    before = cursor_of(mailbox).position
    gmail.add(mail("second"))
    gmail.history_extra = {"historyId": {"x": 1}}
    mailbox = poll(mailbox)
    assert mailbox.last_error == ("Gmail answered something that is not its API (history.list: a historyId that is "
                                  "a dict)")
    assert cursor_of(mailbox).position == before

    gmail.history_extra = {}  # Gmail is itself again: the label was never wedged
    mailbox = poll(mailbox)
    assert mailbox.consecutive_failures == 0 and Request.objects.filter(subject="second").exists()
    assert cursor_of(mailbox).position == str(gmail.history_id)


@pytest.mark.parametrize("stored", ["{'x': 1}", "sweep?start=12&q=", "1" * 40])
def test_a_stored_cursor_that_is_no_gmail_cursor_resyncs_the_label_and_says_so(gmail, stored):
    gmail.add(mail("first"))
    mailbox = poll(gmail_mailbox())
    gmail.add(mail("second"))
    FolderCursor.objects.filter(mailbox=mailbox).update(position=stored)
    mailbox = poll(mailbox)
    row = cursor_of(mailbox)
    assert row.resyncs == 1 and "the stored cursor of label INBOX is not a Gmail" in row.resync_reason
    assert row.position == str(gmail.history_id) and row.resync_started_at is None
    assert sorted(Request.objects.values_list("subject", flat=True)) == ["first", "second"]
    assert mailbox.last_error == ""


# -- redirects carry no credential to another host ---------------------------------------------------------

@pytest.mark.parametrize("status", [307, 308])
def test_a_batch_post_redirected_elsewhere_is_refused_naming_the_host_only(gmail, other, status):
    gmail.add(mail("first"))
    gmail.after.append(lambda call: gmail.redirect.append((status, f"{other.endpoint}batch/gmail/v1?key=s3cret"))
                       if call.path.endswith("/messages") else None)
    mailbox = poll(gmail_mailbox())
    assert f"HTTP {status}, a redirect to {other.endpoint.rstrip('/')}, which is not followed" in mailbox.last_error
    assert "s3cret" not in mailbox.last_error and "/batch" not in mailbox.last_error
    assert other.requests == 0 and not Request.objects.exists()


@pytest.mark.parametrize("status", [307, 308])
def test_a_service_account_token_request_redirected_elsewhere_sends_its_assertion_nowhere(gmail, other, status):
    gmail.token_redirect.append((status, f"{other.token_uri}?from=redirect"))
    mailbox = poll(gmail_mailbox())
    assert f"HTTP {status}, a redirect to {other.endpoint.rstrip('/')}, which is not followed" in mailbox.last_error
    assert "Google's token endpoint, for service account" in mailbox.last_error
    assert "from=redirect" not in mailbox.last_error
    assert other.requests == 0 and gmail.assertions == []


# -- a token endpoint that fails is not a refusal ----------------------------------------------------------

def test_a_token_endpoint_failing_with_500_is_a_transient_failure_not_a_refused_key(gmail):
    gmail.token_status = 500
    mailbox = poll(gmail_mailbox())
    assert "failed for service account" in mailbox.last_error and "HTTP 500" in mailbox.last_error
    assert "Google's side, tried again next poll" in mailbox.last_error
    assert "refused" not in mailbox.last_error and "check the service account" not in mailbox.last_error
    assert mailbox.consecutive_failures == 1

    gmail.token_status = None
    gmail.add(mail("after"))
    mailbox = poll(mailbox)
    assert mailbox.consecutive_failures == 0 and Request.objects.filter(subject="after").exists()


def test_a_token_answer_of_100_mb_is_not_read_past_a_token_s_size(gmail):
    gmail.answers["token"] = (200, "application/json", [b'{"access_token": "', huge_base64(b"", 100 * MB), b'"}'])
    mailbox = poll(gmail_mailbox())
    assert mailbox.last_error.startswith("Google's token endpoint at http://127.0.0.1:")
    assert "answered more than 65,536 bytes (not a token)" in mailbox.last_error


def test_a_refused_key_is_still_said_to_be_refused(gmail):
    gmail.refuse = "Invalid JWT Signature."
    mailbox = poll(gmail_mailbox())
    assert mailbox.last_error.startswith("the provider refused the app's credentials\nGoogle refused service account ") and "the key itself" in mailbox.last_error


# -- a batch error is recorded, not raised -------------------------------------------------------------------

def test_a_batch_answer_that_is_not_multipart_is_recorded_as_not_gmail(gmail):
    gmail.add(mail("first"))
    gmail.answers["batch"] = (200, "text/html", b"<html>Sign in to continue</html>")
    mailbox = poll(gmail_mailbox())
    assert mailbox.last_error.startswith("Gmail answered something that is not its API (a batch of 1 messages.get")
    assert "AttributeError" not in mailbox.last_error


def test_a_labels_answer_that_is_a_list_is_recorded_as_not_gmail(gmail):
    gmail.answers["labels"] = (200, "application/json", json.dumps(["INBOX"]).encode())
    mailbox = poll(gmail_mailbox())
    assert mailbox.last_error == "Gmail answered something that is not its API (labels.list: AttributeError)"
