"""The attachment state machine (``mailpoll.attachments``): the retry-or-fail rule, each guarded
transition from every state, set-based releases, and the CHECK constraints that back them."""

import uuid
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs.models import Job
from mailpoll import attachments
from mailpoll.sync import watchdog
from mailpoll.attachments import FAIL, RELEASE, TransitionError, after_stuck
from mailpoll.models import Attachment, AttachmentStatus, Request
from tests.mailpoll.factories import AttachmentFactory, RequestFactory

PENDING, PROCESSING, HELD, DONE, FAILED, SKIPPED = (
    AttachmentStatus.PENDING, AttachmentStatus.PROCESSING, AttachmentStatus.HELD, AttachmentStatus.DONE,
    AttachmentStatus.FAILED, AttachmentStatus.SKIPPED)


@pytest.mark.parametrize("attempts, max_attempts, expected", [
    (0, 3, RELEASE),      # released by hand before any run, say
    (1, 3, RELEASE),
    (2, 3, RELEASE),
    (3, 3, FAIL),         # the third run died too
    (5, 3, FAIL),         # released by hand past the cap: the watchdog gives up at once
    (1, 1, FAIL),
    (5, None, RELEASE),   # an operator's Release has no cap
    (0, None, RELEASE),
])
def test_a_stuck_attachment_is_released_while_runs_are_left(attempts, max_attempts, expected):
    assert after_stuck(attempts, max_attempts) == expected


def attachment_in(status: str) -> Attachment:
    traits = {PENDING: {}, PROCESSING: {"processing": True}, HELD: {"held": True}, DONE: {"done": True},
              FAILED: {"failed": True}, SKIPPED: {"skipped": True}}
    return AttachmentFactory(**traits[status])


def a_run(job_id=None, attempt: int = 1) -> SimpleNamespace:
    """A run of a process_attachment job, as ``start`` and a run's own transitions see it: its id and attempt."""
    return SimpleNamespace(id=job_id or uuid.uuid4(), attempts=attempt)


TRANSITIONS = {
    "start": lambda pk: attachments.start(pk, a_run()) is not None,
    "finish": attachments.finish,
    "fail": lambda pk: attachments.fail(pk, "RuntimeError: boom"),
    "requeue": attachments.requeue,
    "delivered": attachments.delivered,
    "fail_held": lambda pk: attachments.fail_held(pk, "delivered downstream, but not imported: no site target"),
}


@pytest.mark.django_db
@pytest.mark.parametrize("transition, before, after", [
    ("start", PENDING, PROCESSING),
    ("start", PROCESSING, None),  # a duplicate job: the running one keeps it
    ("start", HELD, None),
    ("start", DONE, None),
    ("start", FAILED, None),
    ("start", SKIPPED, None),
    ("finish", PROCESSING, DONE),
    ("finish", PENDING, None),    # released by the watchdog while this run worked
    ("finish", FAILED, None),     # failed by an operator meanwhile
    ("fail", PENDING, FAILED),    # the job failed before it could start a run
    ("fail", PROCESSING, FAILED),
    ("fail", FAILED, FAILED),
    ("fail", HELD, None),        # its run ended well: a late job failure does not undo that
    ("fail", DONE, None),
    ("fail", SKIPPED, None),
    ("requeue", FAILED, PENDING),
    ("requeue", PENDING, None),   # retried from the admin meanwhile: it has its own job
    ("requeue", PROCESSING, None),
    ("requeue", HELD, None),
    ("requeue", DONE, None),
    ("delivered", HELD, DONE),
    ("delivered", PROCESSING, None),
    ("delivered", DONE, None),    # a second acknowledgement changes nothing
    ("delivered", FAILED, None),
    ("fail_held", HELD, FAILED),
    ("fail_held", DONE, None),
    ("fail_held", PROCESSING, None),
])
def test_each_transition_moves_only_from_the_states_it_leaves(transition, before, after):
    """``after`` None: the row is not where the transition expects it, so nothing moves and the caller is told."""
    attachment = attachment_in(before)

    moved = TRANSITIONS[transition](attachment.pk)

    assert moved is (after is not None)
    assert Attachment.objects.get(pk=attachment.pk).status == (after or before)


@pytest.mark.django_db
@pytest.mark.parametrize("downstream_url, after", [("", DONE), ("http://127.0.0.1:9/documents", HELD)])
def test_a_finished_run_is_held_while_a_downstream_is_configured(settings, downstream_url, after):
    settings.DOWNSTREAM_URL = downstream_url
    attachment = attachment_in(PROCESSING)

    assert attachments.finish(attachment.pk)

    assert Attachment.objects.get(pk=attachment.pk).status == after


@pytest.mark.django_db
def test_a_run_counts_its_attempt_and_a_requeue_clears_what_the_failure_left():
    attachment = AttachmentFactory()
    assert attachments.start(attachment.pk, a_run())
    attachment.refresh_from_db()
    assert attachment.attempts == 1 and attachment.processing_started_at is not None

    assert attachments.fail(attachment.pk, "")
    attachment.refresh_from_db()
    assert attachment.error == "failed"  # a failure always says something

    assert attachments.requeue(attachment.pk)
    attachment.refresh_from_db()
    assert (attachment.status, attachment.error, attachment.processing_started_at, attachment.attempts) == (
        PENDING, "", None, 1)


@pytest.mark.django_db
def test_the_watchdog_moves_any_number_of_stuck_rows_in_the_same_few_statements():
    def run(stuck: int, given_up: int) -> tuple[dict, int]:
        for _ in range(stuck):
            AttachmentFactory(stuck=True)
        for _ in range(given_up):
            AttachmentFactory(stuck=True, attempts=watchdog.MAX_ATTEMPTS)
        with CaptureQueriesContext(connection) as queries:
            outcome = watchdog.run_once()
        return outcome, sum(q["sql"].lstrip().upper().startswith("UPDATE") for q in queries.captured_queries)

    small = run(1, 1)
    large = run(10, 5)

    assert (small[0], large[0]) == ({"released": 1, "failed": 1}, {"released": 10, "failed": 5})
    assert small[1] == large[1] == 2  # one guarded UPDATE per outcome, not one per row


@pytest.mark.django_db
def test_a_given_up_attachment_says_how_often_it_was_stuck():
    attachment = AttachmentFactory(stuck=True, attempts=4)

    assert attachments.release_stuck(max_attempts=3) == attachments.Released(released=[], failed=[attachment.pk])

    attachment.refresh_from_db()
    assert (attachment.status, attachment.error) == (FAILED, "stuck in processing 4 times; given up")
    assert attachment.processing_started_at is not None  # the run it gave up on
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_the_operator_releases_past_the_watchdogs_cap_and_only_rows_it_picked():
    picked = AttachmentFactory(stuck=True, attempts=5)
    other = AttachmentFactory(stuck=True)
    young = AttachmentFactory(processing=True)

    outcome = attachments.release_stuck([picked.pk, young.pk])

    assert outcome == attachments.Released(released=[picked.pk], failed=[])
    statuses = dict(Attachment.objects.values_list("pk", "status"))
    assert (statuses[picked.pk], statuses[other.pk], statuses[young.pk]) == (PENDING, PROCESSING, PROCESSING)
    assert list(Job.objects.values_list("payload", flat=True)) == [{"attachment_id": picked.pk}]


@pytest.mark.django_db
def test_released_rows_of_several_orgs_get_jobs_in_their_own_org():
    ours, theirs = AttachmentFactory(stuck=True), AttachmentFactory(stuck=True)
    assert ours.request.org_id != theirs.request.org_id

    attachments.release_stuck(max_attempts=3)

    assert {(j.org_id, j.payload["attachment_id"]) for j in Job.objects.all()} == {
        (ours.request.org_id, ours.pk), (theirs.request.org_id, theirs.pk)}


@pytest.mark.django_db
def test_a_set_transition_that_moves_fewer_rows_than_it_locked_is_an_error():
    attachment = AttachmentFactory()  # pending, not processing as the caller believed

    with pytest.raises(TransitionError, match="0 of 1 locked attachment"), transaction.atomic():
        attachments._move({attachment.pk: attachment.request.org_id}, PROCESSING, status=PENDING)


@pytest.mark.django_db
def test_every_factory_state_is_a_row_the_database_accepts():
    for status in (PENDING, PROCESSING, HELD, DONE, FAILED, SKIPPED):
        assert Attachment.objects.get(pk=attachment_in(status).pk).status == status
    AttachmentFactory(stuck=True)
    RequestFactory(rejected=True)


def now():
    return timezone.now()


@pytest.mark.django_db
@pytest.mark.parametrize("model, build, change, constraint", [
    (Request, {}, {"status": "lost"}, "request_status_valid"),
    (Request, {}, {"status": "rejected"}, "request_rejected_has_reason"),
    (Attachment, {}, {"status": "gone"}, "attachment_status_valid"),
    (Attachment, {}, {"kind": "inline"}, "attachment_kind_valid"),
    (Attachment, {"processing": True}, {"processing_started_at": None}, "attachment_started_when_processed"),
    (Attachment, {"done": True}, {"processing_started_at": None}, "attachment_started_when_processed"),
    (Attachment, {"held": True}, {"processing_started_at": None}, "attachment_started_when_processed"),
    (Attachment, {}, {"status": PROCESSING}, "attachment_started_when_processed"),
    (Attachment, {}, {"processing_started_at": now}, "attachment_unstarted_when_waiting"),
    (Attachment, {"skipped": True}, {"processing_started_at": now}, "attachment_unstarted_when_waiting"),
    (Attachment, {"processing": True}, {"status": PENDING}, "attachment_unstarted_when_waiting"),
    (Attachment, {"failed": True}, {"error": ""}, "attachment_failed_has_error"),
    (Attachment, {}, {"status": FAILED}, "attachment_failed_has_error"),
])
def test_the_database_refuses_a_row_in_a_state_it_cannot_be_in(model, build, change, constraint):
    row = (RequestFactory if model is Request else AttachmentFactory)(**build)
    change = {name: value() if callable(value) else value for name, value in change.items()}

    with pytest.raises(IntegrityError, match=constraint), transaction.atomic():
        model.objects.filter(pk=row.pk).update(**change)


@pytest.mark.django_db
def test_a_stuck_row_is_older_than_the_setting(settings):
    settings.MAILPOLL_STUCK_AFTER = 600
    old = AttachmentFactory(processing=True, processing_started_at=timezone.now() - timedelta(minutes=11))
    AttachmentFactory(processing=True, processing_started_at=timezone.now() - timedelta(minutes=9))

    assert attachments.release_stuck(max_attempts=3).released == [old.pk]
