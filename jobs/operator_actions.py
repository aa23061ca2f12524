"""The operator's transitions (the admin's actions): requeue, and mark failed.

Same rules as the worker and the sweep, judged by the database under each row's
lock: a job that moved meanwhile is left alone, with the reason.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.db import IntegrityError, connection, transaction

from . import finish, registry, rows, sql
from .models import Job, JobStatus
from .storable import MAX_ERROR_CHARS, describe, storable_text

log = logging.getLogger(__name__)

REQUEUE = "requeue"
FAIL = "fail"
NOT_REQUEUEABLE = "only failed jobs and zombies can be requeued: not done, queued or live running jobs"
NO_BUDGET = "no attempts left: use Requeue with a fresh budget"


def operator_requeue(status: str, counted: int, max_attempts: int, *, stale: bool, fresh: bool) -> str:
    """What an operator's requeue does to a job: REQUEUE, FAIL, or the reason it is refused.

    The sweep's rules: a zombie with attempts left goes back, without goes to
    failed. A failed job runs again only with attempts left, unless the operator
    gives it a fresh budget.

    >>> operator_requeue("failed", 1, 3, stale=False, fresh=False)
    'requeue'
    >>> operator_requeue("failed", 3, 3, stale=False, fresh=False) == NO_BUDGET
    True
    >>> operator_requeue("running", 3, 3, stale=True, fresh=False)
    'fail'
    >>> operator_requeue("running", 3, 3, stale=True, fresh=True)
    'requeue'
    """
    if status == JobStatus.FAILED:
        return REQUEUE if fresh or counted < max_attempts else NO_BUDGET
    if status == JobStatus.RUNNING and stale:
        return REQUEUE if fresh or counted < max_attempts else FAIL
    return NOT_REQUEUEABLE


@dataclass
class RequeueResult:
    requeued: list = field(default_factory=list)
    failed: list = field(default_factory=list)  # zombies out of attempts, failed as the sweep would
    folded: dict = field(default_factory=dict)  # zombie id -> the queued job holding its key
    refused: dict = field(default_factory=dict)  # id -> why


def requeue(job_ids, *, fresh_budget: bool = False) -> RequeueResult:
    """Operator action: failed jobs run again; zombies go back now, by the sweep's rules.

    ``fresh_budget``: the claims so far stop counting against ``max_attempts``.
    Each job is judged and moved under its row lock, in a transaction of its
    own; one that moved meanwhile, or whose key a live job holds, is refused
    with the reason. A failed job's ``on_requeue`` runs in its transaction: if
    it raises, that requeue is undone.
    """
    result = RequeueResult()
    for job_id in job_ids:
        try:
            with transaction.atomic():
                _requeue_one(job_id, fresh_budget, result)
        except _Refused as refused:
            result.refused[job_id] = str(refused)
    return result


class _Refused(Exception):
    pass


def _requeue_one(job_id, fresh: bool, result: RequeueResult) -> None:
    job = Job.objects.filter(pk=job_id).only("id", "type").first()
    if job is None:
        raise _Refused("no such job")
    job_type = registry.all_types().get(job.type)
    max_attempts = job_type.max_attempts if job_type else registry.default_max_attempts()
    stale_after = job_type.stale_after if job_type else registry.default_stale_after()
    with connection.cursor() as cursor:
        cursor.execute(sql.OPERATOR_INSPECT, {"id": job.id, "stale_after": stale_after})
        status, attempts, uncounted, outages, enqueued_key, stale = cursor.fetchone()
    job.attempts, job.uncounted_attempts, job.enqueued_key = attempts, uncounted, enqueued_key
    verdict = operator_requeue(status, attempts - uncounted, max_attempts, stale=stale, fresh=fresh)
    if verdict == FAIL:
        rows.update(sql.FAIL_EXHAUSTED, job, error=finish.exhausted_error(outages), outage=0)
        finish.call_on_fail(job)
        result.failed.append(job_id)
    elif verdict != REQUEUE:
        raise _Refused(verdict)
    elif status == JobStatus.RUNNING:
        status, holder = finish.put_back(job, sql.OPERATOR_REQUEUE_STALE, fresh=fresh)
        if status == "done":
            result.folded[job_id] = holder
        else:
            result.requeued.append(job_id)
    else:
        try:
            with transaction.atomic():
                rows.update(sql.OPERATOR_REQUEUE_FAILED, job, fresh=fresh)
        except IntegrityError:
            holder = finish.holder_of(job)
            raise _Refused(f"job {holder} holds its key {enqueued_key!r} and covers the same work") from None
        if job_type is not None and job_type.on_requeue is not None:
            try:
                job.refresh_from_db()
                job_type.on_requeue(job)
            except Exception as exc:
                log.exception("job=%s on_requeue of %s raised; requeue undone", job.id, job.type)
                raise _Refused(f"on_requeue raised {describe(exc)}") from None
        result.requeued.append(job_id)


def mark_failed(job_ids, reason: str) -> list:
    """Operator action: fail queued or running jobs with ``reason``; each one's ``on_fail`` runs in that transaction."""
    with transaction.atomic():
        changed = rows.ids(sql.OPERATOR_FAIL, {"ids": [str(i) for i in job_ids],
                                               "error": storable_text(reason, MAX_ERROR_CHARS)})
        for job in Job.objects.filter(pk__in=changed):
            finish.call_on_fail(job)
    return changed
