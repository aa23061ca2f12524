"""Cancellation: ``jobs.cancel(job_id)`` and the admin's *Cancel* action.

A queued job never starts: it is failed at once (``error='cancelled'``, its
key released) and its type's ``on_fail`` runs in the same transaction. A
running job is asked: ``cancel_requested_at`` is set, and its run is told at its
next heartbeat or ``report_progress`` (``jobs.timeouts``), ends ``failed`` with
``error='cancelled'`` (never retried) and runs ``on_fail``. A run that finishes
before it is told stays as it finished: a cancel that races a finish is one or
the other, never both. A finished job is left alone.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field

from django.db import connection, transaction

from . import finish, sql
from .models import Job, JobStatus

log = logging.getLogger(__name__)

NOT_LIVE = "already finished: only queued or running jobs can be cancelled"
NO_SUCH_JOB = "no such job"


@dataclass
class CancelResult:
    cancelled: list = field(default_factory=list)  # queued: failed now, never started
    asked: list = field(default_factory=list)  # running: told at the next heartbeat or report_progress
    refused: dict = field(default_factory=dict)  # id -> why nothing changed


def cancel(job_id) -> bool:
    """Cancel one job; True if it is now failed ``'cancelled'`` (it was queued) or asked to stop (it is running).

    False, logged, for a finished or unknown job: nothing changed.
    """
    result = cancel_jobs([job_id])
    for refused, why in result.refused.items():
        log.info("job=%s not cancelled: %s", refused, why)
    return not result.refused


def cancel_jobs(job_ids) -> CancelResult:
    """Cancel these jobs: each queued one fails now (``on_fail`` in this transaction), each running one is asked.

    One statement judges every job on its current row (``sql.CANCEL``), so a job
    being claimed, put back or finished meanwhile is cancelled by the rule of
    the state it is in when its row lock is taken.
    """
    ids = [_as_uuid(job_id) for job_id in job_ids]
    result = CancelResult()
    with transaction.atomic():
        changed = {}
        if any(i is not None for i in ids):
            with connection.cursor() as cursor:
                cursor.execute(sql.CANCEL, {"ids": [str(i) for i in ids if i is not None]})
                changed = dict(cursor.fetchall())
        for job in Job.objects.filter(pk__in=[i for i, status in changed.items() if status == JobStatus.FAILED]):
            finish.call_on_fail(job)
    known = set(Job.objects.filter(pk__in=[i for i in ids if i is not None and i not in changed])
                .values_list("pk", flat=True))
    for job_id, given in zip(ids, job_ids, strict=True):
        if job_id in changed:
            (result.cancelled if changed[job_id] == JobStatus.FAILED else result.asked).append(job_id)
        else:
            result.refused[job_id if job_id is not None else given] = NOT_LIVE if job_id in known else NO_SUCH_JOB
    for job_id in result.cancelled:
        log.info("job=%s cancelled before it started", job_id)
    for job_id in result.asked:
        log.info("job=%s cancel requested: its run is told at its next heartbeat or report_progress", job_id)
    return result


def _as_uuid(value) -> uuid.UUID | None:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None
