"""Two operators route the same waiting document at the same moment, from two OS processes: it is imported once."""

from __future__ import annotations

import re

import pytest
from django.db import connection, transaction

from jobs.models import Job
from mailpoll.models import Attachment, AttachmentStatus
from mailpoll.sync.store import store_message
from tests.factories import SiteTargetFactory
from tests.mailpoll.factories import CSV, MailboxFactory, mail
from tests.support.processes import ManagedProcess, process_env, wait_for

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

ROUTE = """
from mailpoll import attachments
from seoinsight.models import SiteTarget
print("routed", attachments.route([{document}], SiteTarget.objects.get(pk={target}), by="{who}"))
"""


def lock_waiters() -> int:
    with connection.cursor() as cursor:
        # Read inside the lock holder's transaction: drop the statistics snapshot it would otherwise keep.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                       " AND wait_event_type = 'Lock'")
        return cursor.fetchone()[0]


def test_two_operators_routing_at_once_import_it_once_into_one_choice():
    mailbox = MailboxFactory(site_target=None)
    store_message(mailbox, "INBOX", 1, mail(attachments=[("Pages.csv", CSV, "text/csv")]))
    document = Attachment.objects.get()
    assert document.status == AttachmentStatus.NEEDS_ROUTE
    targets = {"ana": SiteTargetFactory(site__org=mailbox.org), "bob": SiteTargetFactory(site__org=mailbox.org)}

    with transaction.atomic():
        # Holding the row: both operators reach it and wait on its lock, then go at once.
        Attachment.objects.select_for_update().get(pk=document.pk)
        operators = {who: ManagedProcess("shell", "-c", ROUTE.format(document=document.pk, target=t.pk, who=who),
                                         env=process_env())
                     for who, t in targets.items()}
        wait_for(lambda: lock_waiters() >= 2, timeout=60, message="both operators waiting on the row")
    for process in operators.values():
        assert process.wait(timeout=60) == 0, process.output()

    routed = {who: re.search(r"routed \[(.*)\]", p.output()).group(1) for who, p in operators.items()}
    winners = [who for who, ids in routed.items() if ids == str(document.pk)]
    assert len(winners) == 1 and sorted(routed.values()) == ["", str(document.pk)], routed
    document.refresh_from_db()
    assert (document.status, document.site_target_id, document.route_reason) == (
        AttachmentStatus.PENDING, targets[winners[0]].pk, f"routed by {winners[0]}")
    assert Job.objects.filter(type="process_attachment", payload__attachment_id=document.pk).count() == 1
