"""One bad mailbox never holds the others or the shutdown: concurrent polls, SIGTERM through a blocked
socket, and a failure during a database outage recorded once the database is back."""

import signal
import threading
import time
from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from mailpoll.models import Mailbox, Request
from mailpoll.sync.poller import Poller
from tests.mailpoll.factories import MailboxFactory, mail, mailbox_on
from tests.support.processes import ManagedProcess, process_env, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def DB() -> str:
    return connection.settings_dict["NAME"]


def database_admin() -> psycopg.Connection:
    """A connection to the server's ``postgres`` database (ALTER DATABASE cannot target the current one)."""
    s = connection.settings_dict
    return psycopg.connect(host=s["HOST"], port=s["PORT"] or 5432, user=s["USER"], password=s["PASSWORD"] or None,
                           dbname="postgres", autocommit=True, connect_timeout=5)


def backends() -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
        return cur.fetchone()[0]


def test_mailboxes_are_polled_at_once_each_on_its_own_connections(fake_imap, dovecot, settings):
    settings.MAILPOLL_POLL_DEADLINE = 3
    server = fake_imap(silent=True)
    hung = [mailbox_on(server) for _ in range(3)]
    user, password = dovecot.add_user()
    healthy = MailboxFactory(host=dovecot.host, port=dovecot.port, username=user, password=password)
    dovecot.append(user, "INBOX", mail("through"))
    before = backends()

    settings.MAILPOLL_CONCURRENCY = 4
    polled = Poller().cycle()

    assert sorted(polled) == sorted(mb.pk for mb in [*hung, healthy])
    assert server.max_open == 3  # the three hung polls were waiting side by side, not one after another
    assert list(Request.objects.values_list("subject", flat=True)) == ["through"]
    for mailbox in hung:
        mailbox.refresh_from_db()
        assert "deadline of 3 s passed" in mailbox.last_error
    # Every poll thread closed its database connection (an earlier test's leftover one may close meanwhile);
    # a backend exits a moment after its client closed, so a leak is a count that never comes back down.
    wait_for(lambda: backends() <= before, timeout=10, message="the poll threads' backends gone")


def test_a_hung_server_holds_one_thread_while_the_others_claim_and_poll_the_rest(fake_imap, settings):
    from tests.support.loopback import free_port

    settings.MAILPOLL_POLL_DEADLINE, settings.MAILPOLL_CLAIM_LIMIT, settings.MAILPOLL_CONCURRENCY = 3, 2, 2
    hung = mailbox_on(fake_imap(silent=True))
    closed = free_port()  # nothing listens: each of these polls fails at once
    quick = [MailboxFactory(port=closed, site_target=None) for _ in range(5)]

    polled = Poller().cycle()  # one cycle: its first claim takes 2, freed threads claim the rest

    assert sorted(polled) == sorted(mb.pk for mb in [hung, *quick])
    assert polled[-1] == hung.pk  # the others were polled while it hung, not after it
    hung.refresh_from_db()
    assert "deadline of 3 s passed" in hung.last_error


def test_the_concurrency_setting_bounds_the_polls_at_once(fake_imap, settings):
    settings.MAILPOLL_POLL_DEADLINE = 1
    server = fake_imap(silent=True)
    for _ in range(4):
        mailbox_on(server)
    settings.MAILPOLL_CONCURRENCY = 2
    Poller().cycle()
    assert server.accepted == 4 and server.max_open == 2


@pytest.mark.processes
@pytest.mark.parametrize("misbehaviour", [{"silent": True}, {"trickle_on": "EXAMINE"}], ids=["silent", "trickling"])
@pytest.mark.parametrize("mailboxes", [1, 2], ids=["alone", "on-the-pool"])
def test_sigterm_interrupts_polls_blocked_on_a_server_within_seconds(fake_imap, processes, media, misbehaviour,
                                                                     mailboxes):
    server = fake_imap([mail("m")], **misbehaviour)
    for _ in range(mailboxes):
        mailbox_on(server, poll_interval=timedelta(seconds=1))
    # The default deadline (300 s) and socket timeout (60 s): only the shutdown may end these polls.
    poller = processes(lambda: ManagedProcess("pollmail", "--interval", "0.5", env=process_env(MEDIA_ROOT=media)))
    assert server.wait_for_connections(mailboxes, timeout=30), poller.output()
    if "trickle_on" in misbehaviour:
        wait_for(lambda: server.commands.count("EXAMINE") == mailboxes, timeout=30,
                 message="the polls to be trickled at")

    signalled = time.monotonic()
    poller.signal(signal.SIGTERM)
    assert poller.wait(timeout=10) == 0
    assert time.monotonic() - signalled < 10
    assert "SIGTERM received" in poller.output()
    # Cut by the shutdown is not the server's fault: nothing recorded, no backoff.
    assert not Mailbox.objects.filter(consecutive_failures__gt=0).exists()


@pytest.mark.processes
def test_a_failure_during_a_database_outage_is_recorded_once_the_database_is_back(fake_imap, processes, media):
    server = fake_imap(silent=True)
    mailbox = mailbox_on(server, poll_interval=timedelta(hours=1))
    env = process_env(MEDIA_ROOT=media, MAILPOLL_POLL_DEADLINE=3)
    poller = processes(lambda: ManagedProcess("pollmail", "--interval", "0.5", env=env))
    assert server.wait_for_connections(1, timeout=30), poller.output()
    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        test_backend = cur.fetchone()[0]  # the test's own connection lives through the outage

    with database_admin() as admin:
        # The outage: no new connection to the test database (superusers included), the open ones killed.
        admin.execute(f'ALTER DATABASE "{DB()}" WITH ALLOW_CONNECTIONS false')
        try:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE datname = %s AND pid <> %s", [DB(), test_backend])
            wait_for(lambda: "could not record its failure" in poller.output(), timeout=30,
                     message="the poll to fail while the database is down")
            outage_ended = timezone.now()
        finally:
            admin.execute(f'ALTER DATABASE "{DB()}" WITH ALLOW_CONNECTIONS true')

    def recorded():
        mailbox.refresh_from_db()
        return mailbox.last_error

    wait_for(recorded, timeout=30, message="the failure to be recorded after the outage")
    assert "deadline of 3 s passed" in mailbox.last_error
    assert f"{server.host}:{server.port}" in mailbox.last_error
    assert mailbox.last_error_at < outage_ended  # the time it happened, not the time it could be written
    assert mailbox.consecutive_failures == 1
    assert poller.alive()
    assert server.accepted == 1  # poll_interval 1 h: the mailbox was not polled again meanwhile


def test_stop_cuts_a_blocked_poll_after_its_grace(fake_imap, settings):
    """The in-process API the signal handler uses: stop() ends a poll stuck in a read."""
    server = fake_imap(hang_on="LOGIN")
    mailbox = mailbox_on(server)
    poller = Poller()
    result = {}

    def run():
        try:
            result["polled"] = poller.cycle()
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert server.wait_for_connections(1)
    poller.stop()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert result["polled"] == [mailbox.pk]
    mailbox.refresh_from_db()
    assert mailbox.consecutive_failures == 0 and not mailbox.last_error
