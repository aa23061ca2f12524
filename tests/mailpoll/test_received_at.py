"""A Request's received time: its ``Date:`` header, else when the server received the message (issue 24 §4).

IMAP's INTERNALDATE (the real Dovecot), Gmail's ``internalDate`` and Graph's ``receivedDateTime`` (the loopback
fakes), for accepted messages and for the rejected ones known only by their headers (over the size limit);
the downstream document then carries that time, not the moment intake stored it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from mailpoll.attachments import downstream_document
from mailpoll.models import Attachment, Request, RequestStatus
from tests.mailpoll.factories import CSV, MailboxFactory, mail, poll_now
from tests.support.fake_graph import USER as GRAPH_USER
from tests.support.gmail_mailboxes import gmail_mailbox

# The providers' tokens commit their own transactions, and Graph downloads on threads of their own.
pytestmark = pytest.mark.django_db(transaction=True)

ARRIVED = datetime(2026, 6, 1, 9, 30, tzinfo=timezone(timedelta(hours=2)))  # 07:30 UTC
WRITTEN = datetime(2026, 5, 31, 18, 0, tzinfo=UTC)


def dated(subject: str, date: str | None = None, **kwargs) -> bytes:
    """A message with the ``Date:`` header ``date`` (none without it: ``mail`` writes none)."""
    return mail(subject, headers=[("Date", date)] if date else (), **kwargs)


def received(subject: str) -> datetime | None:
    return Request.objects.get(subject=subject).received_at


@pytest.mark.parametrize("header, expected", [
    (None, ARRIVED),  # no Date: the server's INTERNALDATE
    ("not a date at all", ARRIVED),  # a Date nobody can read counts as none
    ("Sun, 31 May 2026 18:00:00 +0000", WRITTEN),  # the sender's Date wins
])
def test_imap_falls_back_to_internaldate_without_a_usable_date_header(dovecot, imap_mailbox, header, expected):
    mailbox = imap_mailbox()
    dovecot.append(mailbox.username, "INBOX", dated("report", header), date=ARRIVED)

    poll_now(mailbox)

    assert received("report") == expected


def test_a_batch_keeps_each_message_its_own_internaldate(dovecot, imap_mailbox, settings):
    settings.MAILPOLL_FETCH_BATCH = 3
    mailbox = imap_mailbox()
    days = {f"m{n}": ARRIVED + timedelta(days=n) for n in range(5)}
    for subject, day in days.items():
        dovecot.append(mailbox.username, "INBOX", dated(subject), date=day)

    poll_now(mailbox)

    assert {subject: received(subject) for subject in days} == days


def test_an_oversized_imap_message_is_rejected_with_its_internaldate(dovecot, imap_mailbox, settings):
    settings.MAILPOLL_MAX_MESSAGE_BYTES = 2000
    mailbox = imap_mailbox()
    dovecot.append(mailbox.username, "INBOX", dated("huge", body="x" * 5000), date=ARRIVED)

    poll_now(mailbox)

    request = Request.objects.get(subject="huge")
    assert (request.status, request.received_at) == (RequestStatus.REJECTED, ARRIVED)


def test_the_downstream_gets_the_servers_time_not_when_intake_stored_it(dovecot, imap_mailbox):
    mailbox = imap_mailbox()
    dovecot.append(mailbox.username, "INBOX", dated("with csv", attachments=[("r.csv", CSV, "text/csv")]),
                   date=ARRIVED)

    poll_now(mailbox)

    attachment = Attachment.objects.select_related("request__mailbox").get(filename="r.csv")
    assert datetime.fromisoformat(downstream_document(attachment)["received_at"]) == ARRIVED


def test_gmail_falls_back_to_internal_date(gmail, settings):
    settings.MAILPOLL_MAX_MESSAGE_BYTES = 5000
    ms = int(ARRIVED.timestamp() * 1000)
    gmail.add(dated("plain"), internal_ms=ms)
    gmail.add(dated("dated", "Sun, 31 May 2026 18:00:00 +0000"), internal_ms=ms)
    gmail.add(dated("huge", body="x" * 8000), internal_ms=ms + 60_000)

    poll_now(gmail_mailbox())

    assert received("plain") == ARRIVED
    assert received("dated") == WRITTEN
    assert Request.objects.get(subject="huge").status == RequestStatus.REJECTED
    assert received("huge") == ARRIVED + timedelta(minutes=1)


@pytest.fixture
def graph_with_times(graph, monkeypatch):
    """The Graph fake, whose delta items carry ``receivedDateTime`` when ``$select`` asks for it, as Graph's do."""
    served = graph._delta_item

    def item(kind, message, options):
        answer = served(kind, message, options)
        if kind == "created" and "receivedDateTime" in options.get("$select", "").split(","):
            answer["receivedDateTime"] = message.received.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return answer

    monkeypatch.setattr(graph, "_delta_item", item)
    return graph


def test_graph_falls_back_to_received_date_time(graph_with_times, settings):
    settings.MAILPOLL_MAX_MESSAGE_BYTES = 4096
    graph_with_times.add("inbox", dated("plain"), received=ARRIVED)
    graph_with_times.add("inbox", dated("dated", "Sun, 31 May 2026 18:00:00 +0000"), received=ARRIVED)
    graph_with_times.add("inbox", dated("huge", body="x" * 8000), received=ARRIVED + timedelta(minutes=2))

    poll_now(MailboxFactory(provider="graph", auth="service", host="", security="tls", username=GRAPH_USER,
                            initial_mode="full"))

    assert received("plain") == ARRIVED
    assert received("dated") == WRITTEN
    assert Request.objects.get(subject="huge").status == RequestStatus.REJECTED
    assert received("huge") == ARRIVED + timedelta(minutes=2)
