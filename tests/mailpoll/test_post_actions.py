"""Post-actions against a real Dovecot: mark read, move (MOVE, and COPY + STORE + UID EXPUNGE), retries, cursors."""

from datetime import timedelta

import pytest
from django.utils import timezone

from mailpoll import post_actions
from mailpoll.models import FolderCursor, PostAction, PostActionStatus, Request
from mailpoll.providers import ProviderError, for_mailbox
from mailpoll.providers.imap import ImapProvider
from mailpoll.sync.after_store import apply_due
from mailpoll.sync.store import store_message
from tests.mailpoll.factories import CSV, MailRuleFactory, mail, poll_now

pytestmark = pytest.mark.django_db

SEEN, DELETED = rb"\Seen", rb"\Deleted"
REPORT = [("report.csv", CSV, "text/csv")]  # a document, so that the rules decide something


def make_due():
    """As if the retry delay had passed."""
    PostAction.objects.filter(status=PostActionStatus.PENDING).update(next_try_at=timezone.now())


def test_mark_read_after_storing(dovecot, imap_mailbox):
    mailbox = imap_mailbox(initial_mode="full", post_action="mark_read")
    dovecot.append_many(mailbox.username, "INBOX", [mail("one"), mail("two")])

    poll_now(mailbox)

    assert Request.objects.count() == 2
    assert all(SEEN in dovecot.flags(mailbox.username, "INBOX", uid) for uid in (1, 2))
    actions = list(PostAction.objects.order_by("uid"))
    assert [(a.uid, a.status, a.attempts, a.decided_by) for a in actions] == [
        (1, "done", 1, "the mailbox"), (2, "done", 1, "the mailbox")]
    assert actions[0].uidvalidity == dovecot.uidvalidity(mailbox.username, "INBOX")
    assert mailbox.last_error == ""


def test_no_post_action_leaves_the_read_state_alone(dovecot, imap_mailbox):
    mailbox = imap_mailbox(initial_mode="full")
    dovecot.append(mailbox.username, "INBOX", mail("one"))
    poll_now(mailbox)
    assert Request.objects.count() == 1 and not PostAction.objects.exists()
    assert SEEN not in dovecot.flags(mailbox.username, "INBOX", 1)


def test_move_keeps_the_cursor_rules(dovecot, imap_mailbox):
    mailbox = imap_mailbox(initial_mode="full", post_action="move", post_action_folder="Processed")
    dovecot.create_folder(mailbox.username, "Processed")
    dovecot.append_many(mailbox.username, "INBOX", [mail(f"m{i}") for i in range(3)])

    poll_now(mailbox)
    assert dovecot.uids(mailbox.username, "INBOX") == []
    assert dovecot.message_count(mailbox.username, "Processed") == 3
    assert FolderCursor.objects.get(mailbox=mailbox).last_uid == 3

    # New mail after the move: taken once, nothing moved away is fetched again, nothing skipped.
    dovecot.append_many(mailbox.username, "INBOX", [mail("m3"), mail("m4")])
    poll_now(mailbox)
    assert sorted(Request.objects.values_list("subject", flat=True)) == ["m0", "m1", "m2", "m3", "m4"]
    assert FolderCursor.objects.get(mailbox=mailbox).last_uid == 5
    assert dovecot.message_count(mailbox.username, "Processed") == 5
    assert set(PostAction.objects.values_list("status", flat=True)) == {"done"}


def test_without_move_a_copy_then_uid_expunge_of_those_uids_only(dovecot, imap_mailbox, monkeypatch):
    monkeypatch.setattr(ImapProvider, "server_moves", lambda self: False)
    mailbox = imap_mailbox(initial_mode="full")
    dovecot.create_folder(mailbox.username, "Processed")
    MailRuleFactory(org=mailbox.org, name="reports", sender="reports.example", action="ignore",
                    post_action="move", post_action_folder="Processed")
    # The user's own message, marked deleted but not expunged: a plain EXPUNGE would remove it too.
    dovecot.append(mailbox.username, "INBOX", mail("kept", attachments=REPORT), flags=[DELETED])
    dovecot.append(mailbox.username, "INBOX", mail("report", sender="bot@reports.example", attachments=REPORT))

    poll_now(mailbox)

    [action] = PostAction.objects.all()
    assert (action.status, action.decided_by) == ("done", "rule 'reports'")
    assert dovecot.uids(mailbox.username, "INBOX") == [1]
    assert DELETED in dovecot.flags(mailbox.username, "INBOX", 1)
    assert dovecot.message_count(mailbox.username, "Processed") == 1


def test_a_rule_may_leave_its_messages_alone(dovecot, imap_mailbox):
    mailbox = imap_mailbox(initial_mode="full", post_action="mark_read")
    MailRuleFactory(org=mailbox.org, name="drafts", subject_contains="draft", action="ignore", post_action="leave")
    dovecot.append_many(mailbox.username, "INBOX", [mail("a draft", attachments=REPORT),
                                                    mail("final", attachments=REPORT)])
    poll_now(mailbox)
    assert SEEN not in dovecot.flags(mailbox.username, "INBOX", 1)
    assert SEEN in dovecot.flags(mailbox.username, "INBOX", 2)
    assert PostAction.objects.get().request.subject == "final"


def test_a_failing_post_action_is_retried_later_and_never_blocks_intake(dovecot, imap_mailbox):
    mailbox = imap_mailbox(initial_mode="full", post_action="move", post_action_folder="Archive")
    dovecot.append(mailbox.username, "INBOX", mail("first"))

    before = timezone.now()
    poll_now(mailbox)
    action = PostAction.objects.get()
    assert (action.status, action.attempts) == ("pending", 1)
    assert "Archive" in action.last_error
    assert action.next_try_at >= before + timedelta(seconds=post_actions.FIRST_DELAY)
    assert mailbox.last_error == "" and mailbox.consecutive_failures == 0  # the poll itself succeeded
    assert dovecot.uids(mailbox.username, "INBOX") == [1]

    # Not due yet: the next poll stores new mail and leaves the post-action alone.
    dovecot.append(mailbox.username, "INBOX", mail("second"))
    poll_now(mailbox)
    assert Request.objects.count() == 2
    assert PostAction.objects.get(request__subject="first").attempts == 1

    dovecot.create_folder(mailbox.username, "Archive")
    make_due()
    poll_now(mailbox)
    assert dovecot.uids(mailbox.username, "INBOX") == []
    assert dovecot.message_count(mailbox.username, "Archive") == 2
    assert list(PostAction.objects.order_by("uid").values_list("status", "attempts", "last_error")) == [
        ("done", 2, ""), ("done", 2, "")]


def test_a_message_gone_from_the_folder_is_gone_not_failed(dovecot, imap_mailbox):
    mailbox = imap_mailbox(initial_mode="full", post_action="move", post_action_folder="Archive")
    dovecot.append_many(mailbox.username, "INBOX", [mail("one"), mail("two")])
    poll_now(mailbox)  # no Archive yet: both wait
    dovecot.expunge(mailbox.username, "INBOX", [1])
    dovecot.create_folder(mailbox.username, "Archive")
    make_due()
    poll_now(mailbox)
    assert dict(PostAction.objects.values_list("uid", "status")) == {1: "gone", 2: "done"}
    assert "no longer in INBOX" in PostAction.objects.get(uid=1).last_error


def test_a_new_uidvalidity_never_lets_an_old_uid_touch_another_message(dovecot, imap_mailbox):
    mailbox = imap_mailbox(initial_mode="full", post_action="move", post_action_folder="Archive")
    dovecot.append(mailbox.username, "INBOX", mail("old"))
    poll_now(mailbox)  # no Archive: waits
    dovecot.change_uidvalidity(mailbox.username, "INBOX")  # uid 1 may now name any message
    dovecot.create_folder(mailbox.username, "Archive")
    old = PostAction.objects.get()
    make_due()
    # Before any poll rereads the folder (whose messages would get post-actions of the new generation).
    with for_mailbox(mailbox) as provider:
        applied = apply_due(provider, mailbox)
    old.refresh_from_db()
    assert applied.gone == 1 and old.status == "gone" and "UIDVALIDITY" in old.last_error
    assert dovecot.uids(mailbox.username, "INBOX") == [1]
    assert dovecot.message_count(mailbox.username, "Archive") == 0


def test_out_of_attempts_it_fails_and_an_operator_can_try_again(dovecot, imap_mailbox):
    mailbox = imap_mailbox(initial_mode="full", post_action="move", post_action_folder="Nowhere")
    dovecot.append(mailbox.username, "INBOX", mail("one"))
    for _ in range(post_actions.MAX_ATTEMPTS):
        make_due()
        poll_now(mailbox)
    action = PostAction.objects.get()
    assert (action.status, action.attempts) == ("failed", post_actions.MAX_ATTEMPTS)
    assert action.finished_at is not None and "Nowhere" in action.last_error

    dovecot.create_folder(mailbox.username, "Nowhere")
    assert post_actions.try_again([action.pk], by="test") == 1
    poll_now(mailbox)
    action.refresh_from_db()
    assert (action.status, action.attempts) == ("done", 1)
    assert dovecot.message_count(mailbox.username, "Nowhere") == 1


def test_a_claimed_post_action_is_not_claimed_again_until_its_lease_ends(imap_mailbox):
    mailbox = imap_mailbox(initial_mode="full", post_action="mark_read")
    stored = store_message(mailbox, "INBOX", 9, mail("two"), uidvalidity=1)
    first = post_actions.claim(mailbox.pk)
    assert [item.id for item, _ in first["INBOX"]] == [PostAction.objects.get(request_id=stored.request_id).pk]
    assert post_actions.claim(mailbox.pk) == {}
    PostAction.objects.update(next_try_at=timezone.now())  # the lease ended (its claimer died)
    [(item, attempts)] = post_actions.claim(mailbox.pk)["INBOX"]
    assert attempts == 2


def test_a_uid_without_its_uidvalidity_gets_no_post_action(imap_mailbox):
    mailbox = imap_mailbox(initial_mode="full", post_action="mark_read")
    store_message(mailbox, "INBOX", 3, mail("one"))
    assert Request.objects.count() == 1 and not PostAction.objects.exists()


def test_a_session_lost_during_post_actions_is_every_item_s_error_and_not_the_poll_s(dovecot, imap_mailbox,
                                                                                      monkeypatch):
    mailbox = imap_mailbox(initial_mode="full", post_action="mark_read", folders=["INBOX", "Reports"])
    dovecot.create_folder(mailbox.username, "Reports")
    dovecot.append(mailbox.username, "INBOX", mail("one"))
    dovecot.append(mailbox.username, "Reports", mail("two"))
    calls = []

    def drop(self, folder, items):
        calls.append(folder)
        self.close()  # the connection is gone: what the first folder's commands would meet
        raise ProviderError(f"{folder}: connection lost")

    monkeypatch.setattr(ImapProvider, "apply_post_actions", drop)
    poll_now(mailbox)

    assert len(calls) == 1  # no command is sent on a session known to be lost
    assert set(PostAction.objects.values_list("status", "attempts")) == {("pending", 1)}
    assert all("connection lost" in error for error in PostAction.objects.values_list("last_error", flat=True))
    assert mailbox.last_error == "" and Request.objects.count() == 2
