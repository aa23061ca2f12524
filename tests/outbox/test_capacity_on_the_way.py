"""What intake's gate counts (issue 19, 1b): held entries plus documents on their way — stored, waiting for
their ``process_attachment`` run or in it — in one statement whose cost is the live queue's, not the
attachment table's."""

import pytest
from django.db import connection

from jobs.models import Job
from mailpoll.sync import sql as mailpoll_sql
from mailpoll import attachments
from mailpoll.attachments import enqueue_processing
from mailpoll.models import Attachment, AttachmentStatus
from outbox import capacity
from tests.mailpoll.factories import AttachmentFactory, RequestFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def outbox_on(settings):
    settings.DOWNSTREAM_URL, settings.OUTBOX_CAPACITY = "http://127.0.0.1:9/", 4


def on_their_way(request, n: int) -> list[int]:
    ids = [AttachmentFactory(request=request).pk for _ in range(n)]
    enqueue_processing(request.org_id, ids)
    return ids


def test_documents_waiting_for_their_run_count_with_the_held_ones(outbox_on, held):
    request = RequestFactory()
    on_their_way(request, 2)
    AttachmentFactory(request=request, skipped=True)  # never a document
    AttachmentFactory(request=request, done=True)
    AttachmentFactory(request=request, failed=True)
    held(1)

    current = capacity.intake_depth()
    assert (current.held, current.coming, current.full, current.room) == (1, 2, False, 1)
    assert capacity.depth().coming == 0  # health, metrics and the admin count held entries only

    on_their_way(request, 1)
    current = capacity.intake_gate()
    assert current.full and current.room == 0
    assert "(4 of 4 documents waiting for DOWNSTREAM_URL, 3 of them still being processed)" in (
        capacity.full_reason(current))


def test_a_document_counts_once_whatever_its_jobs_and_no_more_once_its_run_ended(outbox_on):
    request = RequestFactory()
    [pk] = on_their_way(request, 1)
    assert capacity.intake_depth().coming == 1
    assert attachments.start(pk, Job.objects.get(type="process_attachment"))  # its run began (the job is still queued here: no worker claimed it)
    enqueue_processing(request.org_id, [pk])  # a second job for it: still one document
    assert capacity.intake_depth().coming == 1
    Attachment.objects.filter(pk=pk).update(status=AttachmentStatus.HELD)  # its run ended: an entry's now
    assert capacity.intake_depth().coming == 0


def test_without_a_downstream_url_the_gate_runs_no_statement(settings, django_assert_num_queries):
    settings.DOWNSTREAM_URL = ""
    with django_assert_num_queries(0):
        assert capacity.intake_gate() is None


def test_the_count_reads_the_live_jobs_and_never_scans_the_attachment_table(outbox_on):
    request = RequestFactory()
    on_their_way(request, 3)
    with connection.cursor() as cursor:
        # A table grown by years of intake: documents long since done (skipped ones need fewer columns).
        cursor.execute("""
            INSERT INTO mailpoll_attachment (request_id, kind, document_type, filename, original_filename, mime,
                size, sha256, file, status, skip_reason, context_text, attempts, error, extracted_text, created_at)
            SELECT %s, 'file', '', 'logo.png', 'logo.png', 'image/png', 100, '', '', 'skipped', 'small image', '',
                0, '', '', now()
            FROM generate_series(1, 50000)""", [request.pk])
        cursor.execute("ANALYZE mailpoll_attachment")
        cursor.execute("ANALYZE jobs")
        cursor.execute("EXPLAIN " + mailpoll_sql.DOCUMENTS_ON_THEIR_WAY)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert capacity.intake_depth().coming == 3
    assert "Seq Scan on mailpoll_attachment" not in plan, plan
