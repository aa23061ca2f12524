"""One document, one Idempotency-Key, however often it is sent: the key is the document's, not the entry's,
so a document held again (an operator's Retry failed after "delivered downstream, but not imported") is
recorded once by the downstream."""

import uuid

import pytest

from mailpoll import attachments
from mailpoll.models import Attachment, AttachmentStatus
from mailpoll.sync.store import store_message
from outbox import entries, sender
from outbox.models import Entry
from tests.mailpoll.corpus import CSV
from tests.mailpoll.factories import MailboxFactory, mail
from tests.support.processes import run_burst

pytestmark = pytest.mark.django_db


def test_a_document_sent_again_after_retry_failed_carries_the_same_key(downstream, settings):
    settings.OUTBOX_RETRY_BASE_SECONDS = settings.OUTBOX_RETRY_MAX_SECONDS = 60.0
    downstream.answers = [500]  # down: the CSV is held
    mailbox = MailboxFactory()
    target = mailbox.site_target
    store_message(mailbox, "INBOX", 1, mail("Clicks", attachments=[("clicks.csv", CSV, "text/csv")]))
    run_burst()
    csv = Attachment.objects.get(document_type="csv")
    assert csv.status == AttachmentStatus.HELD

    # Its routed site target is gone meanwhile (as SET_NULL leaves it when the target is deleted).
    Attachment.objects.filter(pk=csv.pk).update(site_target=None)
    entries.retry_now(list(Entry.objects.values_list("pk", flat=True)))
    assert sender.run()["delivered"] == 1  # acknowledged: "delivered downstream, but not imported"
    csv.refresh_from_db()
    assert csv.status == AttachmentStatus.FAILED and csv.error.startswith("delivered downstream, but not imported")

    Attachment.objects.filter(pk=csv.pk).update(site_target=target)  # a target again; then Retry failed
    assert attachments.retry_failed([csv.pk]) == [csv.pk]
    run_burst()

    csv.refresh_from_db()
    assert csv.status == AttachmentStatus.DONE
    sent = [r.key for r in downstream.requests if r.document.get("document_type") == "csv"]
    assert len(sent) == 3 and len(set(sent)) == 1, f"one document, keys {sent}"


@pytest.mark.parametrize(("a", "b", "same"), [
    (("o", "mailpoll.attachment:1", "aa"), ("o", "mailpoll.attachment:1", "aa"), True),
    (("o", "mailpoll.attachment:1", "aa"), ("o", "mailpoll.attachment:2", "aa"), False),
    (("o", "mailpoll.attachment:1", "aa"), ("p", "mailpoll.attachment:1", "aa"), False),
    # An id reused for other content (a database restored from an old backup): another document.
    (("o", "mailpoll.attachment:1", "aa"), ("o", "mailpoll.attachment:1", "bb"), False),
])
def test_the_key_is_a_function_of_the_documents_identity(a, b, same):
    assert isinstance(entries.idempotency_key(*a), uuid.UUID)
    assert (entries.idempotency_key(*a) == entries.idempotency_key(*b)) is same
