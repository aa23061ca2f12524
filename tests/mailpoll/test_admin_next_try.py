"""The mailbox admin's "next try" is the claim's own rule (``mailpoll.sync.sql``), read by the database: the screen
says "next cycle" for exactly the mailboxes the claim takes, and names the backoff and the grant it waits for."""

import re
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.urls import reverse
from django.utils import timezone

from mailpoll.admin.display import EMPTY
from mailpoll.models import GrantState, Mailbox, OAuthGrant
from mailpoll.sync import sql
from tests.mailpoll.factories import MailboxFactory

pytestmark = pytest.mark.django_db

NOW = timezone.now

# name, mailbox fields (times relative to now, in seconds), grant state or None, what the screen says
CASES = [
    ("never polled", {"last_polled_at": None}, None, "next cycle"),
    ("never polled, backoff set", {"last_polled_at": None, "next_attempt_at": 600}, None, "next cycle"),
    ("interval passed", {"last_polled_at": -130, "poll_interval": 120}, None, "next cycle"),
    # Due in 58.5 min: "58 min" whether the page is read 0 or 29 s after the rows are written (a loaded machine).
    ("inside its interval", {"last_polled_at": -90, "poll_interval": 3600}, None, "in 58 min"),
    ("interval passed, backing off", {"last_polled_at": -130, "poll_interval": 120, "next_attempt_at": 600,
                                      "consecutive_failures": 3}, None, "in 9 min (backing off after 3 failures)"),
    ("backoff over", {"last_polled_at": -700, "poll_interval": 120, "next_attempt_at": -10,
                      "consecutive_failures": 3}, None, "next cycle"),
    ("backoff shorter than the interval", {"last_polled_at": -30, "poll_interval": 3600, "next_attempt_at": 60},
     None, "in 59 min"),
    ("oauth, live grant", {"last_polled_at": None, "graph_oauth": True}, GrantState.ACTIVE, "next cycle"),
    ("oauth, needs re-authorization", {"last_polled_at": None, "graph_oauth": True}, GrantState.NEEDS_REAUTH,
     "not until connected"),
    ("oauth, never connected", {"last_polled_at": None, "gmail_oauth": True}, None, "not until connected"),
]


def build(name, fields, grant_state):
    now = NOW()
    fields = dict(fields)
    for moment in ("last_polled_at", "next_attempt_at"):
        if fields.get(moment) is not None:
            fields[moment] = now + timedelta(seconds=fields[moment])
    if "poll_interval" in fields:
        fields["poll_interval"] = timedelta(seconds=fields["poll_interval"])
    box = MailboxFactory(name=name, **fields)
    # The factory's save may set its own times: the row gets exactly the case's.
    Mailbox.objects.filter(pk=box.pk).update(**{k: v for k, v in fields.items()
                                                 if k in ("last_polled_at", "next_attempt_at", "poll_interval")})
    if grant_state is not None:
        failed = {"failed_at": now, "failure_reason": "invalid_grant"} if grant_state == GrantState.NEEDS_REAUTH else {}
        OAuthGrant.objects.create(mailbox=box, provider=box.issuer, refresh_token="x", authorized_at=now,
                                  state=grant_state, **failed)
    return box


def claimed_ids() -> set[int]:
    """What the production claim takes now, rolled back so the screen reads the same rows."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(sql.CLAIM_DUE_MAILBOXES, {"limit": 1000})
            ids = {row[0] for row in cursor.fetchall()}
        transaction.set_rollback(True)
    return ids


def test_the_screen_says_next_cycle_for_exactly_what_the_claim_takes(admin_client):
    boxes = {name: build(name, fields, grant) for name, fields, grant, _ in CASES}
    page = admin_client.get(reverse("admin:mailpoll_mailbox_changelist"))
    rows = {box.name: box for box in page.context["cl"].result_list}
    shown = {name: str(page.context["cl"].model_admin.next_try_at(rows[name])) for name in boxes}

    for name, _, _, expected in CASES:
        assert expected in shown[name], (name, shown[name])
    taken = claimed_ids()
    assert {name for name, box in boxes.items() if box.pk in taken} == {
        name for name in boxes if "next cycle" in shown[name]}


def test_the_change_page_reads_the_same_rule(admin_client):
    box = build("inside its interval", {"last_polled_at": -60, "poll_interval": 120}, None)
    html = admin_client.get(reverse("admin:mailpoll_mailbox_change", args=[box.pk])).content.decode()
    # 120 s after a poll 60 s ago, less the seconds the request itself took (a busy machine: several).
    waits = [int(seconds) for seconds in re.findall(r"\bin (\d+) s\b", html)]
    assert waits and all(50 <= seconds <= 60 for seconds in waits), waits


def test_a_disabled_mailbox_has_no_next_try(admin_client):
    box = build("off", {"last_polled_at": None, "enabled": False}, None)
    page = admin_client.get(reverse("admin:mailpoll_mailbox_changelist"))
    row = next(b for b in page.context["cl"].result_list if b.pk == box.pk)
    assert str(page.context["cl"].model_admin.next_try_at(row)) == EMPTY and box.pk not in claimed_ids()
