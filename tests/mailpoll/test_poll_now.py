"""The mailbox list: *Poll now* polls now (issue 24 §4), and what the list shows first, within 1,400 px.

Poll now marks the mailboxes due and notifies, at its commit, the channel a running ``pollmail`` LISTENs on
between cycles: a real ``pollmail`` with a 60 s interval stores a new message well before its next cycle.
The list's width is measured in Debian's Chromium (as tests/e2e does), with the admin's side bar and filters.
"""

import re
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from django.db import connection, transaction
from django.urls import reverse
from django.utils import timezone

from mailpoll.admin.forms import MIN_POLL_INTERVAL, MailboxForm
from mailpoll.models import Mailbox, Request
from mailpoll.sync.poller import POLL_NOW_CHANNEL, mark_due
from tests.factories import OrgFactory, UserFactory
from tests.mailpoll.factories import MailboxFactory, mail
from tests.support.admin_browser import CHROMIUM, change_list_layout
from tests.support.processes import ManagedProcess, process_env, wait_for

MAILBOXES_URL = reverse("admin:mailpoll_mailbox_changelist")
DOCS = Path(__file__).resolve().parents[2] / "docs" / "mail.md"
INTERVAL = 60  # pollmail's --interval: a poll before it is Poll now's doing


def poll_now(client, *mailboxes):
    return client.post(MAILBOXES_URL, {"action": "poll_now", "_selected_action": [m.pk for m in mailboxes]},
                       follow=True)


@pytest.fixture
def listening():
    """A connection of the test's own, LISTENing where pollmail does; returns what it was notified of."""
    params = connection.get_connection_params()
    for key in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(key, None)
    with psycopg.connect(autocommit=True, **params) as conn:
        conn.execute(f"LISTEN {POLL_NOW_CHANNEL}")
        yield lambda: [n.channel for n in conn.notifies(timeout=0.5, stop_after=1)]


@pytest.mark.django_db(transaction=True)
def test_poll_now_notifies_at_its_commit_and_only_when_it_made_a_mailbox_due(listening):
    due, off = MailboxFactory(), MailboxFactory(enabled=False)

    with pytest.raises(RuntimeError), transaction.atomic():
        assert mark_due([due.pk]) == 1
        raise RuntimeError("rolled back")
    assert listening() == []  # nothing was committed: nobody is woken

    assert mark_due([off.pk]) == 0
    assert listening() == []

    assert mark_due([due.pk, off.pk]) == 1
    assert listening() == [POLL_NOW_CHANNEL]
    assert Mailbox.objects.get(pk=due.pk).last_polled_at is None


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_poll_now_makes_a_running_pollmail_poll_before_its_next_cycle(dovecot, processes, media, admin_client):
    user, password = dovecot.add_user()
    mailbox = MailboxFactory(host=dovecot.host, port=dovecot.port, username=user, password=password,
                             initial_mode="full")
    processes(lambda: ManagedProcess("pollmail", "--interval", str(INTERVAL), env=process_env(MEDIA_ROOT=media)))
    wait_for(lambda: Mailbox.objects.get(pk=mailbox.pk).last_success_at, timeout=30, message="the first cycle")
    dovecot.append(user, "INBOX", mail("after poll now"))

    poll_now(admin_client, mailbox)

    wait_for(lambda: Request.objects.filter(subject="after poll now").exists(), timeout=INTERVAL / 3,
             message="pollmail to poll the mailbox after Poll now, well before its next cycle")


@pytest.mark.django_db
def test_the_list_shows_health_last_error_and_next_try_first(admin_client):
    MailboxFactory(consecutive_failures=2, last_error="host:993: ConnectionRefusedError: [Errno 111] refused")

    response = admin_client.get(MAILBOXES_URL)

    columns = [name for name in response.context["cl"].list_display if name != "action_checkbox"]
    assert columns[:5] == ["mailbox", "health", "last_error_short", "next_try_column", "attention"]
    assert columns.index("account") > columns.index("attention")


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium: run scripts/install_browser.sh")
def test_the_list_fits_1400_px_with_the_side_bar_and_the_filters(live_server):
    org = OrgFactory(name="An agency client with a rather long name")
    now = timezone.now()
    MailboxFactory(org=org, name="reports-inbox-of-a-client", host="imap.mail-provider-example.com", port=993,
                   security="tls", username="reports-intake@a-client-with-a-long-domain.example", live=True,
                   consecutive_failures=3, last_error_at=now - timedelta(minutes=3), last_polled_at=now,
                   last_error="imap.mail-provider-example.com:993 INBOX: ConnectionRefusedError: [Errno 111] refused")
    MailboxFactory(org=org, name="gmail service", gmail_service=True, last_success_at=now, last_polled_at=now)
    MailboxFactory(org=org, name="graph delegated", graph_oauth=True)
    admin = UserFactory(username="root", org=org)
    admin.is_staff = admin.is_superuser = True
    admin.save()

    shown = change_list_layout(live_server, MAILBOXES_URL)

    assert shown["sidebar"] and shown["filters"]
    assert shown["overflow"] <= 0, f"the list is {shown['overflow']} px wider than its place at 1,400 px"
    assert [h.lower() for h in shown["headers"][1:5]] == ["mailbox", "health", "last error", "next try at"]


def test_the_docs_and_the_form_give_the_same_minimum_poll_interval():
    row = next(line for line in DOCS.read_text().splitlines() if line.startswith("| Poll interval |"))
    field = MailboxForm().fields["poll_interval"]

    said = {re.search(r"at least (\d+)", text).group(1) for text in (row, field.help_text)}
    assert said == {str(MIN_POLL_INTERVAL)}
    assert field.widget.attrs["min"] == MIN_POLL_INTERVAL
