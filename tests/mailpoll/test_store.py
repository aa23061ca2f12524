"""Storing messages: dedup by the UNIQUE constraint, attachments and their jobs, rejections."""

import threading
from pathlib import Path

import pytest
from django.db import connection

from jobs.models import Job
from mailpoll.sync import store
from mailpoll.models import Attachment, AttachmentStatus, Request, RequestStatus
from mailpoll.sync.store import store_message, store_messages, store_rejected
from tests.mailpoll.corpus import hostile_corpus, tiny_pdf
from tests.mailpoll.factories import CSV, MailboxFactory, mail


@pytest.mark.django_db
def test_a_message_with_documents_becomes_a_request_attachments_and_jobs(media):
    mailbox = MailboxFactory()
    raw = mail(attachments=[("report.csv", CSV, "text/csv"), ("scan.pdf", tiny_pdf(), "application/pdf"),
                            ("notes.docx", b"PK\x03\x04 not really", "application/octet-stream")])
    stored = store_message(mailbox, "INBOX", 7, raw)

    assert stored.created and stored.status == RequestStatus.ACCEPTED
    request = Request.objects.get(pk=stored.request_id)
    assert (request.org_id, request.uid, request.folder) == (mailbox.org_id, 7, "INBOX")
    documents = {a.filename: a for a in request.attachments.all()}
    assert {n: a.status for n, a in documents.items()} == {
        "report.csv": AttachmentStatus.PENDING, "scan.pdf": AttachmentStatus.PENDING,
        "notes.docx": AttachmentStatus.SKIPPED}
    assert documents["report.csv"].context_text.startswith("See attached.")
    csv = documents["report.csv"]
    assert Path(media / csv.file.name).read_bytes() == CSV
    assert csv.file.name == f"mail/{csv.sha256[:2]}/{csv.sha256}"  # by content, never by the sender's name
    assert sorted(Job.objects.values_list("type", flat=True)) == ["process_attachment"] * 2


@pytest.mark.django_db
def test_the_same_message_twice_is_one_request():
    mailbox = MailboxFactory()
    raw = mail()
    assert store_message(mailbox, "INBOX", 1, raw).created
    again = store_message(mailbox, "Archive", 9, raw)
    assert not again.created and again.status == "duplicate"
    assert Request.objects.count() == 1


@pytest.mark.django_db
def test_one_message_in_two_orgs_is_one_request_each():
    raw = mail()
    assert store_message(MailboxFactory(), "INBOX", 1, raw).created
    assert store_message(MailboxFactory(), "INBOX", 1, raw).created
    assert Request.objects.count() == 2


@pytest.mark.django_db
def test_without_message_id_the_raw_bytes_identify_the_message():
    mailbox = MailboxFactory()
    raw = mail(message_id=None)
    store_message(mailbox, "INBOX", 1, raw)
    request = Request.objects.get()
    import hashlib

    assert request.source_ref == "sha256:" + hashlib.sha256(raw).hexdigest()


@pytest.mark.django_db
def test_a_body_only_message_becomes_a_body_document():
    mailbox = MailboxFactory()
    store_message(mailbox, "INBOX", 1, mail(body="Please check https://shop.example/a"))
    attachment = Attachment.objects.get()
    assert (attachment.kind, attachment.document_type) == ("body", "body")
    # The text is the Request's body_text: stored once, no file.
    assert attachment.file.name == "" and attachment.request.body_text.startswith("Please check")
    assert Job.objects.get().payload == {"attachment_id": attachment.pk}


@pytest.mark.django_db
def test_a_batch_reports_one_outcome_per_message_in_order(caplog):
    mailbox = MailboxFactory()
    known = mail("known")
    store_message(mailbox, "INBOX", 1, known)
    twice = mail("twice")
    outcomes = store_messages(mailbox, "INBOX", [
        (2, mail("a", attachments=[("report.csv", CSV, "text/csv")])), (3, known), (4, twice), (5, twice),
        (6, b"\x00\x01 not a mail"), (7, mail("b")),
    ])
    assert [(o.created, o.status) for o in outcomes] == [
        (True, "accepted"), (False, "duplicate"), (True, "accepted"), (False, "duplicate"),
        (True, "rejected"), (True, "accepted")]
    by_uid = {r.uid: r for r in Request.objects.all()}
    assert sorted(by_uid) == [1, 2, 4, 6, 7]
    assert [o.request_id for o in outcomes if o.created] == [by_uid[uid].pk for uid in (2, 4, 6, 7)]
    assert "unparseable" in by_uid[6].reject_reason and not by_uid[6].attachments.exists()
    assert f"mailbox={mailbox.pk} folder=INBOX uid=6 rejected: unparseable message" in caplog.text
    assert by_uid[2].attachments.get().document_type == "csv"
    assert Job.objects.count() == 4  # known's body, a's CSV, twice's body, b's body


@pytest.mark.django_db
def test_a_batch_of_long_texts_is_inserted_in_several_statements_of_one_transaction(monkeypatch):
    from django.test.utils import CaptureQueriesContext

    monkeypatch.setattr(store, "STATEMENT_TEXT_BUDGET", 5000)
    mailbox = MailboxFactory()
    batch = [(uid, mail(f"m{uid}", body="Long. " * 500, attachments=[("report.csv", CSV, "text/csv")]))
             for uid in range(1, 4)]
    with CaptureQueriesContext(connection) as queries:
        outcomes = store_messages(mailbox, "INBOX", batch)
    assert [o.status for o in outcomes] == ["accepted"] * 3
    assert sum("INSERT INTO mailpoll_request" in q["sql"] for q in queries.captured_queries) == 3
    assert Attachment.objects.count() == 3 == Job.objects.count()
    assert sorted(Request.objects.values_list("subject", flat=True)) == ["m1", "m2", "m3"]


@pytest.mark.django_db
def test_the_constraint_decides_when_the_fast_path_misses(monkeypatch):
    """Another poller committed one of the batch's messages after our SELECT: it is a duplicate, the rest stored."""
    mailbox = MailboxFactory()
    raced = mail("raced", attachments=[("report.csv", CSV, "text/csv")])
    store_message(mailbox, "INBOX", 1, raced)
    monkeypatch.setattr(store, "stored_refs", lambda org_id, refs: set())
    outcomes = store_messages(mailbox, "INBOX", [(2, mail("first")), (3, raced), (4, mail("last"))])
    assert [o.status for o in outcomes] == ["accepted", "duplicate", "accepted"]
    assert Request.objects.count() == 3
    # The duplicate brought no second set of attachment rows or jobs.
    assert Attachment.objects.filter(request__subject="raced").count() == 1
    assert Job.objects.count() == 3


@pytest.mark.django_db
def test_rejections_are_recorded_and_deduplicated():
    mailbox = MailboxFactory()
    first = store_rejected(mailbox, "INBOX", 3, "big@x", "message is 30,000,000 bytes, over the limit")
    second = store_rejected(mailbox, "INBOX", 3, "big@x", "message is 30,000,000 bytes, over the limit")
    assert first.created and not second.created
    request = Request.objects.get()
    assert request.status == RequestStatus.REJECTED and "over the limit" in request.reject_reason


@pytest.mark.django_db
def test_the_hostile_corpus_is_fully_accounted_for_and_writes_only_under_media(media):
    mailbox = MailboxFactory()
    corpus = hostile_corpus()
    outcomes = [store_message(mailbox, "INBOX", uid, raw) for uid, (name, raw) in enumerate(corpus, 1)]
    created = [o for o in outcomes if o.created]
    duplicates = [o for o in outcomes if not o.created]
    # every message is a Request (accepted or rejected) unless it shares a Message-ID with an earlier one
    assert len(created) == Request.objects.count()
    assert len(created) + len(duplicates) == len(corpus)
    stored_files = [p for p in Path(media).rglob("*") if p.is_file()]
    assert all(p.resolve().is_relative_to(Path(media).resolve()) for p in stored_files)
    assert all(p.parent.parent.name == "mail" for p in stored_files)
    assert set(Attachment.objects.exclude(file="").values_list("sha256", flat=True)) == {p.name for p in stored_files}


def test_concurrent_stores_of_one_message_create_one_request(transactional_db):
    """The INSERT's UNIQUE constraint is the authority: no prior SELECT can see the other's uncommitted row."""
    mailbox = MailboxFactory()
    raw = mail(attachments=[("report.csv", CSV, "text/csv")])
    barrier = threading.Barrier(4)
    outcomes, errors = [], []

    def store_once():
        try:
            barrier.wait()
            outcomes.append(store_message(mailbox, "INBOX", 1, raw))
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=store_once) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sum(o.created for o in outcomes) == 1
    assert Request.objects.count() == 1
    assert Attachment.objects.count() == 1 and Job.objects.count() == 1


def test_two_pollers_storing_one_batch_in_opposite_orders_do_not_deadlock(transactional_db):
    """One org, two mailboxes, the same messages in opposite orders: keys are taken in one order, no cycle."""
    org_mailbox = MailboxFactory()
    other = MailboxFactory(org=org_mailbox.org)
    outcomes, errors = [], []
    for round_ in range(3):
        batch = [(uid, mail(f"r{round_}-m{uid}")) for uid in range(1, 101)]
        barrier = threading.Barrier(2)

        def store_batch(mailbox, fetched, barrier=barrier):
            try:
                barrier.wait()
                outcomes.extend(store_messages(mailbox, "INBOX", fetched))
            except Exception as exc:
                errors.append(exc)
            finally:
                connection.close()

        threads = [threading.Thread(target=store_batch, args=(org_mailbox, batch)),
                   threading.Thread(target=store_batch, args=(other, batch[::-1]))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []
    assert sum(o.created for o in outcomes) == 300 == Request.objects.count()


@pytest.mark.django_db
def test_a_resent_message_with_a_long_message_id_is_a_duplicate(media):
    """Over the column's length the normalized id is hashed, not the raw bytes: a resend is still a duplicate."""
    long_id = "<" + "x" * 400 + "@lists.client.example>"
    raw = mail("Long id", message_id=long_id, attachments=[("pages.csv", CSV, "text/csv")])
    resent = b"Received: from relay.example by mx.agency.example; Mon, 06 Jan 2025 10:16:00 +0100\r\n" + raw
    mailbox = MailboxFactory()

    assert store_message(mailbox, "INBOX", 1, raw).created
    again = store_message(mailbox, "Archive", 2, resent)

    assert not again.created and again.status == "duplicate"
    request = Request.objects.get()
    assert request.source_ref.startswith("message-id-sha256:") and len(request.source_ref) <= 300
    assert Job.objects.filter(type="process_attachment").count() == 1


@pytest.mark.django_db
def test_an_unparseable_message_keeps_its_decoded_headers_and_its_message_id():
    """A MIME bomb is refused, but its Request says who sent what, and a resend of it is a duplicate."""
    bomb = dict(hostile_corpus())["multipart-bomb"]
    mailbox = MailboxFactory()
    first = store_message(mailbox, "INBOX", 1, bomb)
    again = store_message(mailbox, "INBOX", 2, b"Received: from relay.example; Mon, 06 Jan 2025 10:16:00 +0100\r\n" + bomb)

    request = Request.objects.get(pk=first.request_id)
    assert request.status == RequestStatus.REJECTED and "nested too deeply" in request.reject_reason
    assert (request.source_ref, request.sender, request.subject) == (
        "bomb@client.example", "anne@client.example", "Weekly report")
    assert not again.created
