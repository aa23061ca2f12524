"""A poller killed after its UID MOVE but before recording it: the next poll finds the messages gone from the
folder and knows they went where its own earlier claim moved them — done, not ``gone`` as if a third party had
moved them (real Dovecot, real ``pollmail`` processes, a proxy holding the server's answer to the move)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from mailpoll import post_actions
from mailpoll.models import Mailbox, PostAction
from mailpoll.post_actions import ERROR, GONE, PostActionResult
from mailpoll.sync.store import store_message
from tests.mailpoll.factories import MailboxFactory, mail
from tests.support.holdproxy import HoldingProxy
from tests.support.processes import ManagedProcess, process_env

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

MESSAGES = 5


def test_a_poller_killed_between_its_move_and_its_record_leaves_moves_the_next_poll_records_done(
        dovecot, processes, media):
    user, password = dovecot.add_user()
    dovecot.create_folder(user, "Processed")
    dovecot.append_many(user, "INBOX", [mail(f"m{i}") for i in range(MESSAGES)])
    with HoldingProxy(dovecot.port) as proxy:
        mailbox = MailboxFactory(host=dovecot.host, port=proxy.port, username=user, password=password,
                                 initial_mode="full", poll_interval=timedelta(hours=1), post_action="move",
                                 post_action_folder="Processed")
        proxy.hold_at(b"COPYUID")  # Dovecot has moved the messages; its answer is kept from the poller
        env = process_env(MEDIA_ROOT=media)
        poller = processes(lambda: ManagedProcess("pollmail", "--interval", "0.5", env=env))
        assert proxy.wait_held(60), "pollmail never reached its UID MOVE"
        poller.kill9()
        proxy.release()

        assert (dovecot.message_count(user, "INBOX"), dovecot.message_count(user, "Processed")) == (0, MESSAGES)
        assert set(PostAction.objects.values_list("status", flat=True)) == {"pending"}  # nothing was recorded

        # Its lease (ten minutes) has run out, and the mailbox is polled again.
        PostAction.objects.update(next_try_at=timezone.now())
        Mailbox.objects.filter(pk=mailbox.pk).update(last_polled_at=None)
        again = processes(lambda: ManagedProcess("pollmail", "--once", env=env))
        assert again.wait(timeout=60) == 0, again.output()

    outcomes = set(PostAction.objects.values_list("status", "attempts", "last_error", "claimed_at"))
    assert outcomes == {("done", 2, "", None)}
    assert dovecot.message_count(user, "Processed") == MESSAGES


def test_an_error_between_does_not_erase_the_mark_of_a_claim_that_was_never_recorded():
    mailbox = MailboxFactory(post_action="move", post_action_folder="Processed")
    store_message(mailbox, "INBOX", 7, mail("m"), uidvalidity=1)

    def claim_after_the_lease():
        PostAction.objects.update(next_try_at=timezone.now())
        [(item, attempts)] = post_actions.claim(mailbox.pk)["INBOX"]
        return item, attempts

    first, _ = claim_after_the_lease()  # its poller is killed: nothing recorded
    second, attempts = claim_after_the_lease()
    assert (first.unrecorded, second.unrecorded) == (False, True)
    assert post_actions.record(mailbox.pk, second, attempts, PostActionResult(ERROR, "connection lost"))

    third, attempts = claim_after_the_lease()
    assert third.unrecorded  # the killed claim may still have moved it
    assert post_actions.record(mailbox.pk, third, attempts, PostActionResult(GONE, "uid 7 is no longer in INBOX"))
    assert PostAction.objects.values_list("status", "claimed_at").get() == ("done", None)
