"""Live mailboxes (IMAP IDLE inside pollmail, issue 12 §1): the pure decisions, then real pollmail processes
against the suite's Dovecot — new mail arrives through IDLE, one watcher across replicas, takeover after kill -9,
switching live without a restart, a killed IMAP session, SIGTERM."""

import logging
import os
import re
import signal
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from mailpoll.sync import live
from mailpoll.admin.display import EMPTY, live_state
from mailpoll.sync.live import (CHECK, REIDLE, WAIT, LiveSupervisor, Plan, backoff_delay, idle_step, means_new_mail,
                                reconcile)
from mailpoll.models import LiveWatch, Mailbox, Request
from mailpoll.sync.poller import Poller
from tests.mailpoll.factories import MailboxFactory, mail
from tests.mailpoll.test_imap_oauth import issuer, oauth_mailbox, xoauth2_logins  # noqa: F401 (fixtures)
from tests.support.processes import ManagedProcess, process_env, wait_for

# -- pure decisions ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("failures", "rand", "expected"), [
    (0, 0.9, 0.0),  # no failure: at once
    (1, 0.0, 0.5),  # the lower half is never used
    (1, 1.0, 1.0),
    (2, 0.0, 1.0),
    (3, 0.5, 3.0),  # 4 s ceiling, jittered
    (9, 1.0, 10.0),  # capped
    (500, 0.0, 5.0),  # no overflow far past the cap
])
def test_backoff_doubles_to_its_cap_with_jitter_in_the_upper_half(failures, rand, expected):
    assert backoff_delay(failures, base=1.0, cap=10.0, rand=rand) == pytest.approx(expected)


@pytest.mark.parametrize(("now", "idle_since", "heard_at", "reidle_after", "max_silence", "expected"), [
    (10, 0, 9, 25, 30, WAIT),
    (25, 0, 24, 25, 30, REIDLE),  # this IDLE is old enough
    (40, 30, 5, 25, 35, CHECK),  # silence beats everything
    (40, 30, 5, 25, 36, WAIT),
    (1750, 0, 1749, 3600, 3600, REIDLE),  # a setting past 29 minutes is capped at RFC 2177's limit
    (1739, 0, 1738, 3600, 3600, WAIT),
])
def test_idle_step(now, idle_since, heard_at, reidle_after, max_silence, expected):
    assert idle_step(now, idle_since, heard_at, reidle_after, max_silence) == expected


@pytest.mark.parametrize(("responses", "expected"), [
    ([], False),
    ([(b"OK", b"Still here")], False),
    ([(3, b"EXPUNGE")], False),
    ([(1, b"FETCH", (b"FLAGS", (b"\\Seen",)))], False),
    ([(4, b"EXISTS")], True),
    ([(b"OK", b"Still here"), (1, b"RECENT")], True),
])
def test_what_means_new_mail(responses, expected):
    assert means_new_mail(responses) is expected


A, B = ("h", 143, "none", "u", "password", "", "s1", "INBOX"), ("h2", 143, "none", "u", "password", "", "s1", "INBOX")


@pytest.mark.parametrize(("wanted", "running", "expected"), [
    ({}, {}, Plan([], [])),
    ({1: A}, {}, Plan([1], [])),  # switched live, or added
    ({}, {1: A}, Plan([], [1])),  # switched off, disabled, or removed
    ({1: A}, {1: A}, Plan([], [])),
    ({1: B}, {1: A}, Plan([1], [1])),  # re-pointed: restarted
    ({1: A, 2: A, 3: B}, {2: A, 3: A, 4: A}, Plan([1, 3], [3, 4])),
])
def test_reconcile(wanted, running, expected):
    assert reconcile(wanted, running) == expected


def test_the_watch_key_is_the_configuration_a_loop_depends_on():
    row = {"host": "h", "port": 143, "security": "none", "username": "u", "auth": "password", "oauth_provider": "",
           "secret": "s1", "folders": []}
    assert live.watch_key(row) == A  # no folder listed: INBOX
    assert live.watch_key({**row, "folders": ["Orders", "INBOX"]})[-1] == "Orders"
    assert live.watch_key({**row, "secret": "s2"}) != A  # a new password restarts the loop


# -- real pollmail processes ---------------------------------------------------------------------------------

# Short timers, and a poll cycle that never reads these mailboxes: what arrives, arrives through IDLE.
LIVE_ENV = {"MAILPOLL_LIVE_RECONCILE": 0.3, "MAILPOLL_LIVE_BACKOFF": 0.2, "MAILPOLL_LIVE_BACKOFF_MAX": 1,
            "MAILPOLL_LIVE_REIDLE": 2, "MAILPOLL_LIVE_MAX_SILENCE": 60}


def live_mailbox(dovecot, *, live_now=True):
    user, password = dovecot.add_user()
    mailbox = MailboxFactory(host=dovecot.host, port=dovecot.port, username=user, password=password,
                             initial_mode="new-only", live=live_now, poll_interval=timedelta(hours=1))
    Mailbox.objects.filter(pk=mailbox.pk).update(last_polled_at=timezone.now())  # not due for an hour
    return user, mailbox


def pollmail(processes, media, **env):
    return processes(lambda: ManagedProcess("pollmail", "--interval", "60",
                                            env=process_env(MEDIA_ROOT=media, **{**LIVE_ENV, **env})))


def watched(mailbox, pid=None):
    """The mailbox's watch row once its loop is in IDLE (by ``pid``, if given)."""
    row = LiveWatch.objects.filter(mailbox=mailbox, last_event="idle").first()
    return row if row is not None and (pid is None or row.pid == pid) else None


def arrived(subject):
    return wait_for(lambda: Request.objects.filter(subject=subject).exists(), timeout=30,
                    message=f"Request {subject!r}")


# A live mailbox's advisory lock, granted, in this test's database (other runs share the server).
THIS_LOCK = ("locktype = 'advisory' AND granted AND classid = %s AND objid = %s AND objsubid = 2 "
             "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")


def lock_holders(mailbox) -> int:
    with connection.cursor() as cur:
        cur.execute(f"SELECT count(*) FROM pg_locks WHERE {THIS_LOCK}", [live.LOCK_NAMESPACE, mailbox.pk])
        return cur.fetchone()[0]


def imap_sessions(dovecot, user) -> int:
    """The user's open IMAP connections on the server (``doveadm who``: name, count, service, pids, ips)."""
    lines = dovecot.doveadm("who").stdout.splitlines()[1:]
    return sum(int(line.split()[1]) for line in lines if line.split() and line.split()[0] == user)


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_a_mailbox_switched_live_while_running_gets_its_mail_through_idle_and_sigterm_leaves(dovecot, processes,
                                                                                              media):
    user, mailbox = live_mailbox(dovecot, live_now=False)
    poller = pollmail(processes, media)
    wait_for(lambda: "live supervisor started" in poller.output(), message="the supervisor to start")
    assert not LiveWatch.objects.exists()

    Mailbox.objects.filter(pk=mailbox.pk).update(live=True)
    row = wait_for(lambda: watched(mailbox), message="the mailbox to be watched")
    assert row.pid == poller.pid
    dovecot.append(user, "INBOX", mail("live-1"))
    arrived("live-1")
    # Logged just after the commit that made the Request: waited for, not raced.
    wait_for(lambda: "live new mail: fetched=1 stored=1" in poller.output(), message="the IDLE path's log line")

    Mailbox.objects.filter(pk=mailbox.pk).update(live=False)
    wait_for(lambda: not LiveWatch.objects.filter(mailbox=mailbox).exists(), message="the watch to end")
    wait_for(lambda: imap_sessions(dovecot, user) == 0, message="the IDLE session to log out")

    Mailbox.objects.filter(pk=mailbox.pk).update(live=True)
    wait_for(lambda: watched(mailbox), message="the mailbox to be watched again")
    poller.signal(signal.SIGTERM)
    assert poller.wait(timeout=20) == 0
    assert "live supervisor stopped" in poller.output()
    assert not LiveWatch.objects.filter(mailbox=mailbox).exists()
    assert imap_sessions(dovecot, user) == 0


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_two_pollers_one_idle_session_and_the_other_takes_over_after_kill_9(dovecot, processes, media):
    user, mailbox = live_mailbox(dovecot)
    pollers = {p.pid: p for p in (pollmail(processes, media), pollmail(processes, media))}
    row = wait_for(lambda: watched(mailbox), message="the mailbox to be watched")
    holder = pollers.pop(row.pid)
    [other] = pollers.values()
    assert lock_holders(mailbox) == 1
    assert imap_sessions(dovecot, user) == 1
    dovecot.append(user, "INBOX", mail("before-kill"))
    arrived("before-kill")

    holder.kill9()
    wait_for(lambda: watched(mailbox, pid=other.pid), message="the other poller to take the mailbox over")
    assert lock_holders(mailbox) == 1
    wait_for(lambda: imap_sessions(dovecot, user) == 1, message="the dead holder's session to go")
    dovecot.append(user, "INBOX", mail("after-kill"))
    arrived("after-kill")
    assert Request.objects.filter(mailbox=mailbox).count() == 2


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_a_killed_imap_session_is_reconnected_and_nothing_is_lost(dovecot, processes, media):
    user, mailbox = live_mailbox(dovecot)
    # A short silence, so the check that notices a silently dead connection (NOOP, then a read) runs too.
    poller = pollmail(processes, media, MAILPOLL_LIVE_MAX_SILENCE=1)
    wait_for(lambda: watched(mailbox), message="the mailbox to be watched")
    wait_for(lambda: "live check after silence" in poller.output(), message="a check after a silence")

    dovecot.kick(user)  # the IDLE session's imap process is told to go: BYE, connection closed
    dovecot.append(user, "INBOX", mail("while-down"))
    arrived("while-down")
    wait_for(lambda: watched(mailbox), message="the mailbox to be watched again")
    assert "live loop:" in poller.output() and "reconnecting in" in poller.output()

    dovecot.append(user, "INBOX", mail("after-reconnect"))
    arrived("after-reconnect")
    assert sorted(Request.objects.filter(mailbox=mailbox).values_list("subject", flat=True)) == [
        "after-reconnect", "while-down"]
    assert poller.alive()


def imap_pids(dovecot, user) -> list[int]:
    """The pids of the user's imap processes (``doveadm who``: name, count, service, (pids), (ips))."""
    for line in dovecot.doveadm("who").stdout.splitlines()[1:]:
        if line.split() and line.split()[0] == user:
            return [int(pid) for pid in re.findall(r"\d+", line.split("(")[1])]
    return []


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_the_idle_sessions_imap_process_killed_with_sigkill_is_reconnected_and_nothing_is_lost(
        dovecot, processes, media):
    user, mailbox = live_mailbox(dovecot)
    poller = pollmail(processes, media)
    wait_for(lambda: watched(mailbox), message="the mailbox to be watched")
    (pid,) = imap_pids(dovecot, user)

    os.kill(pid, signal.SIGKILL)  # no BYE: the connection just drops under the IDLE
    dovecot.append(user, "INBOX", mail("after-sigkill"))
    arrived("after-sigkill")
    wait_for(lambda: imap_pids(dovecot, user) not in ([], [pid]), message="a new IDLE session")
    wait_for(lambda: watched(mailbox), message="the mailbox watched again")

    dovecot.append(user, "INBOX", mail("on-the-new-session"))
    arrived("on-the-new-session")
    assert Request.objects.filter(mailbox=mailbox).count() == 2
    assert poller.alive()


# -- in this process: OAuth, and the admin's line ------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_an_oauth_mailbox_is_watched_over_xoauth2_and_no_token_is_logged(dovecot, oauth_mailbox, settings, media,  # noqa: F811
                                                                          caplog):
    for name, value in LIVE_ENV.items():
        setattr(settings, name, value)
    caplog.set_level(logging.DEBUG)
    mailbox, fake = oauth_mailbox("google", initial_mode="new-only", live=True, poll_interval=timedelta(hours=1))
    stop = threading.Event()
    supervisor = LiveSupervisor(Poller().folder_sync, stop).start()
    try:
        wait_for(lambda: watched(mailbox), message="the mailbox to be watched")
        dovecot.append(mailbox.username, "INBOX", mail("oauth-live"))
        arrived("oauth-live")
    finally:
        stop.set()
        supervisor.join()
    assert xoauth2_logins(dovecot, mailbox.username, at_least=1) >= 1
    assert fake.issued and not any(token in caplog.text for token in fake.issued)
    assert not LiveWatch.objects.filter(mailbox=mailbox).exists()


@pytest.mark.django_db
def test_the_admin_says_who_watches_a_live_mailbox():
    mailbox = MailboxFactory(live=False)
    assert live_state(mailbox) == EMPTY
    Mailbox.objects.filter(pk=mailbox.pk).update(live=True)
    mailbox = Mailbox.objects.get(pk=mailbox.pk)
    assert "not watched yet" in live_state(mailbox)
    LiveWatch.objects.create(mailbox=mailbox, host="web-3", pid=4242, since=timezone.now(),
                             last_event_at=timezone.now(), last_event="new mail: 2 stored")
    shown = live_state(Mailbox.objects.get(pk=mailbox.pk))
    assert "watched by web-3/4242 since" in shown and "last event new mail: 2 stored" in shown


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_a_lost_lock_connection_stops_the_loop_until_the_lock_is_held_again(dovecot, processes, media):
    """No loop runs without its lock: the lock's backend killed, the watch stops, is taken again, mail flows."""
    user, mailbox = live_mailbox(dovecot)
    poller = pollmail(processes, media)
    wait_for(lambda: watched(mailbox), message="the mailbox to be watched")
    with connection.cursor() as cur:
        cur.execute(f"SELECT pg_terminate_backend(pid) FROM pg_locks WHERE {THIS_LOCK}", [live.LOCK_NAMESPACE,
                                                                                        mailbox.pk])
        assert cur.fetchall() == [(True,)]

    wait_for(lambda: "lost its lock connection" in poller.output(), message="the supervisor to notice")
    wait_for(lambda: watched(mailbox) and lock_holders(mailbox) == 1, message="the lock taken again")
    dovecot.append(user, "INBOX", mail("after-lock-loss"))
    arrived("after-lock-loss")
    assert poller.alive()


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_a_re_pointed_live_mailbox_is_watched_where_it_points_now(dovecot, processes, media):
    user, mailbox = live_mailbox(dovecot)
    dovecot.create_folder(user, "Orders")
    poller = pollmail(processes, media)
    first = wait_for(lambda: watched(mailbox), message="the mailbox to be watched")

    Mailbox.objects.filter(pk=mailbox.pk).update(folders=["Orders", "INBOX"])
    wait_for(lambda: (row := watched(mailbox)) and row.since > first.since, message="the watch to restart")
    dovecot.append(user, "Orders", mail("in-orders"))
    arrived("in-orders")
    wait_for(lambda: "folder=Orders live new mail: fetched=1 stored=1" in poller.output(),
             message="the IDLE path's log line")


def fill_the_outbox(settings, mailbox, caplog):
    """A full outbox (capacity 1, one entry; its sender never runs) and short live timers; returns a counter
    of the reads the live loop held off."""
    from outbox.models import Entry

    for name, value in {**LIVE_ENV, "MAILPOLL_LIVE_MAX_SILENCE": 1}.items():
        setattr(settings, name, value)
    settings.DOWNSTREAM_URL, settings.OUTBOX_CAPACITY = "http://127.0.0.1:9/", 1  # never reached: no sender runs
    Entry.objects.create(org=mailbox.org, document_ref="held-1", source="email", document={})
    return lambda: sum("the downstream outbox is full, nothing fetched" in r.getMessage() for r in caplog.records)


@pytest.mark.django_db(transaction=True)
def test_a_live_mailbox_fetches_nothing_while_the_outbox_is_full_and_catches_up_after_the_drain(
        dovecot, settings, media, caplog):
    from outbox.models import Entry

    _user, mailbox = live_mailbox(dovecot)
    Poller().poll(mailbox)  # its cursor, before the outbox fills
    held = fill_the_outbox(settings, mailbox, caplog)

    stop = threading.Event()
    supervisor = LiveSupervisor(Poller().folder_sync, stop).start()
    try:
        wait_for(held, timeout=30, message="the loop to hold off")
        dovecot.append(mailbox.username, "INBOX", mail("waits on the server"))
        seen = held()
        wait_for(lambda: held() >= seen + 2, timeout=30, message="two more reads held off")  # new mail, a check
        assert not Request.objects.exists()

        Entry.objects.all().delete()  # drained
        arrived("waits on the server")
    finally:
        stop.set()
        supervisor.join()


@pytest.mark.django_db(transaction=True)
def test_a_new_only_live_mailbox_first_connected_while_the_outbox_is_full_starts_new_then_and_reads_it_after(
        dovecot, settings, media, caplog):
    """Its first read fetches nothing, so the full outbox lets it through: "new" starts at the connect, not
    at the drain, and what arrives meanwhile is read once the outbox drains."""
    from mailpoll.models import FolderCursor
    from outbox.models import Entry

    _user, mailbox = live_mailbox(dovecot)  # never polled: no cursor yet
    held = fill_the_outbox(settings, mailbox, caplog)

    stop = threading.Event()
    supervisor = LiveSupervisor(Poller().folder_sync, stop).start()
    try:
        wait_for(lambda: FolderCursor.objects.filter(mailbox=mailbox, uidvalidity__isnull=False).exists(),
                 timeout=30, message="the first read to record where new mail starts")
        dovecot.append(mailbox.username, "INBOX", mail("arrived while full"))
        seen = held()
        wait_for(lambda: held() > seen, timeout=30, message="a read held off")
        assert not Request.objects.exists()

        Entry.objects.all().delete()  # drained
        arrived("arrived while full")
    finally:
        stop.set()
        supervisor.join()


@pytest.mark.django_db(transaction=True)
def test_the_process_list_names_the_mailboxes_a_process_watches_live(dovecot, settings, media):
    from jobs import processes
    from jobs.models import Process

    for name, value in LIVE_ENV.items():
        setattr(settings, name, value)
    _user, first = live_mailbox(dovecot)
    _user, second = live_mailbox(dovecot)
    entry = processes.ProcessEntry("pollmail", every=30)
    entry.start()
    stop = threading.Event()
    supervisor = LiveSupervisor(Poller().folder_sync, stop).start()

    def doing() -> str:
        row = Process.objects.filter(pk=entry.pk).first()
        return row.doing if row else ""

    try:
        assert entry.registered.wait(10)
        wait_for(lambda: doing() == f"mailbox={first.pk} live, mailbox={second.pk} live"
                 or doing() == f"mailbox={second.pk} live, mailbox={first.pk} live",
                 timeout=30, message="both watched mailboxes in the process's row")

        Mailbox.objects.filter(pk=first.pk).update(live=False)
        wait_for(lambda: doing() == f"mailbox={second.pk} live", timeout=30,
                 message="the mailbox switched off gone from the row")
    finally:
        stop.set()
        supervisor.join()
        entry.stop()
    assert processes.current_doing() == ""
