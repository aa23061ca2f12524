"""Three `pollmail` processes over the same ten mailboxes, one killed -9 midway: exactly one Request per message."""

from datetime import timedelta

import pytest

from mailpoll.models import FolderCursor, Request
from tests.factories import OrgFactory
from tests.mailpoll.factories import MailboxFactory, mail
from tests.support.processes import ManagedProcess, process_env, wait_for

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

MAILBOXES = 10
PER_MAILBOX = 200


def test_three_pollers_one_killed_store_each_message_once(dovecot, processes, media):
    orgs = [OrgFactory(id="org-a"), OrgFactory(id="org-b")]
    mailboxes = []
    for n in range(MAILBOXES):
        user, password = dovecot.add_user()
        mailboxes.append(MailboxFactory(org=orgs[n // 5], host=dovecot.host, port=dovecot.port, username=user,
                                        password=password, initial_mode="full",
                                        poll_interval=timedelta(seconds=1)))
        dovecot.append_many(user, "INBOX", [mail(f"mb{n}-{i}") for i in range(PER_MAILBOX)])
    # One message delivered to two mailboxes of org-a and one of org-b.
    shared = mail("shared")
    for mailbox in (mailboxes[0], mailboxes[1], mailboxes[5]):
        dovecot.append(mailbox.username, "INBOX", shared)

    env = process_env(MEDIA_ROOT=media, MAILPOLL_FETCH_BATCH=20)
    pollers = [processes(lambda: ManagedProcess("pollmail", "--interval", "0.3", env=env)) for _ in range(3)]

    # kill -9 one replica mid-intake: what it was polling becomes due again and another one finishes it.
    wait_for(lambda: Request.objects.count() >= 300, timeout=120, interval=0.05, message="300 messages stored")
    pollers[0].kill9()
    assert pollers[0].wait(timeout=10) == -9

    expected = MAILBOXES * PER_MAILBOX + 2  # the shared message: once in org-a, once in org-b

    def all_cursors_at_the_end():
        ends = dict(FolderCursor.objects.values_list("mailbox_id", "last_uid"))
        return len(ends) == MAILBOXES and all(
            ends[mb.pk] == PER_MAILBOX + (1 if mb in (mailboxes[0], mailboxes[1], mailboxes[5]) else 0)
            for mb in mailboxes)

    wait_for(all_cursors_at_the_end, timeout=180, interval=0.5, message="every cursor to reach its last UID")
    assert Request.objects.count() == expected
    assert Request.objects.filter(subject="shared").count() == 2
    assert set(Request.objects.filter(subject="shared").values_list("org_id", flat=True)) == {"org-a", "org-b"}
    for n in range(len(mailboxes)):
        assert Request.objects.filter(subject__startswith=f"mb{n}-").count() == PER_MAILBOX
