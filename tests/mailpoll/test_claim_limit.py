"""A poller's claim takes at most its limit of due mailboxes, whatever the planner believes about the table."""

import pytest
from django.db import connection

from mailpoll import sql
from mailpoll.models import Mailbox
from mailpoll.poller import Poller
from tests.mailpoll.factories import MailboxFactory
from tests.support.planner import believe_nearly_empty

pytestmark = pytest.mark.django_db

# The claim as it was written first, the locking SELECT as a subquery in FROM: under the statistics below it
# ran once per row of the outer scan, and each run locked the next due mailboxes.
_LOCKING_SELECT, _UPDATE = sql.CLAIM_DUE_MAILBOXES.split("WITH due AS MATERIALIZED (", 1)[1].split("\n)\n", 1)
SUBQUERY_IN_FROM = _UPDATE.replace("FROM due\n", f"FROM ({_LOCKING_SELECT}\n) AS due\n")


def test_a_claim_never_takes_more_than_its_limit():
    MailboxFactory.create_batch(4)
    believe_nearly_empty("mailpoll_mailbox")

    with connection.cursor() as cur:  # the hazard is real under these statistics
        cur.execute("SAVEPOINT old_form")
        cur.execute(SUBQUERY_IN_FROM, {"limit": 1})
        assert len(cur.fetchall()) > 1
        cur.execute("ROLLBACK TO SAVEPOINT old_form")

    first = Poller().claim_due(limit=1)
    assert len(first) == 1
    assert Mailbox.objects.filter(last_polled_at__isnull=False).count() == 1
    assert len(Poller().claim_due(limit=2)) == 2
    assert Mailbox.objects.filter(last_polled_at__isnull=False).count() == 3
