"""What the job pages show: durations, progress, JSON, the facts of a job, its subject's link."""

from __future__ import annotations

import json
from django.contrib.admin.templatetags.admin_urls import admin_urlname
from django.core.serializers.json import DjangoJSONEncoder
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from .. import registry, subjects
from ..durations import readable_duration  # noqa: F401  (the job pages' durations, imported from here)
from ..errors import CANCELLED, TIMED_OUT
from ..models import JobStatus

STATUS_COLOURS = {
    JobStatus.QUEUED: "#6c757d",
    JobStatus.RUNNING: "#1f6fb2",
    JobStatus.DONE: "#2e7d32",
    JobStatus.FAILED: "#c62828",
}

EMPTY = "—"

# The built-in smoke-test and benchmark type (jobs.handlers): noise to an operator, listed only when asked for.
INTERNAL_TYPES = frozenset({"noop"})


def countable(progress) -> tuple[float, float] | None:
    """``(done, total)`` when ``progress`` holds numbers that make a fraction, else None."""
    if not isinstance(progress, dict):
        return None
    done, total = progress.get("done"), progress.get("total")
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (done, total))
    return (done, total) if numbers and total > 0 else None


# The most of one JSON column (payload, progress, report) a job's page shows: a report at its 1 MB cap,
# or a payload written before task arguments were bounded, must not make a page of megabytes.
PREVIEW_CHARS = 20_000


def pretty_json(value):
    """``value`` indented in a ``<pre>``, cut after PREVIEW_CHARS characters with a line saying so."""
    if value is None:
        return EMPTY
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, cls=DjangoJSONEncoder)
    if len(text) <= PREVIEW_CHARS:
        return format_html("<pre>{}</pre>", text)
    return format_html("<pre>{}…</pre><p>The first {} of {} characters are shown.</p>", text[:PREVIEW_CHARS],
                       f"{PREVIEW_CHARS:,}", f"{len(text):,}")


def max_attempts(job_type: str) -> int:
    try:
        return registry.get(job_type).max_attempts
    except registry.UnknownJobType:
        return registry.default_max_attempts()


def plural_jobs(n: int) -> str:
    return f"{n} job" if n == 1 else f"{n} jobs"


class Fact:
    """What the status alone does not say, each a badge beside it and a choice of ``FactFilter``."""

    SCHEDULED = "scheduled"  # queued, first run not before run_after
    RETRY_WAIT = "waiting to retry"  # queued after a failed attempt, backing off until run_after
    CANCEL_REQUESTED = "cancel requested"  # live, told to stop at its next heartbeat
    CANCELLED = "cancelled"
    TIMED_OUT = "timed out"


def job_facts(job, now) -> list[tuple[str, str]]:
    """``(fact, detail)`` for each ``Fact`` true of ``job`` at ``now`` (the database's clock), in that order."""
    facts = []
    waiting = job.status == JobStatus.QUEUED and job.run_after is not None and job.run_after > now
    if waiting:
        until = f"not before {job.run_after:%Y-%m-%d %H:%M:%S %Z}, in {readable_duration(job.run_after - now)}"
        facts.append((Fact.RETRY_WAIT if job.attempts else Fact.SCHEDULED, until))
    live = job.status in (JobStatus.QUEUED, JobStatus.RUNNING)
    if live and job.cancel_requested_at is not None:
        facts.append((Fact.CANCEL_REQUESTED, f"asked at {job.cancel_requested_at:%Y-%m-%d %H:%M:%S %Z}"))
    if job.status == JobStatus.FAILED and (job.cancel_requested_at is not None or job.error == CANCELLED):
        facts.append((Fact.CANCELLED, job.error or ""))
    if (job.error or "").startswith(TIMED_OUT):
        facts.append((Fact.TIMED_OUT, job.error))
    return facts


def subject_html(request, model_admin, subject: subjects.Subject | None) -> str:
    """The subject's label, linked to its admin page when the user may view that page."""
    if subject is None:
        return EMPTY
    label = Truncator(subject.label).chars(60)
    subject_admin = model_admin.admin_site._registry.get(subject.model)
    if subject_admin is None or not subject_admin.has_view_permission(request):
        return format_html('<span title="{}">{}</span>', subject.label, label)
    url = reverse(admin_urlname(subject.model._meta, "change"), args=[subject.pk],
                  current_app=model_admin.admin_site.name)
    return format_html('<a href="{}" title="{}">{}</a>', url, subject.label, label)
