"""A process_attachment run that died (kill -9) leaves its document in ``processing``: the re-run of the same
job — a newer attempt, the queue's fence — takes it over at once, while no other job can; the run it replaced
records nothing. The last test kills a real ``runjobs`` mid-run and restarts one."""

import uuid
from types import SimpleNamespace

import psycopg
import pytest

from imports.models import Import
from jobs.models import Job
from mailpoll import attachments, handlers
from mailpoll.attachments import GIVEN_UP, MAX_RUNS, STARTED, TAKEN_OVER
from mailpoll.models import Attachment, AttachmentStatus
from mailpoll.sync.store import store_message
from tests.mailpoll.factories import CSV, AttachmentFactory, MailboxFactory, mail
from tests.support.processes import database_url, runjobs, wait_for

PROCESSING = AttachmentStatus.PROCESSING


def run(job_id, attempt: int) -> SimpleNamespace:
    """A run of a job as the handler sees it: the job's id and its attempt (set by the claim)."""
    return SimpleNamespace(id=job_id, attempts=attempt)


@pytest.fixture
def died():
    """An attachment a run of a job (attempt 1) started, whose worker then died; returns (attachment, job id)."""
    job_id = uuid.uuid4()
    attachment = AttachmentFactory()
    assert attachments.start(attachment.pk, run(job_id, 1)) == STARTED
    return attachment, job_id


@pytest.mark.django_db
def test_the_same_job_s_newer_attempt_takes_its_processing_document_over(died):
    attachment, job_id = died

    assert attachments.start(attachment.pk, run(job_id, 2)) == TAKEN_OVER

    attachment.refresh_from_db()
    assert (attachment.status, attachment.attempts, attachment.run_job_id, attachment.run_attempt) == (
        PROCESSING, 2, job_id, 2)


@pytest.mark.django_db
@pytest.mark.parametrize("other", ["another job", "the same attempt", "an older attempt"])
def test_no_other_run_takes_a_processing_document(died, other):
    attachment, job_id = died
    intruder = {"another job": run(uuid.uuid4(), 5), "the same attempt": run(job_id, 1),
                "an older attempt": run(job_id, 0)}[other]

    assert attachments.start(attachment.pk, intruder) is None

    attachment.refresh_from_db()
    assert (attachment.status, attachment.attempts, attachment.run_attempt) == (PROCESSING, 1, 1)


@pytest.mark.django_db
def test_the_run_taken_over_records_nothing_and_a_failure_of_another_job_leaves_it_alone(died):
    attachment, job_id = died
    assert attachments.start(attachment.pk, run(job_id, 2)) == TAKEN_OVER

    assert not attachments.finish(attachment.pk, run(job_id, 1), extracted_text="from the old run")
    assert not attachments.fail(attachment.pk, "a duplicate job failed", job_id=uuid.uuid4())
    assert attachments.finish(attachment.pk, run(job_id, 2), extracted_text="from the new run")

    attachment.refresh_from_db()
    assert (attachment.status, attachment.extracted_text) == (AttachmentStatus.DONE, "from the new run")


@pytest.mark.django_db
def test_a_document_whose_runs_keep_dying_is_given_up_after_max_runs(died):
    attachment, job_id = died
    for attempt in range(2, MAX_RUNS + 1):
        assert attachments.start(attachment.pk, run(job_id, attempt)) == TAKEN_OVER

    assert attachments.start(attachment.pk, run(job_id, MAX_RUNS + 1)) == GIVEN_UP

    attachment.refresh_from_db()
    assert (attachment.status, attachment.error) == (
        AttachmentStatus.FAILED, f"stuck in processing {MAX_RUNS} times; given up")


@pytest.mark.django_db
def test_a_run_taken_over_while_it_made_the_import_rolls_it_back_file_included(media):
    store_message(MailboxFactory(), "INBOX", 1, mail(attachments=[("pages.csv", CSV, "text/csv")]))
    attachment, job_id = Attachment.objects.get(), uuid.uuid4()
    assert attachments.start(attachment.pk, run(job_id, 1)) == STARTED
    assert attachments.start(attachment.pk, run(job_id, 2)) == TAKEN_OVER  # while the first run still works
    stored = set((media / "imports").rglob("*")) if (media / "imports").exists() else set()

    with pytest.raises(handlers.Superseded):
        handlers._to_import(Attachment.objects.get(), run(job_id, 1))

    assert not Import.objects.exists() and Attachment.objects.get().source_import_id is None
    assert {p for p in (media / "imports").rglob("*") if p.is_file()} == {p for p in stored if p.is_file()}
    report = handlers._to_import(Attachment.objects.get(), run(job_id, 2))  # the run that holds it makes it
    assert Attachment.objects.get().source_import_id == report["import_id"] == Import.objects.get().pk


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_run_leaves_a_document_its_job_s_rerun_processes_at_once(media, processes):
    mailbox = MailboxFactory()
    store_message(mailbox, "INBOX", 1, mail(attachments=[("pages.csv", CSV, "text/csv")]))
    attachment = Attachment.objects.get()
    # JOBS_DB_LOCK_TIMEOUT off: the run waits for the test's lock as long as it is held.
    env = {"MEDIA_ROOT": str(media), "JOBS_DB_LOCK_TIMEOUT": "0"}  # MAILPOLL_STUCK_AFTER stays 900 s, and no pollmail (no watchdog) runs

    # The run stops inside process_attachment: the Import's transaction waits for this lock on its site target.
    with psycopg.connect(database_url()) as holder:
        holder.execute("SELECT 1 FROM seoinsight_sitetarget WHERE id = %s FOR UPDATE", [mailbox.site_target_id])
        first = processes(runjobs, **env)

        def waiting_for_the_lock():
            with psycopg.connect(database_url(), autocommit=True) as probe:
                # The only lock anyone here waits for is the test's (the foreign key is checked at COMMIT).
                return probe.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                     "AND wait_event_type = 'Lock'").fetchone()[0]

        wait_for(waiting_for_the_lock, timeout=60, message="process_attachment inside its Import's INSERT")
        first.kill9()
        holder.rollback()
    assert Attachment.objects.get().status == PROCESSING

    processes(runjobs, **env)  # a worker again: the dead run's job is swept and run again

    attachment = wait_for(lambda: Attachment.objects.filter(pk=attachment.pk, status=AttachmentStatus.DONE).first(),
                          timeout=30, message="the document processed by the job's re-run")
    job = Job.objects.get(type="process_attachment")
    assert (job.status, job.attempts, job.report["import_id"]) == ("done", 2, attachment.source_import_id)
    assert (attachment.attempts, attachment.run_job_id, attachment.run_attempt) == (2, job.id, 2)
    assert Import.objects.get().pk == attachment.source_import_id  # one Import: the dead run's was rolled back
