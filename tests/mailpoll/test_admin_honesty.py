"""The mail admin says what is true now, and only to whom it may: a recovered mailbox's error as a previous
one, a live mailbox's watching process for superusers only, and a *Resync folder* for any cursor."""

import logging
from datetime import timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from mailpoll import cursor
from mailpoll.admin.cursors import EXPIRED_UIDVALIDITY
from mailpoll.admin.display import error_heading
from mailpoll.models import FolderCursor, LiveWatch, Mailbox
from tests.factories import OrgFactory, UserFactory
from tests.mailpoll.factories import MailboxFactory

pytestmark = pytest.mark.django_db

MAILBOXES = reverse("admin:mailpoll_mailbox_changelist")
ERROR = "LOGIN refused: [AUTHENTICATIONFAILED] Invalid credentials (Failure)"


def staff(org, *codenames):
    user = UserFactory(is_staff=True, org=org)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="mailpoll", codename__in=codenames))
    return user


@pytest.fixture
def editor(client):
    org = OrgFactory()
    user = staff(org, "view_mailbox", "change_mailbox")
    client.force_login(user)
    user.org = org
    return user


def html(client, url, **query) -> str:
    response = client.get(url, query)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def change_url(box) -> str:
    return reverse("admin:mailpoll_mailbox_change", args=[box.pk])


# -- 8: after a recovery, the last error is the previous one ---------------------------------------------------

def test_a_recovered_mailboxs_error_is_shown_as_the_previous_one(admin_client):
    success = timezone.now() - timedelta(minutes=3)
    box = MailboxFactory(name="recovered", last_error=ERROR, last_error_at=success - timedelta(minutes=5),
                         consecutive_failures=0, last_success_at=success, last_polled_at=success)
    stamp = timezone.localtime(success).strftime("%Y-%m-%d %H:%M:%S %Z")

    for page in (html(admin_client, MAILBOXES), html(admin_client, change_url(box))):
        assert f"previous error (before the last success at {stamp}):" in page
        assert "LOGIN refused" in page


def test_a_failing_mailboxs_error_is_its_current_state(admin_client):
    box = MailboxFactory(name="failing", last_error=ERROR, last_error_at=timezone.now(), consecutive_failures=2,
                         last_success_at=timezone.now() - timedelta(hours=1))

    for page in (html(admin_client, MAILBOXES), html(admin_client, change_url(box))):
        assert "previous error" not in page and "LOGIN refused" in page


@pytest.mark.parametrize("error, failures, success, heading", [
    ("", 0, None, ""),
    ("", 0, "now", ""),
    (ERROR, 1, "now", ""),
    (ERROR, 0, None, "previous error"),
    (ERROR, 0, "now", "previous error (before the last success at "),
])
def test_error_heading(error, failures, success, heading):
    shown = error_heading(error, failures, timezone.now() if success else None)

    assert shown.startswith(heading) and (bool(shown) is bool(heading))


# -- T: which process watches a live mailbox is the deployment's business --------------------------------------

def live_box(org):
    box = MailboxFactory(org=org, name="live-box", live=True, host="127.0.0.1", security="none")
    LiveWatch.objects.create(mailbox=box, host="worker-7.internal", pid=48213, since=timezone.now(),
                             last_event_at=timezone.now(), last_event="new mail: 1 stored")
    return box


def test_org_staff_see_since_when_a_mailbox_is_watched_not_where(client, editor):
    box = live_box(editor.org)

    for page in (html(client, MAILBOXES), html(client, change_url(box))):
        assert "watched live since" in page and "last event new mail: 1 stored" in page
        assert "worker-7.internal" not in page and "48213" not in page


def test_a_superuser_sees_the_watching_host_and_pid(admin_client):
    box = live_box(OrgFactory())

    for page in (html(admin_client, MAILBOXES), html(admin_client, change_url(box))):
        assert "watched by worker-7.internal/48213 since" in page


# -- 4: Resync folders ------------------------------------------------------------------------------------------

def resync(client, boxes, cursors=None):
    """The action on ``boxes``: its page of folders, then (``cursors`` given) those picked, applied."""
    data = {"action": "resync_folders", "_selected_action": [b.pk for b in boxes]}
    if cursors is None:
        return client.post(MAILBOXES, data)
    return client.post(MAILBOXES, {**data, "apply": "1", "cursor": [c.pk for c in cursors]}, follow=True)


def said(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def test_the_action_lists_the_folders_of_the_selected_mailboxes(client, editor):
    box = MailboxFactory(org=editor.org, gmail_oauth=True)
    inbox = FolderCursor.objects.create(mailbox=box, folder="INBOX", position="4711")
    other = FolderCursor.objects.create(mailbox=MailboxFactory(org=editor.org), folder="Elsewhere",
                                        uidvalidity=1, last_uid=1)

    page = resync(client, [box]).content.decode()

    assert f'name="cursor" value="{inbox.pk}"' in page and "4711" in page
    assert f'value="{other.pk}"' not in page
    assert FolderCursor.objects.get(pk=inbox.pk).position == "4711"  # nothing done before "apply"


def test_resync_drops_an_api_cursor_and_starts_the_providers_resync(client, editor, caplog):
    caplog.set_level(logging.INFO)
    box = MailboxFactory(org=editor.org, gmail_oauth=True, last_polled_at=timezone.now())
    row = FolderCursor.objects.create(mailbox=box, folder="INBOX", position="{'x': 1}", last_sync_ts=timezone.now())

    response = resync(client, [box], [row])

    row.refresh_from_db()
    assert (row.position, row.resyncs) == ("", 1)
    assert row.resync_started_at is not None and row.last_resync_at == row.resync_started_at
    assert row.resync_reason == f"Resync folders, asked by {editor.get_username()} in the admin"
    # The next poll's plan is the provider's resync: the whole folder, dedup absorbing repeats.
    assert cursor.plan_changes_read(row.position, True, box.initial_mode) == cursor.ReadPlan("resync", None, "full")
    assert Mailbox.objects.get(pk=box.pk).last_polled_at is None  # due at the next cycle
    assert said(response) == ["1 folder will be read again in full at the next poll of their mailbox (dedup "
                              "absorbs what was stored before)"]
    (entry,) = LogEntry.objects.filter(object_id=str(box.pk))
    assert entry.user_id == editor.pk
    assert "Resync folder INBOX: API cursor dropped" in entry.get_change_message()
    assert f"mailbox={box.pk} folder=INBOX resync asked by user={editor.pk}: API cursor dropped" in caplog.text
    assert "{'x': 1}" not in caplog.text


def test_resync_expires_an_imap_cursor_into_a_full_sweep(client, editor):
    box = MailboxFactory(org=editor.org, host="127.0.0.1", security="none")
    row = FolderCursor.objects.create(mailbox=box, folder="INBOX", uidvalidity=1700000000, last_uid=4711,
                                      last_sync_ts=timezone.now())

    resync(client, [box], [row])

    row.refresh_from_db()
    assert (row.uidvalidity, row.last_uid, row.sweep_until, row.resyncs) == (EXPIRED_UIDVALIDITY, 0, None, 1)
    assert row.resync_started_at is None  # IMAP's sweep tracks itself (sweep_until), nothing ends a "resync"
    plan = cursor.plan_folder_sync(box.initial_mode, None, cursor.FolderStatus("INBOX", 1700000000, 4800),
                                   row.state())
    assert (plan.mode, plan.search, plan.uidvalidity_reset) == ("uidvalidity-reset", cursor.SEARCH_ALL, True)
    assert "expired: the next poll sweeps the whole folder again" in html(client, change_url(box))


def test_a_cursor_with_nothing_to_expire_is_left_alone_and_said_so(client, editor):
    box = MailboxFactory(org=editor.org, graph_oauth=True)
    unread = FolderCursor.objects.create(mailbox=box, folder="inbox")
    resyncing = FolderCursor.objects.create(mailbox=box, folder="archive", resync_started_at=timezone.now(),
                                            resyncs=1)

    response = resync(client, [box], [unread, resyncing])

    assert said(response) == ["0 folders will be read again in full at the next poll of their mailbox (dedup "
                              "absorbs what was stored before); 2 skipped (already resyncing from the start; not "
                              "read yet: its first poll reads it)"]
    assert FolderCursor.objects.get(pk=resyncing.pk).resyncs == 1 and not LogEntry.objects.exists()


def test_another_orgs_cursor_is_out_of_reach(client, editor):
    foreign_box = MailboxFactory(gmail_oauth=True)
    foreign = FolderCursor.objects.create(mailbox=foreign_box, folder="INBOX", position="4711")
    box = MailboxFactory(org=editor.org, gmail_oauth=True)
    mine = FolderCursor.objects.create(mailbox=box, folder="INBOX", position="4712")

    assert client.get(change_url(foreign_box)).status_code == 404
    assert "4711" not in resync(client, [box, foreign_box]).content.decode()
    response = resync(client, [box, foreign_box], [foreign, mine])  # a forged id among the picked

    assert FolderCursor.objects.get(pk=foreign.pk).position == "4711"
    assert FolderCursor.objects.get(pk=mine.pk).position == ""
    assert "1 skipped (not a folder of the selected mailboxes)" in said(response)[0]


def test_resync_needs_the_right_to_change_the_mailbox(client):
    org = OrgFactory()
    client.force_login(staff(org, "view_mailbox"))
    box = MailboxFactory(org=org, gmail_oauth=True)
    row = FolderCursor.objects.create(mailbox=box, folder="INBOX", position="4711")

    page = html(client, MAILBOXES)
    response = resync(client, [box], [row])

    assert "resync_folders" not in page
    assert FolderCursor.objects.get(pk=row.pk).position == "4711"
    assert response.status_code in (200, 403)


@pytest.mark.django_db(transaction=True)
def test_a_wedged_gmail_cursor_is_resynced_by_the_next_poll_without_duplicates(gmail, admin_client):
    """Issue 19's wedge: a malformed historyId as the cursor; Resync folders, then one poll reads the label
    again in full, dedup keeping one request per message, and the cursor is Gmail's again."""
    from mailpoll.models import Request
    from mailpoll.sync.poller import Poller
    from tests.mailpoll.factories import mail
    from tests.support.gmail_mailboxes import gmail_mailbox

    box = gmail_mailbox()
    for subject in ("one", "two"):
        gmail.add(mail(subject))
    Poller().poll(box)
    assert Request.objects.filter(mailbox=box).count() == 2
    row = FolderCursor.objects.get(mailbox=box, folder="INBOX")
    FolderCursor.objects.filter(pk=row.pk).update(position="{'x': 1}")  # what a hostile answer once left there
    gmail.add(mail("three"))

    resync(admin_client, [box], [row])
    Poller().poll(Mailbox.objects.get(pk=box.pk))

    row.refresh_from_db()
    assert sorted(Request.objects.filter(mailbox=box).values_list("subject", flat=True)) == ["one", "three", "two"]
    assert row.position == str(gmail.history_id) and row.resync_started_at is None and row.resyncs == 1
    assert Mailbox.objects.get(pk=box.pk).consecutive_failures == 0


def test_an_imap_folder_resynced_is_swept_again_by_the_next_poll_without_duplicates(dovecot, imap_mailbox,
                                                                                   admin_client):
    """Against Dovecot: a message whose request was lost below the cursor comes back, the others stay one."""
    from mailpoll.models import Request
    from mailpoll.sync.poller import Poller
    from tests.mailpoll.factories import mail

    box = imap_mailbox()
    for subject in ("one", "two", "three"):
        dovecot.append(box.username, "INBOX", mail(subject))
    Poller().poll(box)
    row = FolderCursor.objects.get(mailbox=box, folder="INBOX")
    uidvalidity = row.uidvalidity
    Request.objects.filter(mailbox=box, subject="two").delete()  # below the cursor: never read again by itself

    resync(admin_client, [box], [row])
    Poller().poll(Mailbox.objects.get(pk=box.pk))

    row.refresh_from_db()
    assert sorted(Request.objects.filter(mailbox=box).values_list("subject", flat=True)) == ["one", "three", "two"]
    assert (row.uidvalidity, row.last_uid, row.sweep_until) == (uidvalidity, 3, None)
    assert Mailbox.objects.get(pk=box.pk).consecutive_failures == 0
