"""Scheduled Search Console pulls: one periodic system job queues each due target's own pull.

A target's schedule (``SiteTarget.pull_schedule``: off, daily, weekly) says when it is due
(``seoinsight.models.pull_due``, pure); ``pull_days`` how many days up to yesterday each pull fetches again.

The periodic job ``queue_scheduled_pulls`` belongs to the system org and reads no org's figures: for each due
target it queues that target's ``import_api`` pull under the target's own org, one transaction per target. In
that transaction a guarded UPDATE first takes the target's turn (``pull_queued_at`` moved into the current
period only if it is still before it): of two runs at once — two workers, a rerun, an operator's requeue — the
second waits for the first's row lock, then finds the turn taken and queues nothing. The pull's dedup key (target
and day) besides: while a pull of that day is live, no second one is queued beside it.

Off unless ``IMPORT_SCHEDULED_PULLS_EVERY`` is set (``periodic_type``): the job type is registered only then.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from django.db import connection, transaction
from django.db.models import Q

from jobs.registry import JobType
from seoinsight.models import PullSchedule, SiteTarget, pull_due, pull_period_start

from . import conf
from .searchconsole_api import PullAlreadyQueued, create_api_import

log = logging.getLogger(__name__)

JOB_TYPE = "queue_scheduled_pulls"


def periodic_type() -> JobType | None:
    """The periodic job type, run every IMPORT_SCHEDULED_PULLS_EVERY seconds; None when that is 0 (off)."""
    every = conf.get("IMPORT_SCHEDULED_PULLS_EVERY")
    if every <= 0:
        return None
    return JobType(JOB_TYPE, queue_scheduled_pulls, every=timedelta(seconds=every))


def refresh_window(days: int, today: date) -> tuple[date, date]:
    """The days a scheduled pull fetches: ``days`` of them, the last one yesterday (both ends included).

    >>> refresh_window(10, date(2026, 12, 4))
    (datetime.date(2026, 11, 24), datetime.date(2026, 12, 3))
    """
    end = today - timedelta(days=1)
    return end - timedelta(days=days - 1), end


def dedup_key(target_id: int, day: date) -> str:
    return f"import_api:scheduled:{target_id}:{day.isoformat()}"


@dataclass(frozen=True)
class Outcome:
    target_id: int
    org_id: str
    import_id: int | None = None  # None: nothing queued
    reason: str = ""  # why not

    def as_dict(self) -> dict:
        shown = {"target": self.target_id, "org": self.org_id}
        return {**shown, "import": self.import_id} if self.import_id else {**shown, "reason": self.reason}


def queue_scheduled_pulls(job) -> dict:
    """The periodic job: queue the pull of every target due now, each under its own org; returns what it did."""
    now = database_now()
    outcomes = [queue_pull(target, now) for target in scheduled_targets()
                if pull_due(target.pull_schedule, target.pull_queued_at, now)]
    return {"queued": [o.as_dict() for o in outcomes if o.import_id],
            "not_queued": [o.as_dict() for o in outcomes if not o.import_id]}


def scheduled_targets():
    return (SiteTarget.objects.exclude(pull_schedule=PullSchedule.OFF).select_related("site")
            .order_by("pk"))


def queue_pull(target: SiteTarget, now: datetime) -> Outcome:
    """Take ``target``'s turn for the period of ``now`` and queue its pull, in one transaction; or say why not."""
    org_id = target.site.org_id
    if not target.has_search_console_credentials:
        # Not taken: the pull is queued as soon as a key is pasted, in the same period.
        log.warning("site target %s of org %s: scheduled pull not queued: no Search Console credentials "
                    "(paste a service-account key on the target's page)", target.pk, org_id)
        return Outcome(target.pk, org_id, reason="no Search Console credentials")
    today = now.astimezone(UTC).date()
    start, end = refresh_window(target.pull_days, today)
    with transaction.atomic():
        if not take_turn(target, now):
            return Outcome(target.pk, org_id, reason="already queued this period")
        try:
            with transaction.atomic():
                imp = create_api_import(target, start, end, dedup_key=dedup_key(target.pk, today))
        except PullAlreadyQueued as exc:
            # The turn stays taken: that live pull is this period's.
            log.info("site target %s of org %s: scheduled pull not queued: job=%s is still on it",
                     target.pk, org_id, exc.job.id)
            return Outcome(target.pk, org_id, reason=f"job {exc.job.id} is still on it")
    log.info("job=%s import=%s site target %s of org %s: scheduled pull queued for %s to %s",
             imp.job_id, imp.pk, target.pk, org_id, start, end)
    return Outcome(target.pk, org_id, import_id=imp.pk)


def take_turn(target: SiteTarget, now: datetime) -> bool:
    """Move the target's ``pull_queued_at`` to ``now`` if no pull was queued in the period of ``now``.

    The UPDATE locks the row; a concurrent one waits for this transaction, then re-reads the row and no longer
    matches. The schedule is matched too: a target switched off meanwhile is left alone.
    """
    period = pull_period_start(target.pull_schedule, now)
    return SiteTarget.objects.filter(
        Q(pull_queued_at__isnull=True) | Q(pull_queued_at__lt=period),
        pk=target.pk, pull_schedule=target.pull_schedule,
    ).update(pull_queued_at=now) == 1


def database_now() -> datetime:
    """The database's clock: every worker judges the periods by the same one."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]

