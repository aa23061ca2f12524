"""A full disk while a mailed CSV becomes its Import is waited out: the document says it waits for disk space,
its job is retried with backoff, and once space is freed it is imported without anyone pressing Retry (a real
tmpfs as MEDIA_ROOT, filled up, then emptied; a real ``runjobs`` process)."""

import errno
import uuid
from types import SimpleNamespace

import pytest

from imports.models import Import
from jobs.models import Job
from mailpoll import attachments
from mailpoll.attachments import WAITING_FOR_DISK
from mailpoll.models import Attachment, AttachmentStatus
from mailpoll.sync.store import store_message
from tests.mailpoll.factories import CSV, AttachmentFactory, MailboxFactory, mail
from tests.support.processes import runjobs, wait_for
from tests.support.tmpfs import media_tmpfs  # noqa: F401  (fixture)

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


def fill(path) -> None:
    """Write ``path`` until the file system has no byte left."""
    with open(path, "wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 65536)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


def test_a_full_disk_is_waited_out_and_the_document_imported_once_space_is_freed(media_tmpfs, processes):  # noqa: F811
    disk = media_tmpfs
    store_message(MailboxFactory(), "INBOX", 1, mail(attachments=[("pages.csv", CSV, "text/csv")]))
    filler = disk.path / "filler"
    fill(filler)
    processes(runjobs, MEDIA_ROOT=str(disk.path), JOBS_RETRY_BASE="0.5", JOBS_RETRY_MAX="1")

    def waiting():
        attachment = Attachment.objects.get()
        job = Job.objects.get(type="process_attachment")
        return (attachment.status == AttachmentStatus.PENDING and attachment.error.startswith(WAITING_FOR_DISK)
                and job.status == "queued" and job.attempts >= 2 and "out of disk space" in (job.error or ""))

    wait_for(waiting, timeout=60, message="the document waiting for disk space, its job retried")
    assert not Import.objects.exists()

    filler.unlink()  # the operator frees space; nobody presses Retry

    wait_for(lambda: Attachment.objects.filter(status=AttachmentStatus.DONE).exists(), timeout=60,
             message="the document processed once space was freed")
    attachment = Attachment.objects.get()
    assert (attachment.error, attachment.attempts) == ("", 1)  # the runs that waited for disk are not counted
    imp = Import.objects.get(pk=attachment.source_import_id)
    wait_for(lambda: Import.objects.get(pk=imp.pk).status == "done", timeout=60, message="the import done")
    assert Import.objects.get(pk=imp.pk).inserted == 1
    assert not Job.objects.filter(status="failed").exists()


def test_only_the_run_holding_a_document_sends_it_back_to_wait_and_that_run_is_not_counted():
    attachment, job = AttachmentFactory(), SimpleNamespace(id=uuid.uuid4(), attempts=1)
    assert attachments.start(attachment.pk, job) == attachments.STARTED
    error = "[Errno 28] out of disk space writing 0f3a"

    assert not attachments.wait_for_disk(attachment.pk, SimpleNamespace(id=uuid.uuid4(), attempts=1), error)
    assert attachments.wait_for_disk(attachment.pk, job, error)

    attachment.refresh_from_db()
    assert (attachment.status, attachment.attempts, attachment.processing_started_at) == (
        AttachmentStatus.PENDING, 0, None)
    assert attachment.error == f"{WAITING_FOR_DISK} ({error}); tried again automatically"
