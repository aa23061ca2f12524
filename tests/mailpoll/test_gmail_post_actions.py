"""Gmail post-actions (``GmailMailbox.apply_post_actions``) against tests/support/fake_gmail.py.

The real provider, googleapiclient and google-auth: each post-action is one ``messages.modify``; the fake
keeps the labels and the history records a change writes, and holds tokens to their scopes.
"""

from __future__ import annotations

import logging

import pytest

from mailpoll.models import PostAction, Request
from mailpoll.providers import PollInterrupted, ProviderError, for_mailbox
from mailpoll.providers.base import DONE, ERROR, GONE, LABEL, MARK_READ, MOVE, PostActionItem, PostActionResult
from tests.mailpoll.factories import mail, poll_now
from tests.support.gmail_mailboxes import gmail_mailbox
from tests.support.google import service_account_key
from tests.support.loopback import free_port

# oauth.access_token commits its own transaction.
pytestmark = pytest.mark.django_db(transaction=True)

READONLY = "https://www.googleapis.com/auth/gmail.readonly"
MODIFY = "https://www.googleapis.com/auth/gmail.modify"
GONE_DETAIL = "the message is no longer in the mailbox"


def item(n: int, ref: str, action: str, destination: str = "") -> PostActionItem:
    return PostActionItem(n, ref, None, action, destination)


def read(provider, folder: str = "INBOX", cursor: str | None = None) -> tuple[list[str], str | None]:
    """The folder's message ids since ``cursor`` (all of it without one), and the last cursor to commit."""
    ids, last = [], cursor
    for batch in provider.changes(folder, cursor, mode="full"):
        ids += [mid for mid, _ in batch.items]
        last = batch.cursor or last
    return ids, last


def apply(mailbox, items: list[PostActionItem], folder: str = "INBOX") -> dict[int, PostActionResult]:
    """As the poller does: the folder read, then the post-actions on the same session."""
    with for_mailbox(mailbox) as provider:
        read(provider, folder)
        return provider.apply_post_actions(folder, items)


def unread(gmail, *subjects: str, labels=("INBOX", "UNREAD")) -> list[str]:
    return [gmail.add(mail(subject), labels=list(labels)) for subject in subjects]


# -- what each post-action changes -----------------------------------------------------

@pytest.mark.parametrize("auth", ["service", "oauth"])
def test_mark_read_removes_unread_from_that_message_alone(gmail, auth):
    done, other = unread(gmail, "done", "other")
    results = apply(gmail_mailbox(auth=auth), [item(1, done, MARK_READ)])
    assert results == {1: PostActionResult(DONE)}
    assert gmail.labels_of(done) == ["INBOX"] and gmail.labels_of(other) == ["INBOX", "UNREAD"]
    [call] = gmail.modified()
    assert call.path.endswith(f"/messages/{done}/modify") and call.user == "me"
    assert call.body == {"addLabelIds": [], "removeLabelIds": ["UNREAD"]}


def test_move_adds_the_destination_and_removes_the_folders_own_label_in_one_call(gmail):
    archive = gmail.add_label("Clients/Archive")
    reports = gmail.add_label("Reports")
    in_inbox, = unread(gmail, "in the inbox")
    in_reports, = unread(gmail, "a report", labels=[reports, "UNREAD"])
    mailbox = gmail_mailbox(folders=["INBOX", "Reports"])

    # A destination is a label's name (Gmail's names are unique whatever their case) or its id.
    assert apply(mailbox, [item(1, in_inbox, MOVE, "clients/archive")]) == {1: PostActionResult(DONE)}
    assert apply(mailbox, [item(2, in_reports, MOVE, "INBOX")], folder="Reports") == {2: PostActionResult(DONE)}

    assert gmail.labels_of(in_inbox) == ["UNREAD", archive]
    assert gmail.labels_of(in_reports) == ["UNREAD", "INBOX"]
    assert [c.body for c in gmail.modified()] == [{"addLabelIds": [archive], "removeLabelIds": ["INBOX"]},
                                                 {"addLabelIds": ["INBOX"], "removeLabelIds": [reports]}]
    assert len(gmail.served("/labels")) == 2  # one labels.list per session: the read's, reused


def test_label_adds_the_label_and_leaves_the_message_in_its_folder(gmail):
    done = gmail.add_label("SEO/Done")
    first, second = unread(gmail, "first", "second")
    results = apply(gmail_mailbox(), [item(1, first, LABEL, "SEO/Done"), item(2, second, LABEL, "STARRED")])
    assert results == {1: PostActionResult(DONE), 2: PostActionResult(DONE)}
    assert gmail.labels_of(first) == ["INBOX", "UNREAD", done]
    assert gmail.labels_of(second) == ["INBOX", "UNREAD", "STARRED"]


def test_a_destination_that_is_no_label_is_an_error_naming_it_and_no_label_is_made(gmail):
    mid, = unread(gmail, "m")
    results = apply(gmail_mailbox(), [item(1, mid, LABEL, "Nope"), item(2, mid, MOVE, "Archive/2024")])
    assert results == {1: PostActionResult(ERROR, "no Gmail label named 'Nope'"),
                       2: PostActionResult(ERROR, "no Gmail label named 'Archive/2024'")}
    assert gmail.modified() == [] and gmail.user_labels == {}
    assert gmail.labels_of(mid) == ["INBOX", "UNREAD"]


def test_a_message_deleted_since_it_was_read_is_gone_and_the_others_are_changed(gmail):
    deleted, kept = unread(gmail, "deleted", "kept")
    mailbox = gmail_mailbox()
    with for_mailbox(mailbox) as provider:
        read(provider)
        gmail.delete(deleted)
        results = provider.apply_post_actions("INBOX", [item(1, deleted, MARK_READ), item(2, kept, MARK_READ)])
    assert results == {1: PostActionResult(GONE, GONE_DETAIL), 2: PostActionResult(DONE)}
    assert [c.path.rsplit("/", 2)[1] for c in gmail.modified()] == [deleted, kept]
    assert gmail.labels_of(kept) == ["INBOX"]


# -- refusals -------------------------------------------------------------------------------

@pytest.mark.parametrize(("status", "reason", "detail"), [
    (500, "backendError", "Gmail refused to change the message (HTTP 500: Internal error encountered.)"),
    (400, "failedPrecondition", "Gmail refused to change the message (HTTP 400: Precondition check failed.)"),
])
def test_a_refused_change_is_that_messages_error_and_the_next_message_is_changed(gmail, status, reason, detail):
    refused, changed = unread(gmail, "refused", "changed")
    gmail.modify_errors = [(status, reason)]
    results = apply(gmail_mailbox(), [item(1, refused, MARK_READ), item(2, changed, MARK_READ)])
    assert results == {1: PostActionResult(ERROR, detail), 2: PostActionResult(DONE)}
    assert gmail.labels_of(refused) == ["INBOX", "UNREAD"] and gmail.labels_of(changed) == ["INBOX"]


def test_a_read_only_user_grant_is_every_items_error_saying_to_reconnect_after_one_call(gmail, caplog):
    caplog.set_level(logging.DEBUG)
    gmail.refresh_scopes = READONLY  # the user consented to reading only
    first, second = unread(gmail, "first", "second")
    results = apply(gmail_mailbox(auth="oauth"), [item(1, first, MARK_READ), item(2, second, MOVE, "TRASH")])
    detail = ("Gmail refused to change the message (HTTP 403: Request had insufficient authentication scopes.): "
              "the mailbox's grant may be read-only; reconnect the mailbox to allow changes")
    assert results == {1: PostActionResult(ERROR, detail), 2: PostActionResult(ERROR, detail)}
    assert len(gmail.modified()) == 1  # the scope is the grant's: the second message was not tried
    assert gmail.labels_of(first) == ["INBOX", "UNREAD"]
    assert not any(token in caplog.text for token in gmail.issued)


def test_a_service_account_refused_for_want_of_scope_says_what_the_delegation_must_include(gmail):
    first, second = unread(gmail, "first", "second")
    gmail.modify_errors = [(403, "insufficientPermissions")]  # Gmail's older shape: errors[].reason only
    results = apply(gmail_mailbox(), [item(1, first, MARK_READ), item(2, second, MARK_READ)])
    detail = ("Gmail refused to change the message (HTTP 403: Insufficient Permission): the domain-wide "
              f"delegation must include {MODIFY} for post-actions")
    assert results == {1: PostActionResult(ERROR, detail), 2: PostActionResult(ERROR, detail)}
    assert len(gmail.modified()) == 1


def test_a_throttled_change_is_paced_and_tried_again(gmail):
    mid, = unread(gmail, "m")
    with for_mailbox(gmail_mailbox()) as provider:
        read(provider)
        gmail.throttle, gmail.throttle_retry_after = [(429, "rateLimitExceeded")], "0"
        assert provider.apply_post_actions("INBOX", [item(1, mid, MARK_READ)]) == {1: PostActionResult(DONE)}
    assert gmail.throttle == [] and len(gmail.modified()) == 1 and gmail.labels_of(mid) == ["INBOX"]


# -- scopes of a service account ------------------------------------------------------------

def test_a_service_account_asks_for_gmail_modify_only_to_change_messages(gmail):
    first, second = unread(gmail, "first", "second")
    with for_mailbox(gmail_mailbox()) as provider:
        assert sorted(read(provider)[0]) == sorted([first, second])
        assert [grant["scope"] for grant in gmail.grants] == [READONLY]

        assert provider.apply_post_actions("INBOX", [item(1, first, MARK_READ)]) == {1: PostActionResult(DONE)}
        assert provider.apply_post_actions("INBOX", [item(2, second, MARK_READ)]) == {2: PostActionResult(DONE)}
    # The fake holds tokens to their scopes: the changes went with the gmail.modify token, asked for once.
    assert [grant["scope"] for grant in gmail.grants] == [READONLY, MODIFY]
    assert gmail.labels_of(first) == gmail.labels_of(second) == ["INBOX"]


def test_a_delegation_that_allows_reading_only_still_reads_and_post_actions_say_what_to_grant(gmail):
    gmail.delegated_scopes = {READONLY}
    first, second = unread(gmail, "first", "second")
    with for_mailbox(gmail_mailbox()) as provider:
        assert sorted(read(provider)[0]) == sorted([first, second])
        results = provider.apply_post_actions("INBOX", [item(1, first, MARK_READ), item(2, second, LABEL, "STARRED")])
    assert {result.outcome for result in results.values()} == {ERROR} and len(results) == 2
    detail = results[1].detail
    assert results[2].detail == detail
    assert detail.startswith("Google refused service account ") and "(unauthorized_client: " in detail
    assert f"the domain-wide delegation of client id 100000000000000000001 must include {MODIFY}" in detail
    assert "PRIVATE KEY" not in detail
    assert service_account_key(gmail.token_uri)["private_key"].splitlines()[1] not in detail
    assert gmail.modified() == [] and gmail.token_requests == 2  # the read's, and one refused for writing
    assert gmail.labels_of(first) == gmail.labels_of(second) == ["INBOX", "UNREAD"]


# -- a session that ends -----------------------------------------------------------------------

def test_an_interrupted_session_raises_and_changes_nothing_after(gmail):
    first, second = unread(gmail, "first", "second")
    with for_mailbox(gmail_mailbox()) as provider:
        read(provider)
        provider.interrupt("the poll's deadline of 1 s passed")
        with pytest.raises(PollInterrupted, match="the poll's deadline of 1 s passed"):
            provider.apply_post_actions("INBOX", [item(1, first, MARK_READ)])
    assert gmail.modified() == []


def test_a_session_cut_during_a_change_raises_and_the_next_message_is_not_tried(gmail):
    first, second = unread(gmail, "first", "second")
    with for_mailbox(gmail_mailbox()) as provider:
        read(provider)
        gmail.after.append(lambda call: call.method == "POST" and provider.interrupt("pollmail is stopping"))
        with pytest.raises(PollInterrupted, match="pollmail is stopping"):
            provider.apply_post_actions("INBOX", [item(1, first, MARK_READ), item(2, second, MARK_READ)])
    assert len(gmail.modified()) == 1 and gmail.labels_of(second) == ["INBOX", "UNREAD"]


def test_an_api_that_cannot_be_reached_raises_naming_it(gmail, settings):
    mid, = unread(gmail, "m")
    settings.MAILPOLL_GMAIL_API_URL = f"http://127.0.0.1:{free_port()}/"
    with for_mailbox(gmail_mailbox(auth="oauth")) as provider:
        with pytest.raises(ProviderError, match=r"Gmail API at http://127\.0\.0\.1:\d+ could not be reached"):
            provider.apply_post_actions("INBOX", [item(1, mid, MARK_READ)])
    assert gmail.labels_of(mid) == ["INBOX", "UNREAD"]


# -- the next poll ------------------------------------------------------------------------------

def test_the_next_poll_reads_what_arrived_meanwhile_and_nothing_the_post_actions_changed(gmail):
    gmail.add_label("Archive")
    read_before = unread(gmail, "read", "labelled", "moved")
    mailbox = gmail_mailbox(folders=["INBOX", "Archive"])
    with for_mailbox(mailbox) as provider:
        ids, cursor = read(provider)
        assert sorted(ids) == sorted(read_before)
        arrived = gmail.add(mail("arrived meanwhile"))
        results = provider.apply_post_actions("INBOX", [item(1, read_before[0], MARK_READ),
                                                        item(2, read_before[1], LABEL, "Archive"),
                                                        item(3, read_before[2], MOVE, "Archive")])
    assert {result.outcome for result in results.values()} == {DONE}
    # The changes are history after the cursor, in the INBOX's own records too (the label and the mark read).
    changed = [(mid, kind) for hid, mid, kind, _ in gmail.state.history if hid > int(cursor)]
    assert {(read_before[0], "labelRemoved"), (read_before[1], "labelAdded"), (read_before[2], "labelAdded"),
            (read_before[2], "labelRemoved"), (arrived, "messageAdded")} == set(changed)

    with for_mailbox(mailbox) as provider:
        again, after = read(provider, cursor=cursor)
    assert again == [arrived]
    assert after == str(gmail.history_id)



# -- through the poll ----------------------------------------------------------------------------------------------

def test_the_poll_applies_the_mailbox_s_post_action_to_what_it_stored(gmail):
    gmail.add_label("Processed")
    [first] = unread(gmail, "first")
    mailbox = gmail_mailbox(post_action="move", post_action_folder="Processed")
    poll_now(mailbox)
    action = PostAction.objects.get(mailbox=mailbox)
    assert (action.provider_ref, action.status, action.attempts) == (first, "done", 1)
    assert "INBOX" not in gmail.labels_of(first) and mailbox.last_error == ""

    [second] = unread(gmail, "second")
    poll_now(mailbox)
    assert sorted(Request.objects.values_list("provider_ref", flat=True)) == sorted([first, second])
    assert PostAction.objects.get(provider_ref=second).status == "done"


def test_a_read_only_grant_leaves_post_actions_waiting_and_intake_going_on(gmail):
    gmail.refresh_scopes = READONLY  # connected before post-actions were turned on
    unread(gmail, "first")
    mailbox = gmail_mailbox(auth="oauth", post_action="mark_read")
    poll_now(mailbox)
    action = PostAction.objects.get(mailbox=mailbox)
    assert (action.status, action.attempts) == ("pending", 1) and "reconnect" in action.last_error
    assert Request.objects.filter(mailbox=mailbox).count() == 1 and mailbox.last_error == ""
