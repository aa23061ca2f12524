"""The alerts' jobs: the daily run that queues each org's detection, the detection, and the digests it queues.

``detect_drops_daily`` (periodic, INSIGHT_DETECT_DROPS_CRON; off when empty) belongs to the system org: it queues
one ``detect_drops`` job per org, keyed by org and day, so several workers or a rerun queue no second one while
it is live, and a second run of the day records nothing new anyway (alerts are UNIQUE). ``detect_drops`` records
the org's alerts, then queues a ``send_alert_digest`` job per member who asked for one, keyed by member and day.
"""

from __future__ import annotations

import logging
import smtplib
from datetime import date, datetime

from jobs.queue import enqueue_many
from jobs.registry import DedupScope, JobType, check_cron, register
from seoinsight.models import Org

from .. import conf
from . import digest
from .detect import detect

log = logging.getLogger(__name__)

DAILY = "detect_drops_daily"
DETECT = "detect_drops"


def periodic_type() -> JobType | None:
    """The daily type, when INSIGHT_DETECT_DROPS_CRON names when it runs; None when it is empty (off) or wrong.

    A wrong expression stops the daily run only, logged here and said by the check insight.E001: every process
    (the web too) starts anyway.
    """
    problem = cron_problem()
    if problem:
        log.error("%s: no daily detection", problem)
        return None
    cron = conf.get("INSIGHT_DETECT_DROPS_CRON").strip()
    return JobType(DAILY, queue_detections, cron=cron) if cron else None


def cron_problem() -> str | None:
    """What is wrong with INSIGHT_DETECT_DROPS_CRON, or None (empty is fine: off)."""
    cron = conf.get("INSIGHT_DETECT_DROPS_CRON")
    if not isinstance(cron, str):
        return f"INSIGHT_DETECT_DROPS_CRON is {cron!r}, not text"
    if not cron.strip():
        return None
    try:
        check_cron(cron.strip())
    except ValueError as exc:
        return f"INSIGHT_DETECT_DROPS_CRON is not a cron expression ({exc})"
    return None


def detect_key(org_id: str, day: date) -> str:
    return f"{DETECT}:{org_id}:{day.isoformat()}"


def queue_detections(job) -> dict:
    """The periodic job: one ``detect_drops`` per org for the day of its period."""
    day = datetime.fromisoformat(job.payload["period"]).date()
    orgs = list(Org.objects.order_by("pk").values_list("pk", flat=True))
    queued = 0
    for org_id in orgs:
        # One statement per org: each job is its org's (the org switcher, the Operator group's jobs list).
        queued += enqueue_many(DETECT, org_id=org_id, items=[({"day": day.isoformat()}, detect_key(org_id, day))])
    return {"day": day.isoformat(), "orgs": len(orgs), "queued": queued}


@register(DETECT, dedup_scope=DedupScope.ACTIVE)
def detect_drops(job) -> dict:
    """Record the org's alerts as of the day, then queue the digests of the members who asked for one."""
    day = date.fromisoformat(job.payload["day"])
    org = Org.objects.get(pk=job.org_id)
    alerts = detect(org, day)
    digests = digest.queue_digests(org.pk, day)
    log.info("job=%s org %s: %s alert(s) recorded, %s digest(s) queued", job.id, org.pk, len(alerts), digests)
    return {"day": day.isoformat(), "recorded": [alert.pk for alert in alerts], "digests_queued": digests}


# A refused or unreachable mail server is worth another try (JOBS_RETRY_BASE, doubling); the error stays on the job.
register(digest.JOB_TYPE, digest.send, dedup_scope=DedupScope.ACTIVE, max_attempts=5,
         retry_on=(smtplib.SMTPException, OSError))
