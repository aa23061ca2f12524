"""Mail that arrives while a live loop is between IDLEs is not left for the silence check (real Dovecot).

Dovecot tells a session about new mail in the answer to whatever command comes
next: inside a read's SEARCH or FETCH, or bundled with IDLE's ``+ idling``. In
both places a naive loop misses it (imaplib files the first aside; the second
sits in its buffer, where a socket poll does not see it), and the message waits
for the next change or for MAILPOLL_LIVE_MAX_SILENCE.
"""

import threading

import pytest

from mailpoll.sync.live import LiveSupervisor, means_new_mail
from mailpoll.models import Request
from mailpoll.sync.poller import Poller
from mailpoll.providers import for_mailbox
from mailpoll.sync.store import store_messages
from tests.mailpoll.factories import mail
from tests.mailpoll.test_live import LIVE_ENV, live_mailbox
from tests.support.processes import wait_for

# Dovecot holds a change notice for half a second before a session may be told.
NOTICE_DELAY = 0.8


@pytest.mark.django_db
def test_news_sent_with_the_idle_go_ahead_is_returned_by_idle_start(dovecot):
    user, mailbox = live_mailbox(dovecot)
    with for_mailbox(mailbox) as provider:
        provider.folder_status("INBOX")
        dovecot.append(user, "INBOX", mail("Landed before IDLE"))
        threading.Event().wait(NOTICE_DELAY)

        heard = provider.idle_start()
        if not means_new_mail(heard):
            heard += provider.idle_wait(2)
        provider.idle_end()

    assert means_new_mail(heard)


@pytest.mark.django_db
def test_news_inside_a_reads_answer_is_seen_after_the_read(dovecot):
    user, mailbox = live_mailbox(dovecot)
    with for_mailbox(mailbox) as provider:
        provider.folder_status("INBOX")
        provider.search("all")
        assert not provider.new_mail_during_read()

        dovecot.append(user, "INBOX", mail("Landed during the read"))
        threading.Event().wait(NOTICE_DELAY)
        provider.search("all")  # Dovecot reports the new count in this command's answer
        assert provider.new_mail_during_read()

        provider.folder_status("INBOX")  # a new read starts from the new count
        assert not provider.new_mail_during_read()


@pytest.mark.django_db(transaction=True)
def test_a_message_arriving_during_a_live_read_is_stored_without_waiting_for_the_silence_check(
        dovecot, settings, media):
    for name, value in LIVE_ENV.items():  # the silence check is a minute away
        setattr(settings, name, value)
    user, mailbox = live_mailbox(dovecot)
    mailbox.initial_mode = "full"
    mailbox.save()
    dovecot.append(user, "INBOX", mail("Already there"))
    late_sent = threading.Event()

    def store_then_deliver_one_more(mb, folder, fetched, **generation):
        stored = store_messages(mb, folder, fetched, **generation)
        if not late_sent.is_set():
            late_sent.set()
            dovecot.append(user, "INBOX", mail("Arrived mid-read"))
            threading.Event().wait(NOTICE_DELAY)
        return stored

    stop = threading.Event()
    supervisor = LiveSupervisor(Poller(store_messages=store_then_deliver_one_more).folder_sync, stop).start()
    try:
        wait_for(lambda: Request.objects.filter(subject="Already there").exists(), timeout=30,
                 message="the first read")
        wait_for(lambda: Request.objects.filter(subject="Arrived mid-read").exists(), timeout=20,
                 message="the message that arrived during the first read, well before the silence check")
    finally:
        stop.set()
        supervisor.join()
