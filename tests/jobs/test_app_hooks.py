"""The apps' on_fail / on_requeue hooks: an Import or an Attachment tells the same story as its job,
whoever moved the job (worker, sweep, operator)."""


import pytest
from django.db import transaction

from imports.models import Import, ImportStatus
from jobs import queue
from jobs.models import Job, JobStatus
from mailpoll.attachments import enqueue_processing
from mailpoll.models import Attachment, AttachmentStatus
from tests.factories import ImportFactory, JobFactory, OrgFactory, SiteTargetFactory
from tests.mailpoll.factories import AttachmentFactory

pytestmark = pytest.mark.django_db


def an_import() -> Import:
    return ImportFactory(site_target=SiteTargetFactory(site__org=OrgFactory(id="acme")), filename="pages.csv")


def an_attachment() -> Attachment:
    attachment = AttachmentFactory(request__mailbox__org=OrgFactory(id="acme"), filename="report.pdf",
                                   document_type="pdf")
    with transaction.atomic():
        enqueue_processing("acme", [attachment.pk])
    return attachment


def test_an_operator_requeue_brings_a_failed_import_back_to_queued():
    imp = an_import()
    queue.mark_failed([imp.job_id], "marked failed by ops")
    imp.refresh_from_db()
    assert (imp.status, imp.error) == (ImportStatus.FAILED, "marked failed by ops")

    assert queue.requeue([imp.job_id]).requeued == [imp.job_id]

    imp.refresh_from_db()
    assert (imp.status, imp.error, imp.finished_at) == (ImportStatus.QUEUED, "", None)
    assert Job.objects.get(pk=imp.job_id).status == JobStatus.QUEUED


def test_an_operator_requeue_brings_a_failed_attachment_back_to_pending():
    attachment = an_attachment()
    job = Job.objects.get(type="process_attachment")
    queue.mark_failed([job.id], "marked failed by ops")
    attachment.refresh_from_db()
    assert attachment.status == AttachmentStatus.FAILED

    assert queue.requeue([job.id]).requeued == [job.id]

    attachment.refresh_from_db()
    assert (attachment.status, attachment.error) == (AttachmentStatus.PENDING, "")
    assert Job.objects.get(pk=job.id).dedup_key == f"process_attachment:{attachment.pk}"


def test_a_requeue_whose_on_requeue_raises_is_undone(temporary_type):
    def broken(job):
        raise RuntimeError("domain row is gone")

    temporary_type("test_requeue_hook", lambda job: None, on_requeue=broken)
    job = JobFactory(type="test_requeue_hook", failed=True)
    result = queue.requeue([job.id])

    assert result.refused == {job.id: "on_requeue raised RuntimeError: domain row is gone"}
    job.refresh_from_db()
    assert (job.status, job.error) == (JobStatus.FAILED, "boom")
