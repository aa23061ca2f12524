"""The poller against a real Dovecot: initial modes, cursors, UIDVALIDITY, failures, drops."""

import logging
from datetime import UTC, datetime, timedelta

import pytest

from mailpoll.models import FolderCursor, Request, RequestStatus
from mailpoll.sync.poller import Poller
from mailpoll.sync.store import store_messages
from tests.mailpoll.corpus import UNPARSEABLE, hostile_corpus, oversized_message
from tests.mailpoll.factories import mail, poll_now
from tests.support.tcpproxy import DroppingProxy

pytestmark = pytest.mark.django_db


def cursor_of(mailbox, folder="INBOX"):
    return FolderCursor.objects.get(mailbox=mailbox, folder=folder)


def subjects():
    return sorted(Request.objects.values_list("subject", flat=True))


def failing_on(subject: str, error: str):
    """A storage step that fails (OSError) every batch holding the message of this subject."""

    def store(mb, folder, fetched, **generation):
        if any(f"Subject: {subject}".encode() in raw for _, raw in fetched):
            raise OSError(error)
        return store_messages(mb, folder, fetched, **generation)

    return store


def test_full_initial_mode_takes_everything_then_only_new_mail(dovecot, imap_mailbox):
    mailbox = imap_mailbox(initial_mode="full")
    dovecot.append_many(mailbox.username, "INBOX", [mail(f"m{i}") for i in range(3)])

    poll_now(mailbox)
    assert subjects() == ["m0", "m1", "m2"]
    assert cursor_of(mailbox).last_uid == 3
    assert mailbox.consecutive_failures == 0 and mailbox.last_success_at is not None

    dovecot.append(mailbox.username, "INBOX", mail("m3"))
    poll_now(mailbox)
    assert subjects() == ["m0", "m1", "m2", "m3"]
    assert cursor_of(mailbox).last_uid == 4


def test_new_only_starts_the_corpus_now(dovecot, imap_mailbox):
    mailbox = imap_mailbox(initial_mode="new-only")
    dovecot.append_many(mailbox.username, "INBOX", [mail("old1"), mail("old2")])
    poll_now(mailbox)
    assert subjects() == []
    assert cursor_of(mailbox).last_uid == 2 and cursor_of(mailbox).last_sync_ts is not None

    dovecot.append(mailbox.username, "INBOX", mail("new"))
    poll_now(mailbox)
    assert subjects() == ["new"]


def test_since_takes_mail_from_that_date(dovecot, imap_mailbox):
    since = datetime(2026, 6, 19, tzinfo=UTC)
    mailbox = imap_mailbox(initial_mode="since", initial_since=since.date())
    dovecot.append(mailbox.username, "INBOX", mail("before"), date=since - timedelta(days=3))
    dovecot.append(mailbox.username, "INBOX", mail("after"), date=since + timedelta(days=1))
    poll_now(mailbox)
    assert subjects() == ["after"]


def test_an_empty_tick_still_stamps_the_cursor(dovecot, imap_mailbox):
    mailbox = imap_mailbox()
    poll_now(mailbox)
    first = cursor_of(mailbox).last_sync_ts
    poll_now(mailbox)
    assert cursor_of(mailbox).last_sync_ts > first and cursor_of(mailbox).last_uid == 0


def test_fetching_does_not_mark_mail_as_read(dovecot, imap_mailbox):
    mailbox = imap_mailbox()
    uid = dovecot.append(mailbox.username, "INBOX", mail("unread"))
    poll_now(mailbox)
    assert Request.objects.count() == 1
    assert b"\\Seen" not in dovecot.flags(mailbox.username, "INBOX", uid)


def test_uidvalidity_change_sweeps_again_without_duplicates_or_losses(dovecot, imap_mailbox):
    mailbox = imap_mailbox()
    dovecot.append_many(mailbox.username, "INBOX", [mail(f"m{i}") for i in range(3)])
    poll_now(mailbox)
    old = cursor_of(mailbox).uidvalidity

    new = dovecot.change_uidvalidity(mailbox.username, "INBOX")
    dovecot.append(mailbox.username, "INBOX", mail("after-reset"))
    poll_now(mailbox)
    assert new != old and cursor_of(mailbox).uidvalidity == new
    assert subjects() == ["after-reset", "m0", "m1", "m2"]  # one each: dedup absorbed the sweep


def test_a_recreated_folder_is_swept_with_dedup(dovecot, imap_mailbox):
    mailbox = imap_mailbox(folders=["Reports"])
    dovecot.create_folder(mailbox.username, "Reports")
    kept = mail("kept")
    dovecot.append(mailbox.username, "Reports", kept)
    poll_now(mailbox)
    dovecot.recreate_folder(mailbox.username, "Reports")
    dovecot.append_many(mailbox.username, "Reports", [kept, mail("fresh")])
    poll_now(mailbox)
    assert subjects() == ["fresh", "kept"]


def test_a_polls_database_work_is_labelled_with_its_mailbox(dovecot, imap_mailbox):
    """What the background timeouts' watchdog names when a statement of this poll gets no answer."""
    from jobs import dbsession

    mailbox = imap_mailbox()
    dovecot.append(mailbox.username, "INBOX", mail("m0"))
    labels = []

    def recording_store(mb, folder, fetched, **generation):
        labels.append(dbsession.current_label())
        return store_messages(mb, folder, fetched, **generation)

    poll_now(mailbox, Poller(store_messages=recording_store))
    assert labels == [f"mailbox={mailbox.pk}"]
    assert dbsession.current_label() != labels[0]  # not left on the thread after the poll


def test_a_failed_store_stops_the_cursor_before_it_and_is_fetched_again(dovecot, imap_mailbox):
    mailbox = imap_mailbox()
    dovecot.append_many(mailbox.username, "INBOX", [mail(f"m{i}") for i in range(5)])

    poll_now(mailbox, Poller(store_messages=failing_on("m2", "disk full")))
    assert subjects() == ["m0", "m1", "m3", "m4"]  # the rest of the fetched batch is stored...
    assert cursor_of(mailbox).last_uid == 2  # ...but the cursor stops right before the failure
    assert mailbox.consecutive_failures == 1 and "disk full" in mailbox.last_error

    poll_now(mailbox)
    assert subjects() == ["m0", "m1", "m2", "m3", "m4"]
    assert cursor_of(mailbox).last_uid == 5 and mailbox.consecutive_failures == 0


def test_the_poller_logs_under_one_name_whichever_of_its_modules_writes(dovecot, imap_mailbox, caplog):
    """The lines operators grep for (docs/mail.md) keep the logger name they had: mailpoll.poller."""
    mailbox = imap_mailbox()
    dovecot.append_many(mailbox.username, "INBOX", [mail(f"m{i}") for i in range(3)])

    with caplog.at_level(logging.INFO):
        poll_now(mailbox, Poller(store_messages=failing_on("m1", "disk full")))
    lines = {(record.levelname, record.name) for record in caplog.records if any(
        part in record.getMessage() for part in ("storing them one by one", "uid=2 not stored", "mode=initial-"))}
    assert lines == {("WARNING", "mailpoll.poller"), ("ERROR", "mailpoll.poller"), ("INFO", "mailpoll.poller")}


def test_later_successes_in_a_batch_are_not_stepped_over(dovecot, imap_mailbox, settings):
    """Messages after the failure in the same batch are stored, but the cursor still waits."""
    settings.MAILPOLL_FETCH_BATCH = 10
    mailbox = imap_mailbox()
    dovecot.append_many(mailbox.username, "INBOX", [mail(f"m{i}") for i in range(4)])

    poll_now(mailbox, Poller(store_messages=failing_on("m1", "transient")))
    assert subjects() == ["m0", "m2", "m3"] and cursor_of(mailbox).last_uid == 1
    poll_now(mailbox)
    assert subjects() == ["m0", "m1", "m2", "m3"] and cursor_of(mailbox).last_uid == 4


def test_a_message_expunged_between_search_and_fetch_does_not_stall_the_cursor(dovecot, imap_mailbox, settings):
    settings.MAILPOLL_FETCH_BATCH = 1
    mailbox = imap_mailbox()
    uids = dovecot.append_many(mailbox.username, "INBOX", [mail("m0"), mail("gone"), mail("m2")])

    def expunge_the_next_one(mb, folder, fetched, **generation):
        if fetched[0][0] == uids[0]:
            dovecot.expunge(mb.username, "INBOX", [uids[1]])
        return store_messages(mb, folder, fetched, **generation)

    poll_now(mailbox, Poller(store_messages=expunge_the_next_one))
    assert subjects() == ["m0", "m2"]
    assert cursor_of(mailbox).last_uid == uids[2] and mailbox.consecutive_failures == 0


def test_an_oversized_message_becomes_a_rejected_request(dovecot, imap_mailbox, settings):
    settings.MAILPOLL_MAX_MESSAGE_BYTES = 2000
    mailbox = imap_mailbox()
    dovecot.append_many(mailbox.username, "INBOX", [mail("big", body="x" * 5000), mail("small")])
    poll_now(mailbox)
    big = Request.objects.get(subject="big")
    assert big.status == RequestStatus.REJECTED and "over the 2,000-byte limit" in big.reject_reason
    assert Request.objects.get(subject="small").status == RequestStatus.ACCEPTED
    assert cursor_of(mailbox).last_uid == 2


def test_the_hostile_corpus_through_dovecot_is_fully_accounted_for(dovecot, imap_mailbox, settings, media):
    """Every message the server holds ends as an accepted or rejected Request, or a duplicate of one."""
    settings.MAILPOLL_MAX_MESSAGE_BYTES = 5 * 1024 * 1024
    mailbox = imap_mailbox()
    named = [(name, raw) for name, raw in hostile_corpus() if raw.strip()]  # IMAP cannot APPEND an empty message
    corpus = [raw for _, raw in named] + [oversized_message(6 * 1024 * 1024)]
    unparseable = [name for name, _ in named if name in UNPARSEABLE]
    uids = dovecot.append_many(mailbox.username, "INBOX", corpus)

    [result] = Poller().poll(mailbox)
    assert not result.failed and result.fetched + 1 == len(corpus)
    assert result.stored + result.rejected + result.duplicates == len(corpus)
    assert Request.objects.count() == result.stored + result.rejected
    assert result.rejected == len(unparseable) + 1 == Request.objects.filter(status=RequestStatus.REJECTED).count()
    assert result.duplicates == 1  # two messages share DUPLICATE_ID
    assert "over the 5,242,880-byte limit" in Request.objects.get(subject="Huge").reject_reason
    assert cursor_of(mailbox).last_uid == uids[-1]
    stored = [path for path in media.rglob("*") if path.is_file()]
    assert stored and all(path.parent.parent == media / "mail" for path in stored)


def test_large_messages_are_fetched_a_few_at_a_time(dovecot, imap_mailbox, settings, monkeypatch):
    from mailpoll.providers.imap import ImapProvider

    settings.MAILPOLL_FETCH_MAX_BYTES = 12_000
    mailbox = imap_mailbox()
    dovecot.append_many(mailbox.username, "INBOX", [mail(f"m{i}", body="z" * 5000) for i in range(5)])
    fetched = []
    real_fetch = ImapProvider.fetch
    monkeypatch.setattr(ImapProvider, "fetch", lambda self, uids: fetched.append(list(uids)) or real_fetch(self, uids))
    poll_now(mailbox)
    assert fetched == [[1, 2], [3, 4], [5]]  # about 5.3 KB each: two per 12 KB
    assert subjects() == [f"m{i}" for i in range(5)] and cursor_of(mailbox).last_uid == 5


def test_a_connection_dropped_mid_fetch_is_recorded_and_the_next_cycle_completes(dovecot, imap_mailbox):
    with DroppingProxy(dovecot.port) as proxy:
        mailbox = imap_mailbox(port=proxy.port)
        dovecot.append_many(mailbox.username, "INBOX", [mail(f"m{i}", body="y" * 3000) for i in range(6)])
        proxy.cut_after(500, marker=b" FETCH (")
        poll_now(mailbox)
        assert proxy.wait_cut(5)
        assert mailbox.consecutive_failures == 1 and mailbox.last_error
        poll_now(mailbox)
    assert subjects() == [f"m{i}" for i in range(6)]
    assert mailbox.consecutive_failures == 0
    assert cursor_of(mailbox).last_uid == 6


def test_a_bad_password_is_a_recorded_failure_not_a_crash(dovecot, imap_mailbox):
    mailbox = imap_mailbox()
    mailbox.set_secret("not-the-password")
    mailbox.save()
    poll_now(mailbox)
    assert mailbox.consecutive_failures == 1
    # The headline Test connection gives, and never the password.
    assert mailbox.last_error.startswith("wrong user or password\n") and "not-the-password" not in mailbox.last_error
    poll_now(mailbox)
    assert mailbox.consecutive_failures == 2


def test_a_mailbox_is_not_polled_again_before_its_interval(dovecot, imap_mailbox):
    mailbox = imap_mailbox(poll_interval=timedelta(minutes=5))
    assert Poller().cycle() == [mailbox.pk]
    assert Poller().cycle() == []


@pytest.mark.parametrize("more_due, lowest, highest", [
    (True, 0.0, 0.0),         # the last claim was full: more may be due, the next cycle starts at once
    (False, 108.0, 132.0),    # it was not: nothing more is due, wait about one interval
])
def test_the_pause_after_a_cycle_depends_on_whether_its_last_claim_was_full(more_due, lowest, highest):
    from mailpoll.sync.poller import pause_after

    assert lowest <= pause_after(more_due, 120.0) <= highest


@pytest.mark.django_db(transaction=True)
def test_a_backlog_larger_than_one_claim_is_polled_without_waiting_an_interval_per_claim(settings):
    import threading

    from django.db import connection

    from mailpoll.models import Mailbox
    from tests.mailpoll.factories import MailboxFactory
    from tests.support.loopback import free_port
    from tests.support.processes import wait_for

    settings.MAILPOLL_CLAIM_LIMIT = 2
    closed = free_port()  # nothing listens: each poll fails at once, and counts as polled
    boxes = [MailboxFactory(port=closed, site_target=None) for _ in range(5)]
    poller = Poller(interval=3600, concurrency=1)

    def run():
        try:
            poller.run()
        finally:
            connection.close()  # this thread's own

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: not Mailbox.objects.filter(pk__in=[b.pk for b in boxes], last_polled_at=None).exists(),
                 timeout=30, message="every mailbox polled within the first claims")
    finally:
        poller.stop()
        thread.join(30)
    assert not thread.is_alive()
