"""The cursor covers only what was stored, whatever interrupts a poll (issue 9, items 1 and 3; docs/mail.md, "Cursors: one per folder").

Stopping a poll (SIGTERM sets the poller's stop flag) or losing its connection must never move a folder's
cursor over a message that was not stored, and must not throw away what was.
"""

from datetime import UTC, date, datetime

import pytest
from django.db import IntegrityError, transaction

from mailpoll.models import FolderCursor, Request
from mailpoll.sync.poller import Poller
from mailpoll.providers.imap import ImapProvider
from mailpoll.sync.store import store_messages
from tests.mailpoll.factories import mail
from tests.support.tcpproxy import DroppingProxy

pytestmark = pytest.mark.django_db

SINCE = date(2026, 6, 19)
AFTER = datetime(2026, 6, 25, tzinfo=UTC)


def subjects():
    return sorted(Request.objects.values_list("subject", flat=True))


def stopping_after_first_batch():
    """A poller that is told to stop (as by SIGTERM) right after it stored its first batch."""
    def store_then_stop(mailbox, folder, fetched, **generation):
        outcomes = store_messages(mailbox, folder, fetched, **generation)
        poller.stop()
        return outcomes

    poller = Poller(store_messages=store_then_stop)
    return poller


@pytest.mark.parametrize("case", ["full", "since", "uidvalidity-reset"])
def test_a_poll_stopped_in_its_first_folder_leaves_the_next_one_unread_and_resumes_the_sweep(
        case, dovecot, imap_mailbox, settings):
    settings.MAILPOLL_FETCH_BATCH = 3
    mode = "since" if case == "since" else ("new-only" if case == "uidvalidity-reset" else "full")
    mailbox = imap_mailbox(folders=["Big", "Second"], initial_mode=mode,
                           initial_since=SINCE if mode == "since" else None)
    user = mailbox.username
    for folder in ("Big", "Second"):
        dovecot.create_folder(user, folder)
    old = {}
    if case == "uidvalidity-reset":
        Poller().poll(mailbox)  # new-only: each folder's cursor at its (empty) end
        old = {c.folder: (c.uidvalidity, c.last_uid) for c in FolderCursor.objects.filter(mailbox=mailbox)}
        for folder in ("Big", "Second"):
            dovecot.change_uidvalidity(user, folder)
    dovecot.append_many(user, "Big", [mail(f"big{i}") for i in range(7)], date=AFTER)
    dovecot.append_many(user, "Second", [mail(f"second{i}") for i in range(2)], date=AFTER)

    results = {r.folder: r for r in stopping_after_first_batch().poll(mailbox)}

    assert subjects() == ["big0", "big1", "big2"]
    big = FolderCursor.objects.get(mailbox=mailbox, folder="Big")
    assert (big.last_uid, big.sweep_until) == (3, 7)  # the sweep is unfinished, not done at its high-water mark
    assert big.sweep_since == (SINCE if mode == "since" else None)
    second = FolderCursor.objects.filter(mailbox=mailbox, folder="Second").first()
    if old:
        assert (second.uidvalidity, second.last_uid) == old["Second"]  # the stale cursor: swept next time
    else:
        assert second is None  # it used to be at uid 2, its two messages never read
    assert results["Second"].fetched == 0

    results = {r.folder: r for r in Poller().poll(mailbox)}
    assert subjects() == sorted([f"big{i}" for i in range(7)] + ["second0", "second1"])
    assert results["Big"].mode == "sweep-resumed" and results["Big"].duplicates == 0  # nothing read twice
    for folder, last in (("Big", 7), ("Second", 2)):
        row = FolderCursor.objects.get(mailbox=mailbox, folder=folder)
        assert (row.uidvalidity, row.last_uid, row.sweep_until) == (dovecot.uidvalidity(user, folder), last, None)


def test_a_resumed_since_sweep_still_leaves_out_what_is_older_than_its_date(dovecot, imap_mailbox, settings):
    """Resuming as 'everything after the cursor' would take the old mail the 'since' mode left out."""
    settings.MAILPOLL_FETCH_BATCH = 2
    mailbox = imap_mailbox(initial_mode="since", initial_since=SINCE)
    before = datetime(2026, 6, 1, tzinfo=UTC)
    for i in range(3):  # new, old, new, old...: as in a folder old mail was moved into
        dovecot.append(mailbox.username, "INBOX", mail(f"new{i}"), date=AFTER)
        dovecot.append(mailbox.username, "INBOX", mail(f"old{i}"), date=before)

    stopping_after_first_batch().poll(mailbox)
    assert subjects() == ["new0", "new1"]
    Poller().poll(mailbox)
    assert subjects() == ["new0", "new1", "new2"]
    assert FolderCursor.objects.get(mailbox=mailbox, folder="INBOX").last_uid == 6


def test_a_stop_before_the_first_batch_changes_no_cursor(dovecot, imap_mailbox):
    mailbox = imap_mailbox(initial_mode="full")
    dovecot.append_many(mailbox.username, "INBOX", [mail("a"), mail("b")])
    poller = Poller()
    real_search = ImapProvider.search

    class StopAfterSearch(ImapProvider):
        def search(self, *args, **kwargs):
            uids = real_search(self, *args, **kwargs)
            poller.stop()  # SIGTERM between SEARCH and the first batch
            return uids

    with StopAfterSearch(mailbox) as provider:
        result = poller.folder_sync.sync_folder(provider, mailbox, "INBOX")
    assert result.fetched == 0 and result.last_uid is None
    assert not FolderCursor.objects.filter(mailbox=mailbox).exists()  # it used to be stored at uid 2

    Poller().poll(mailbox)
    assert subjects() == ["a", "b"]


# -- item 3: progress survives a dropped connection ------------------------------------------------------------

def test_a_link_that_drops_mid_sweep_completes_over_successive_polls_without_reading_anything_twice(
        dovecot, imap_mailbox, settings, monkeypatch):
    settings.MAILPOLL_FETCH_BATCH = 2
    fetched_per_poll: list[list[int]] = []
    real_fetch = ImapProvider.fetch

    def recording_fetch(self, uids):
        fetched_per_poll[-1].extend(uids)
        return real_fetch(self, uids)

    monkeypatch.setattr(ImapProvider, "fetch", recording_fetch)
    stored_uids: list[int] = []

    def recording_store(mb, folder, fetched, **generation):
        outcomes = store_messages(mb, folder, fetched, **generation)
        stored_uids.extend(uid for uid, _ in fetched)
        return outcomes

    with DroppingProxy(dovecot.port) as proxy:
        mailbox = imap_mailbox(port=proxy.port, initial_mode="full")
        # about 3.4 KB each on the wire (its INTERNALDATE too): a cut 15 KB into the FETCH responses falls in every
        # poll's third batch
        dovecot.append_many(mailbox.username, "INBOX", [mail(f"m{i:02}", body="y" * 3000) for i in range(12)])
        cursors, cuts = [], 0
        for _ in range(6):
            proxy.cut_after(15_000, marker=b" FETCH (")
            fetched_per_poll.append([])
            start = FolderCursor.objects.filter(mailbox=mailbox, folder="INBOX").values_list("last_uid", flat=True)
            start = start[0] if start else 0
            Poller(store_messages=recording_store).poll(mailbox)
            mailbox.refresh_from_db()
            cuts += proxy.wait_cut(0)
            last = FolderCursor.objects.get(mailbox=mailbox, folder="INBOX").last_uid
            cursors.append(last)
            # each poll reads on from the cursor the previous one stored; nothing stored is fetched again
            assert all(uid > start for uid in fetched_per_poll[-1]), (start, fetched_per_poll[-1])
            if last == 12:
                break
            assert last > start, "a poll cut short still keeps the batches it stored"

    assert cuts >= 2 and mailbox.last_error  # the link did drop, more than once
    assert cursors[-1] == 12 and len(cursors) <= 4
    assert sorted(stored_uids) == list(range(1, 13))  # every message stored exactly once
    assert subjects() == [f"m{i:02}" for i in range(12)]


@pytest.mark.parametrize(
    "fields",
    [
        {"uidvalidity": None, "last_uid": 5},  # a position without the generation it belongs to
        {"uidvalidity": None, "sweep_until": 9},
        {"uidvalidity": 7, "last_uid": 3, "sweep_since": SINCE},  # a 'since' date outside a sweep
    ],
)
def test_the_database_refuses_a_cursor_that_means_nothing(imap_mailbox, fields):
    mailbox = imap_mailbox()
    with pytest.raises(IntegrityError), transaction.atomic():
        FolderCursor.objects.create(mailbox=mailbox, folder="INBOX", **fields)
