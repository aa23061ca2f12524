"""IMAP servers that lie or stall, through the real imapclient provider: what one of them can make a poller do."""

import threading
import time

import pytest
from django.db import connection

from mailpoll.models import FolderCursor, Mailbox, Request, RequestStatus
from mailpoll.sync.poller import Poller
from tests.mailpoll.factories import MailboxFactory, mail, mailbox_on
from tests.support.loopback import free_port

# Transactional: the cycle runs on a thread of its own (so a hang fails the test instead of the suite).
pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 100_000


def cycle(mailbox, poller=None, timeout=30):
    """One poll of this mailbox now; fails (instead of hanging the suite) if the cycle does not end in time."""
    Mailbox.objects.filter(pk=mailbox.pk).update(last_polled_at=None)
    done = threading.Event()
    outcome = {}

    def run():
        try:
            outcome["polled"] = (poller or Poller()).cycle()
        finally:
            connection.close()  # this thread's own
            done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(timeout), f"the poll cycle still runs after {timeout} s"
    mailbox.refresh_from_db()
    return outcome.get("polled")


def test_a_message_larger_than_announced_is_refused_unread_then_rejected_at_its_real_size(fake_imap, settings):
    settings.MAILPOLL_MAX_MESSAGE_BYTES = LIMIT
    liar = mail("liar", body="x" * 300_000)
    server = fake_imap([mail("honest"), liar], announce={2: 100})
    mailbox = mailbox_on(server)

    cycle(mailbox)
    assert not Request.objects.filter(subject="liar").exists()
    assert f"{server.host}:{server.port} INBOX:" in mailbox.last_error
    assert f"{len(liar):,}-byte literal for uid 2" in mailbox.last_error and "refused unread" in mailbox.last_error

    # The next poll knows the real size: the message is what any oversized one is, a rejected Request.
    cycle(mailbox)
    rejected = Request.objects.get(subject="liar")
    assert rejected.status == RequestStatus.REJECTED and rejected.size == len(liar)
    assert f"{len(liar):,} bytes, over the {LIMIT:,}-byte limit" in rejected.reject_reason
    assert Request.objects.get(subject="honest").status == RequestStatus.ACCEPTED
    assert FolderCursor.objects.get(mailbox=mailbox, folder="INBOX").last_uid == 2
    assert mailbox.consecutive_failures == 0


def test_a_message_that_arrives_whole_over_the_limit_is_not_accepted(fake_imap, settings):
    """Sent as a quoted string, not a literal: it is read, then measured, then dropped."""
    settings.MAILPOLL_MAX_MESSAGE_BYTES = LIMIT
    liar = mail("liar", body="x" * 300_000)
    server = fake_imap([mail("honest"), liar], announce={2: 100}, quoted=True)
    mailbox = mailbox_on(server)

    cycle(mailbox)
    assert not Request.objects.filter(subject="liar").exists()
    assert "uid 2" in mailbox.last_error and f"over the {LIMIT:,}-byte message limit" in mailbox.last_error

    cycle(mailbox)
    rejected = Request.objects.get(subject="liar")
    assert rejected.status == RequestStatus.REJECTED and rejected.size > LIMIT
    assert FolderCursor.objects.get(mailbox=mailbox, folder="INBOX").last_uid == 2


def test_a_four_gigabyte_literal_is_refused_before_any_of_it_is_read(fake_imap, settings):
    settings.MAILPOLL_MAX_MESSAGE_BYTES = LIMIT
    server = fake_imap([mail("bomb")], announce={1: 100}, huge_literal={1: 4_000_000_000})
    mailbox = mailbox_on(server)

    cycle(mailbox)  # no MemoryError, no wait for bytes that never come
    assert "4,000,000,000-byte literal for uid 1" in mailbox.last_error
    assert mailbox.consecutive_failures == 1

    cycle(mailbox)
    rejected = Request.objects.get()
    assert rejected.status == RequestStatus.REJECTED and rejected.size == 4_000_000_000


@pytest.mark.parametrize("misbehaviour", [{"trickle_on": "EXAMINE"}, {"silent": True}, {"hang_on": "FETCH"}],
                         ids=["trickles", "never-greets", "never-answers-fetch"])
@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_stalling_server_is_cut_at_the_deadline_and_the_other_mailboxes_are_polled(
        fake_imap, dovecot, settings, misbehaviour, concurrency):
    settings.MAILPOLL_POLL_DEADLINE = 2
    server = fake_imap([mail("never")], **misbehaviour)
    stalling = mailbox_on(server)
    user, password = dovecot.add_user()
    healthy = MailboxFactory(host=dovecot.host, port=dovecot.port, username=user, password=password)
    dovecot.append_many(user, "INBOX", [mail("m0"), mail("m1")])

    settings.MAILPOLL_CONCURRENCY = concurrency
    started = time.monotonic()
    polled = cycle(stalling, timeout=60)
    assert sorted(polled) == sorted([stalling.pk, healthy.pk])
    assert sorted(Request.objects.values_list("subject", flat=True)) == ["m0", "m1"]
    assert "deadline of 2 s passed" in stalling.last_error
    assert f"{server.host}:{server.port}" in stalling.last_error
    assert time.monotonic() - started < 30
    healthy.refresh_from_db()
    assert healthy.consecutive_failures == 0


def test_a_flood_of_untagged_lines_is_cut_at_the_response_limit(fake_imap, settings):
    """imaplib keeps every untagged line of a response: one response may not hold more than the fetch limit."""
    settings.MAILPOLL_MAX_MESSAGE_BYTES = settings.MAILPOLL_FETCH_MAX_BYTES = LIMIT
    server = fake_imap([mail("m")], trickle_on="EXAMINE", trickle_every=0)
    mailbox = mailbox_on(server)
    cycle(mailbox)
    assert f"{server.host}:{server.port} INBOX: one response brought over" in mailbox.last_error
    assert "deadline" not in mailbox.last_error


def test_a_timeout_names_the_server_and_the_folder(fake_imap, settings):
    settings.MAILPOLL_SOCKET_TIMEOUT = 0.5
    server = fake_imap([mail("m")], hang_on="SEARCH")
    mailbox = mailbox_on(server)
    cycle(mailbox)
    assert mailbox.last_error.startswith(f"timed out\n{server.host}:{server.port} INBOX: TimeoutError: timed out")


def test_a_refused_connection_names_the_server_and_backs_off():
    mailbox = MailboxFactory(host="127.0.0.1", port=free_port(), security="none")  # nothing listens there
    cycle(mailbox)
    assert mailbox.last_error.startswith(f"connection refused\n127.0.0.1:{mailbox.port}: ConnectionRefusedError")
    assert mailbox.next_attempt_at is not None


def test_a_refused_login_names_the_server_and_not_the_password(fake_imap):
    server = fake_imap([mail("m")])
    mailbox = mailbox_on(server)
    mailbox.set_secret("not-the-password")
    mailbox.save()
    cycle(mailbox)
    assert f"{server.host}:{server.port}" in mailbox.last_error and "login" in mailbox.last_error.lower()
    assert "not-the-password" not in mailbox.last_error


def test_an_unknown_security_never_falls_back_to_plaintext(fake_imap):
    """The CHECK constraint refuses such a row; a row read past it (or built in code) must not connect in clear."""
    from mailpoll.providers import for_mailbox
    from mailpoll.providers.base import ProviderError

    server = fake_imap()
    mailbox = mailbox_on(server)
    mailbox.security = "bogus"
    with pytest.raises(ProviderError, match="unknown security 'bogus'"):
        with for_mailbox(mailbox):
            pass
    assert server.accepted == 0
