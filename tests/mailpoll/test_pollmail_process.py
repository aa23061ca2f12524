"""`pollmail` as a real process: it survives losing the database, stops cleanly on SIGTERM, and a SIGTERM
mid-sweep leaves every folder it did not read to the next run."""

import signal
from datetime import UTC, date, datetime, timedelta

import pytest
from django.db import connection

from mailpoll.models import FolderCursor, Mailbox, Request
from mailpoll.sync.poller import Poller
from tests.mailpoll.factories import MailboxFactory, mail
from tests.support.holdproxy import HoldingProxy
from tests.support.processes import ManagedProcess, process_env, wait_for

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


def terminate_other_backends():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def test_pollmail_survives_its_connections_being_killed_and_exits_0_on_sigterm(dovecot, processes, media):
    user, password = dovecot.add_user()
    MailboxFactory(host=dovecot.host, port=dovecot.port, username=user, password=password,
                   poll_interval=timedelta(seconds=1))
    dovecot.append(user, "INBOX", mail("first"))
    poller = processes(lambda: ManagedProcess("pollmail", "--interval", "0.5", env=process_env(MEDIA_ROOT=media)))
    wait_for(lambda: Request.objects.filter(subject="first").exists(), timeout=60, message="the first message")

    assert terminate_other_backends() >= 1
    dovecot.append(user, "INBOX", mail("after-outage"))
    wait_for(lambda: Request.objects.filter(subject="after-outage").exists(), timeout=60,
             message="a message after the database connection was killed")
    assert poller.alive()

    poller.signal(signal.SIGTERM)
    assert poller.wait(timeout=20) == 0
    assert "SIGTERM received" in poller.output()


# -- SIGTERM in the middle of a sweep (issue 9, item 1) ----------------------------------------------------------

SINCE = date(2026, 6, 19)
BEFORE, AFTER = datetime(2026, 6, 10, tzinfo=UTC), datetime(2026, 6, 25, tzinfo=UTC)


def fill(dovecot, user, folder, prefix, count, date=AFTER):
    """Append ``count`` messages; returns {uid: subject}."""
    subjects = [f"{prefix}{i}" for i in range(count)]
    return dict(zip(dovecot.append_many(user, folder, [mail(s) for s in subjects], date=date), subjects, strict=True))


def stored_subjects():
    return list(Request.objects.values_list("subject", flat=True))


def assert_cursor_vouches_only_for_stored(dovecot, user, mailbox, folder, by_uid):
    """Every message at or below the folder's cursor that the cursor's reading selects has a Request."""
    row = FolderCursor.objects.filter(mailbox=mailbox, folder=folder).first()
    if row is None or row.uidvalidity != dovecot.uidvalidity(user, folder):
        return
    stored = set(stored_subjects())
    missing = [s for uid, s in by_uid.items() if uid <= row.last_uid and s not in stored]
    assert not missing, f"{folder}: cursor at {row.last_uid} but never stored: {missing}"


def run_until_sigterm_lands_mid_sweep(processes, proxy, media, marker):
    """pollmail, held inside a command (``marker``) by the proxy, gets SIGTERM there; returns once it exited 0."""
    proxy.hold_at(marker)
    poller = processes(lambda: ManagedProcess("pollmail", "--interval", "0.5",
                                              env=process_env(MEDIA_ROOT=media, MAILPOLL_FETCH_BATCH=4)))
    assert proxy.wait_held(60), "pollmail never reached the held command"
    poller.signal(signal.SIGTERM)
    wait_for(lambda: "SIGTERM received" in poller.output(), timeout=20, message="pollmail to take the signal")
    proxy.release()
    assert poller.wait(timeout=30) == 0


def run_once(processes, mailbox, media):
    Mailbox.objects.filter(pk=mailbox.pk).update(last_polled_at=None)
    again = processes(lambda: ManagedProcess("pollmail", "--once", env=process_env(MEDIA_ROOT=media)))
    assert again.wait(timeout=60) == 0


@pytest.mark.parametrize("case", ["full", "since", "uidvalidity-reset", "incremental"])
def test_sigterm_during_a_sweep_leaves_the_folders_not_yet_read_to_the_next_run(case, dovecot, processes, media):
    """SIGTERM while folder Big is being fetched: Second was not worked on, so its cursor stays as it was.

    It used to get the folder's high-water mark in every sweep (first poll in 'full' or 'since' mode, or
    after a UIDVALIDITY change), and its mail was never read.
    """
    user, password = dovecot.add_user()
    for folder in ("Big", "Second"):
        dovecot.create_folder(user, folder)
    with HoldingProxy(dovecot.port) as proxy:
        mode = {"since": "since", "full": "full"}.get(case, "new-only")
        mailbox = MailboxFactory(host=dovecot.host, port=proxy.port, username=user, password=password,
                                 folders=["Big", "Second"], initial_mode=mode,
                                 initial_since=SINCE if mode == "since" else None)
        wanted = {"Big": fill(dovecot, user, "Big", "big-old", 3),
                  "Second": fill(dovecot, user, "Second", "2nd-old", 3)}
        if case == "since":
            unwanted = [*fill(dovecot, user, "Big", "big-before", 2, date=BEFORE).values(),
                        *fill(dovecot, user, "Second", "2nd-before", 2, date=BEFORE).values()]
        else:
            unwanted = []
        if case in ("uidvalidity-reset", "incremental"):
            Poller().poll(mailbox)  # new-only: notes where each folder ends, reads nothing
            assert stored_subjects() == []
            if case == "incremental":
                wanted = {"Big": {}, "Second": {}}
            else:
                for folder in ("Big", "Second"):
                    dovecot.change_uidvalidity(user, folder)  # the reset sweep reads the old mail too
        before = {c.folder: (c.uidvalidity, c.last_uid) for c in FolderCursor.objects.filter(mailbox=mailbox)}
        wanted["Big"].update(fill(dovecot, user, "Big", "big", 14))
        wanted["Second"].update(fill(dovecot, user, "Second", "2nd", 5))

        run_until_sigterm_lands_mid_sweep(processes, proxy, media, b" FETCH (")

        stored = stored_subjects()
        assert len(stored) < len(wanted["Big"]), "the signal was meant to land in Big's first batch"
        assert not any(s.startswith("2nd") for s in stored)
        second = FolderCursor.objects.filter(mailbox=mailbox, folder="Second").first()
        if "Second" in before:
            assert (second.uidvalidity, second.last_uid) == before["Second"]
        else:
            assert second is None
        for folder in ("Big", "Second"):
            assert_cursor_vouches_only_for_stored(dovecot, user, mailbox, folder, wanted[folder])

        run_once(processes, mailbox, media)

    expected = sorted([*wanted["Big"].values(), *wanted["Second"].values()])
    assert sorted(stored_subjects()) == expected  # all of it, each once, and nothing older than a 'since' date
    assert not set(unwanted) & set(stored_subjects())
    for folder in ("Big", "Second"):
        row = FolderCursor.objects.get(mailbox=mailbox, folder=folder)
        assert (row.last_uid, row.sweep_until) == (max(dovecot.uids(user, folder)), None)


def test_sigterm_between_search_and_the_first_batch_leaves_the_folder_unread(dovecot, processes, media):
    user, password = dovecot.add_user()
    with HoldingProxy(dovecot.port) as proxy:
        mailbox = MailboxFactory(host=dovecot.host, port=proxy.port, username=user, password=password,
                                 initial_mode="full")
        subjects = fill(dovecot, user, "INBOX", "m", 6).values()

        run_until_sigterm_lands_mid_sweep(processes, proxy, media, b"* SEARCH")

        assert stored_subjects() == []
        assert not FolderCursor.objects.filter(mailbox=mailbox).exists()  # it used to be at UID 6
        run_once(processes, mailbox, media)
    assert sorted(stored_subjects()) == sorted(subjects)
    assert FolderCursor.objects.get(mailbox=mailbox, folder="INBOX").last_uid == 6
