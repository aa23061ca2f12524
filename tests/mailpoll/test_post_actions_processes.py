"""Two `pollmail` processes over mailboxes that move what they store: each message stored once, moved once."""

from datetime import timedelta

import pytest

from mailpoll.models import PostAction, Request
from tests.factories import OrgFactory
from tests.mailpoll.factories import MailboxFactory, mail
from tests.support.processes import ManagedProcess, process_env, wait_for

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

MAILBOXES = 4
PER_MAILBOX = 60


def test_two_pollers_move_each_message_once(dovecot, processes, media):
    org = OrgFactory(id="movers")
    mailboxes = []
    for n in range(MAILBOXES):
        user, password = dovecot.add_user()
        dovecot.create_folder(user, "Processed")
        # A one-second interval: the two pollers' polls of one mailbox overlap, and so would their post-actions.
        mailboxes.append(MailboxFactory(org=org, host=dovecot.host, port=dovecot.port, username=user,
                                        password=password, initial_mode="full", poll_interval=timedelta(seconds=1),
                                        post_action="move", post_action_folder="Processed"))
        dovecot.append_many(user, "INBOX", [mail(f"mb{n}-{i}") for i in range(PER_MAILBOX)])

    env = process_env(MEDIA_ROOT=media, MAILPOLL_FETCH_BATCH=10)
    for _ in range(2):
        processes(lambda: ManagedProcess("pollmail", "--interval", "0.2", env=env))

    # New mail keeps coming while the first messages move.
    for n, mailbox in enumerate(mailboxes):
        dovecot.append_many(mailbox.username, "INBOX", [mail(f"mb{n}-late{i}") for i in range(5)])

    def all_moved():
        # A poller records a move after the server made it: wait for both, or the read may fall in between.
        return (all(dovecot.message_count(mb.username, "INBOX") == 0 for mb in mailboxes)
                and PostAction.objects.count() == MAILBOXES * (PER_MAILBOX + 5)
                and not PostAction.objects.exclude(status="done").exists())

    wait_for(all_moved, timeout=180, interval=0.5, message="every INBOX emptied and every move recorded")
    per_mailbox = PER_MAILBOX + 5
    assert Request.objects.count() == MAILBOXES * per_mailbox
    for mailbox in mailboxes:
        # Moved once each: a second UID MOVE of a message would find it gone, never copy it twice.
        assert dovecot.message_count(mailbox.username, "Processed") == per_mailbox
    outcomes = list(PostAction.objects.values_list("status", "attempts"))
    assert len(outcomes) == MAILBOXES * per_mailbox
    assert set(outcomes) == {("done", 1)}  # claimed once each: the lease kept the other poller off
