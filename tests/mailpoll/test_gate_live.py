"""The live watcher's gate (issue 19, item 1): held back by a full outbox, a live mailbox queues a sender and
asks the gate again on its own short timer, so its waiting mail is read within seconds of there being room —
not at its next regular poll or silence check. A real ``pollmail`` process against the suite's Dovecot.
"""

import pytest

from jobs.models import Job
from mailpoll.models import Request
from mailpoll.sync.poller import Poller
from outbox.models import Entry
from outbox.wake import JOB_TYPE
from tests.mailpoll.factories import mail
from tests.mailpoll.test_live import live_mailbox, pollmail, watched
from tests.support.processes import wait_for

# Far longer than the test waits (and the mailbox is not due for an hour: ``live_mailbox``): only the gate's
# own timer can read the mail in time.
SILENCE = 120
WAIT_AT_MOST = 30


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_a_held_live_mailbox_wakes_a_sender_and_reads_its_mail_soon_after_there_is_room(dovecot, processes,
                                                                                        media):
    user, mailbox = live_mailbox(dovecot)
    Poller().poll(mailbox)  # its cursor, before the outbox fills
    Entry.objects.create(org=mailbox.org, document_ref="held-1", source="email", document={})  # full: capacity 1
    # No runjobs here: nothing drains the outbox but the test, and a woken sender stays queued for it to see.
    poller = pollmail(processes, media, DOWNSTREAM_URL="http://127.0.0.1:9/", OUTBOX_CAPACITY=1,
                      MAILPOLL_LIVE_MAX_SILENCE=SILENCE)
    wait_for(lambda: watched(mailbox), message="the mailbox to be watched")
    assert Job.objects.filter(type=JOB_TYPE, status="queued").exists(), "the held read queued no sender"

    dovecot.append(user, "INBOX", mail("waits on the server"))
    wait_for(lambda: "live new mail: the downstream outbox is full, nothing fetched" in poller.output(),
             message="the new mail's read to be held")
    assert not Request.objects.exists()

    Entry.objects.all().delete()  # drained
    wait_for(lambda: Request.objects.filter(subject="waits on the server").exists(), timeout=WAIT_AT_MOST,
             message="the waiting mail read once there is room, well before the silence check")
    # The read is logged after its rows are committed: wait for the line rather than race it.
    wait_for(lambda: "live room in the outbox: fetched=1 stored=1" in poller.output(),
             message="the read after the drain to be the gate's own (room in the outbox)")
