"""A folder or a message the server refuses fails alone, named, and the rest of the mailbox goes on (issue 9)."""

import re

import pytest
from django.urls import reverse

from mailpoll.models import FolderCursor, Request
from mailpoll.sync.poller import Poller
from tests.mailpoll.factories import mail

pytestmark = pytest.mark.django_db


def subjects():
    return sorted(Request.objects.values_list("subject", flat=True))


def poll(mailbox, poller=None):
    results = (poller or Poller()).poll(mailbox)
    mailbox.refresh_from_db()
    return {r.folder: r for r in results}


def cursor(mailbox, folder):
    return FolderCursor.objects.get(mailbox=mailbox, folder=folder)


# -- item 6: one missing folder ----------------------------------------------------------------------------------

def test_a_renamed_folder_is_an_error_of_its_own_and_the_other_folders_go_on(dovecot, imap_mailbox, admin_client):
    mailbox = imap_mailbox(folders=["Reports", "INBOX"])
    dovecot.create_folder(mailbox.username, "Reports")
    dovecot.append(mailbox.username, "Reports", mail("report"))
    poll(mailbox)
    before = cursor(mailbox, "Reports")
    with dovecot.session(mailbox.username) as client:
        client.rename_folder("Reports", "Reports-2026")
    dovecot.append(mailbox.username, "INBOX", mail("main-1"))

    results = poll(mailbox)
    assert subjects() == ["main-1", "report"]  # INBOX read although Reports comes first and fails
    assert "doesn't exist" in results["Reports"].error
    after = cursor(mailbox, "Reports")
    assert "doesn't exist" in after.last_error and after.last_error_at is not None
    assert (after.uidvalidity, after.last_uid) == (before.uidvalidity, before.last_uid)  # kept for when it is back
    assert cursor(mailbox, "INBOX").last_error == ""
    # said on the mailbox, as a failure of the folder, not as a server to back off from
    assert "folder Reports could not be read" in mailbox.last_error and mailbox.next_attempt_at is None

    page = admin_client.get(reverse("admin:mailpoll_mailbox_change", args=[mailbox.pk])).content.decode()
    problems = re.findall(r'<td class="field-problem">(.*?)</td>', page, re.S)
    assert len(problems) == 2 and sum("Mailbox doesn&#x27;t exist" in p for p in problems) == 1

    # renamed back: read from where it stopped, and the error is gone
    with dovecot.session(mailbox.username) as client:
        client.rename_folder("Reports-2026", "Reports")
    dovecot.append(mailbox.username, "Reports", mail("report-2"))
    poll(mailbox)
    assert subjects() == ["main-1", "report", "report-2"]
    assert cursor(mailbox, "Reports").last_error == "" and mailbox.consecutive_failures == 0


def test_a_folder_that_never_existed_gets_a_row_without_position_until_it_does(dovecot, imap_mailbox):
    mailbox = imap_mailbox(folders=["INBOX", "Typo"])
    dovecot.append(mailbox.username, "INBOX", mail("main"))
    poll(mailbox)
    typo = cursor(mailbox, "Typo")
    assert (typo.uidvalidity, typo.last_uid) == (None, 0) and "doesn't exist" in typo.last_error
    assert subjects() == ["main"]

    dovecot.create_folder(mailbox.username, "Typo")
    dovecot.append(mailbox.username, "Typo", mail("late"))
    poll(mailbox)  # a first poll for it now, in the mailbox's initial mode ('full')
    typo.refresh_from_db()
    assert subjects() == ["late", "main"]
    assert (typo.uidvalidity, typo.last_uid, typo.last_error) == (dovecot.uidvalidity(mailbox.username, "Typo"), 1, "")


# -- item 7: one message the server cannot read ------------------------------------------------------------------

@pytest.fixture
def unreadable(dovecot):
    """Make one stored message unreadable to Dovecot (its Maildir file, mode 000); restored at the end."""
    damaged = []

    def damage(user, folder, uid):
        path = dovecot.message_file(user, folder, uid)
        damaged.append((path, path.stat().st_mode))
        path.chmod(0)
        return path

    yield damage
    for path, mode in damaged:
        if path.exists():
            path.chmod(mode)


def test_a_message_dovecot_cannot_read_fails_alone_by_its_uid_and_the_cursor_waits_before_it(
        dovecot, imap_mailbox, unreadable, settings):
    settings.MAILPOLL_FETCH_BATCH = 20
    mailbox = imap_mailbox()
    uids = dovecot.append_many(mailbox.username, "INBOX", [mail(f"m{i}") for i in range(6)])
    path = unreadable(mailbox.username, "INBOX", uids[2])

    [result] = poll(mailbox).values()
    assert subjects() == ["m0", "m1", "m3", "m4", "m5"]  # the rest of its batch is stored
    assert list(result.failed) == [uids[2]] and "FETCH failed" in result.failed[uids[2]]
    row = cursor(mailbox, "INBOX")
    assert row.last_uid == uids[1]  # right before the unreadable one: the cursor stops at a gap
    assert row.last_error.startswith(f"uid {uids[2]} not stored:") and "Internal error" in row.last_error
    assert f"1 message(s) not stored; first: INBOX uid {uids[2]}: " in mailbox.last_error
    assert mailbox.consecutive_failures == 1 and mailbox.next_attempt_at is None

    # every later poll asks for it again: once it can be read, it is stored and the folder catches up
    path.chmod(0o600)
    [result] = poll(mailbox).values()
    assert subjects() == ["m0", "m1", "m2", "m3", "m4", "m5"] and not result.failed
    row.refresh_from_db()
    assert (row.last_uid, row.last_error) == (uids[5], "") and mailbox.consecutive_failures == 0


def test_an_unreadable_message_in_a_later_batch_keeps_the_batches_before_it(dovecot, imap_mailbox, unreadable,
                                                                             settings):
    settings.MAILPOLL_FETCH_BATCH = 3
    mailbox = imap_mailbox(folders=["INBOX", "Other"])
    dovecot.create_folder(mailbox.username, "Other")
    uids = dovecot.append_many(mailbox.username, "INBOX", [mail(f"m{i}") for i in range(8)])
    dovecot.append(mailbox.username, "Other", mail("other"))
    unreadable(mailbox.username, "INBOX", uids[4])

    results = poll(mailbox)
    # batches [1,2,3] and [4,(5),6] stored but for 5; the folder stops there for this poll; Other is read
    # on a new session, since Dovecot hung up on the refusal
    assert subjects() == ["m0", "m1", "m2", "m3", "m5", "other"]
    assert list(results["INBOX"].failed) == [uids[4]]
    assert cursor(mailbox, "INBOX").last_uid == uids[3]
    assert cursor(mailbox, "Other").last_uid == 1
