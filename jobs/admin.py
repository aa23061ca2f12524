"""Read-only admin for the job queue, plus the two operator transitions.

No field can be edited here: a job changes state only through ``jobs.operator_actions``'
guarded statements, which the "requeue" and "mark failed" actions call.
"""

from __future__ import annotations

import json
from datetime import timedelta

from django.contrib import admin, messages
from django.contrib.admin.templatetags.admin_urls import admin_urlname
from django.contrib.admin.views.main import ChangeList
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import DurationField, F, OuterRef, Q, Subquery
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce, Now
from django.urls import reverse
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator
from django.utils.timezone import localtime

from seoinsight.models import Org
from seoinsight.orgscope import ReadOnly, ReadOnlyAdmin, SuperuserOnlyAdmin

from . import operator_actions, processes, registry, schedules, sql, subjects
from .cancellation import NOT_LIVE, cancel_jobs
from .errors import CANCELLED, TIMED_OUT
from .models import Job, JobStatus, Process, Schedule, ZombieJob

STATUS_COLOURS = {
    JobStatus.QUEUED: "#6c757d",
    JobStatus.RUNNING: "#1f6fb2",
    JobStatus.DONE: "#2e7d32",
    JobStatus.FAILED: "#c62828",
}

EMPTY = "—"

# The built-in smoke-test and benchmark type (jobs.handlers): noise to an operator, listed only when asked for.
INTERNAL_TYPES = frozenset({"noop"})

ZOMBIE_SUBTITLE = (
    "A zombie is a running job whose worker has given no sign of life (heartbeat) for longer than "
    "its type's threshold, usually because the worker died; the sweep requeues it, or you can now."
)


def readable_duration(delta: timedelta) -> str:
    """Two units at most, for a glance: '1.2 s', '3 min 4 s', '2 h 5 min', '3 d 4 h'."""
    seconds = round(max(delta.total_seconds(), 0.0), 1)
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"


def countable(progress) -> tuple[float, float] | None:
    """``(done, total)`` when ``progress`` holds numbers that make a fraction, else None."""
    if not isinstance(progress, dict):
        return None
    done, total = progress.get("done"), progress.get("total")
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (done, total))
    return (done, total) if numbers and total > 0 else None


def pretty_json(value):
    if value is None:
        return EMPTY
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, cls=DjangoJSONEncoder)
    return format_html("<pre>{}</pre>", text)


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


class TypeFilter(admin.SimpleListFilter):
    """Registered types plus any type still live in the table (read from the live states' partial indexes)."""

    title = "type"
    parameter_name = "type"

    def lookups(self, request, model_admin):
        live = model_admin.scope(request, Job.objects.live())
        live = live.values_list("type", flat=True)
        return [(name, name) for name in sorted(set(registry.all_types()) | set(live.distinct()))]

    def queryset(self, request, queryset):
        return queryset.filter(type=self.value()) if self.value() else queryset


class InternalFilter(admin.SimpleListFilter):
    """Jobs of ``INTERNAL_TYPES`` are left out unless shown here, or named in the type filter."""

    title = "internal jobs"
    parameter_name = "internal"
    SHOWN = "shown"

    def lookups(self, request, model_admin):
        return [(self.SHOWN, "shown")]

    def choices(self, changelist):
        yield {"selected": self.value() is None, "display": "hidden",
               "query_string": changelist.get_query_string(remove=[self.parameter_name])}
        yield {"selected": self.value() == self.SHOWN, "display": "shown",
               "query_string": changelist.get_query_string({self.parameter_name: self.SHOWN})}

    def queryset(self, request, queryset):
        if self.value() == self.SHOWN or request.GET.get(TypeFilter.parameter_name) in INTERNAL_TYPES:
            return queryset
        return queryset.exclude(type__in=INTERNAL_TYPES)


class OrgFilter(admin.SimpleListFilter):
    title = "org"
    parameter_name = "org"

    def lookups(self, request, model_admin):
        orgs = model_admin.scope(request, Org.objects.all())
        return [(org_id, org_id) for org_id in orgs.values_list("id", flat=True)]

    def queryset(self, request, queryset):
        return queryset.filter(org_id=self.value()) if self.value() else queryset


class QueueFilter(admin.SimpleListFilter):
    """The queues registered types use plus any queue still live in the user's rows."""

    title = "queue"
    parameter_name = "queue"

    def lookups(self, request, model_admin):
        live = model_admin.scope(request, Job.objects.live())
        declared = {t.queue for t in registry.all_types().values()}
        return [(name, name) for name in sorted(declared | set(live.values_list("queue_name", flat=True).distinct()))]

    def queryset(self, request, queryset):
        return queryset.filter(queue_name=self.value()) if self.value() else queryset


class FactFilter(admin.SimpleListFilter):
    """The rows of one ``Fact``, by the same rules as ``job_facts`` (waiting judged on the database's clock)."""

    title = "waiting or stopped"
    parameter_name = "fact"

    def lookups(self, request, model_admin):
        return [(fact, fact) for fact in (Fact.SCHEDULED, Fact.RETRY_WAIT, Fact.CANCEL_REQUESTED, Fact.CANCELLED,
                                          Fact.TIMED_OUT)]

    def queryset(self, request, queryset):
        waiting = Q(status=JobStatus.QUEUED, run_after__gt=Now())
        rules = {
            Fact.SCHEDULED: waiting & Q(attempts=0),
            Fact.RETRY_WAIT: waiting & Q(attempts__gt=0),
            Fact.CANCEL_REQUESTED: Q(status__in=[JobStatus.QUEUED, JobStatus.RUNNING],
                                     cancel_requested_at__isnull=False),
            Fact.CANCELLED: Q(status=JobStatus.FAILED) & (Q(cancel_requested_at__isnull=False)
                                                          | Q(error=CANCELLED)),
            Fact.TIMED_OUT: Q(error__startswith=TIMED_OUT),
        }
        return queryset.filter(rules[self.value()]) if self.value() in rules else queryset


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


class JobChangeList(ChangeList):
    def get_results(self, request):
        super().get_results(request)
        self.model_admin.attach_subjects(request, self.result_list)


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    list_display = ["short_id", "type", "subject", "org_id", "status_badge", "runs_at", "priority", "queue_name",
                    "attempts_of_max", "progress_bar", "duration", "created_at"]
    list_filter = ["status", FactFilter, TypeFilter, InternalFilter, QueueFilter, OrgFilter]
    search_fields = ["id", "dedup_key", "type"]
    search_help_text = "Job id (or its last characters), dedup key or type."
    ordering = ["-created_at"]
    show_full_result_count = False
    empty_value_display = EMPTY
    actions = ["requeue_jobs", "requeue_jobs_with_fresh_budget", "mark_jobs_failed", "cancel_selected_jobs"]
    readonly_fields = ["id", "type", "subject", "org_id", "status_badge", "attempts_of_max", "dedup_key", "priority",
                       "queue_name", "created_at", "run_after", "started_at", "finished_at", "duration",
                       "heartbeat_age", "cancel_requested_at", "ran_on", "progress_bar",
                       "error_text", "traceback_text", "payload_json", "progress_json", "report_json"]
    fields = readonly_fields

    def rows(self):
        """The jobs this screen lists, with ``heartbeat_at`` annotated."""
        # database_now: ages are measured on the database's clock, like staleness.
        return self.model.objects.with_heartbeat().annotate(database_now=Now())

    def get_queryset(self, request):
        return self.scope(request, self.rows()).order_by(*self.get_ordering(request))

    def get_changelist(self, request, **kwargs):
        return JobChangeList

    def get_object(self, request, object_id, from_field=None):
        job = super().get_object(request, object_id, from_field)
        self.attach_subjects(request, [job])
        return job

    def attach_subjects(self, request, jobs) -> None:
        """Set ``subject_html`` on each of ``jobs``: one query per describer of their types (``jobs.subjects``)."""
        jobs = list(jobs)
        found = subjects.describe(jobs)
        for job in jobs:
            job.subject_html = subject_html(request, self, found.get(job.pk))

    def has_operate_permission(self, request):
        """The actions write to jobs, so they need ``change_job`` although no field is editable."""
        return request.user.has_perm("jobs.change_job")

    @admin.display(description="id", ordering="id")
    def short_id(self, job):
        # uuidv7 starts with the timestamp: jobs created together share a prefix, not a tail.
        return format_html('<span title="{}">…{}</span>', job.pk, str(job.pk)[-8:])

    @admin.display(description="for")
    def subject(self, job):
        """The import, attachment or site target the job works on (``jobs.subjects``)."""
        return getattr(job, "subject_html", EMPTY)

    @admin.display(description="status", ordering="status")
    def status_badge(self, job):
        status = format_html(
            '<span style="background:{};color:#fff;padding:1px 7px;border-radius:8px;white-space:nowrap">{}</span>',
            STATUS_COLOURS.get(job.status, "#6c757d"), job.get_status_display(),
        )
        facts = format_html_join(
            "", ' <span class="job-fact" title="{}" style="border:1px solid {};padding:0 6px;border-radius:8px;'
                'white-space:nowrap">{}</span>',
            ((detail, STATUS_COLOURS.get(job.status, "#6c757d"), fact)
             for fact, detail in job_facts(job, job.database_now)),
        )
        return format_html("{}{}", status, facts)

    @admin.display(description="runs at", ordering="run_after")
    def runs_at(self, job):
        """When a queued job that waits (scheduled, or backing off before a retry) may start; else nothing."""
        if job.status != JobStatus.QUEUED or job.run_after is None or job.run_after <= job.database_now:
            return EMPTY
        return format_html('<span title="in {}">{}</span>', readable_duration(job.run_after - job.database_now),
                           date_format(localtime(job.run_after), "DATETIME_FORMAT"))

    @admin.display(description="attempts", ordering="attempts")
    def attempts_of_max(self, job):
        """Claims counted against the budget; the others (database outages, a fresh budget) apart."""
        shown = f"{job.counted_attempts} / {max_attempts(job.type)}"
        if job.uncounted_attempts:
            shown += f" (+{job.uncounted_attempts} not counted)"
        if job.outages:
            shown += f", {job.outages} cut off by the database"
        return shown

    @admin.display(description="progress")
    def progress_bar(self, job):
        fraction = countable(job.progress)
        if fraction is None:
            return EMPTY
        done, total = fraction
        percent = max(0.0, min(100.0, 100.0 * done / total))
        return format_html(
            '<progress value="{}" max="{}" title="{} of {}" style="width:8em"></progress> {}%',
            done, total, done, total, f"{percent:.0f}",
        )

    @admin.display(description="duration", ordering=Coalesce(F("finished_at"), Now()) - F("started_at"))
    def duration(self, job):
        return readable_duration(job.duration) if job.duration is not None else EMPTY

    @admin.display(description="last heartbeat")
    def heartbeat_age(self, job):
        if job.status != JobStatus.RUNNING or job.heartbeat_at is None:
            return EMPTY
        return f"{readable_duration(job.database_now - job.heartbeat_at)} ago"

    @admin.display(description="ran on")
    def ran_on(self, job):
        """Who ran each attempt, in order ("host:pid")."""
        return ", ".join(job.worker_ids) if job.worker_ids else EMPTY

    @admin.display(description="error")
    def error_text(self, job):
        return format_html('<pre style="white-space:pre-wrap">{}</pre>', job.error) if job.error else EMPTY

    @admin.display(description="traceback")
    def traceback_text(self, job):
        return format_html('<pre style="white-space:pre-wrap">{}</pre>', job.traceback) if job.traceback else EMPTY

    @admin.display(description="payload")
    def payload_json(self, job):
        return pretty_json(job.payload)

    @admin.display(description="progress (raw)")
    def progress_json(self, job):
        return pretty_json(job.progress)

    @admin.display(description="report")
    def report_json(self, job):
        return pretty_json(job.report)

    @admin.action(description="Requeue selected jobs", permissions=["operate"])
    def requeue_jobs(self, request, queryset):
        self.report_requeue(request, operator_actions.requeue(list(queryset.values_list("pk", flat=True))))

    @admin.action(description="Requeue selected jobs with a fresh budget (earlier attempts stop counting)",
                  permissions=["operate"])
    def requeue_jobs_with_fresh_budget(self, request, queryset):
        ids = list(queryset.values_list("pk", flat=True))
        self.report_requeue(request, operator_actions.requeue(ids, fresh_budget=True))

    def report_requeue(self, request, result: operator_actions.RequeueResult) -> None:
        """What the requeue did to each job, and why it left the others alone."""
        parts = [f"{plural_jobs(len(result.requeued))} requeued"]
        if result.failed:
            parts.append(f"{plural_jobs(len(result.failed))} failed: zombies out of attempts, as the sweep does")
        if result.folded:
            parts.append(f"{plural_jobs(len(result.folded))} folded into the queued job that holds the same key")
        reasons: dict[str, int] = {}
        for reason in result.refused.values():
            reasons[reason] = reasons.get(reason, 0) + 1
        parts += [f"{count} skipped ({reason})" for reason, count in reasons.items()]
        level = messages.WARNING if result.refused or result.failed else messages.SUCCESS
        self.message_user(request, "; ".join(parts), level)

    @admin.action(description="Mark selected jobs failed", permissions=["operate"])
    def mark_jobs_failed(self, request, queryset):
        ids = list(queryset.values_list("pk", flat=True))
        changed = operator_actions.mark_failed(ids, f"marked failed by {request.user.get_username()}")
        self.report(request, f"{plural_jobs(len(changed))} marked failed", len(ids) - len(changed),
                    "only queued or running jobs can be failed")

    @admin.action(description="Cancel selected jobs (queued: never start; running: told to stop)",
                  permissions=["operate"])
    def cancel_selected_jobs(self, request, queryset):
        """``jobs.cancel`` on the selected rows of the user's orgs: queued ones fail now, running ones are asked."""
        result = cancel_jobs(list(queryset.values_list("pk", flat=True)))
        done = f"{plural_jobs(len(result.cancelled))} cancelled before starting"
        if result.asked:
            done += f"; {plural_jobs(len(result.asked))} running asked to stop (at the next heartbeat or progress report)"
        self.report(request, done, len(result.refused), NOT_LIVE)

    def report(self, request, done: str, skipped: int, why: str) -> None:
        """Say what changed and what the guarded transition left alone (it moved meanwhile, or never could)."""
        if skipped:
            self.message_user(request, f"{done}; {skipped} skipped ({why})", messages.WARNING)
        else:
            self.message_user(request, done, messages.SUCCESS)


@admin.register(ZombieJob)
class ZombieJobAdmin(JobAdmin):
    """Running jobs past their type's staleness threshold, by the same rule as the sweep."""

    list_display = ["short_id", "type", "subject", "org_id", "attempts_of_max", "started_at", "last_sign_of_life",
                    "stale_for"]
    list_filter = [TypeFilter, QueueFilter, OrgFilter]

    def rows(self):
        """The zombies, with ``silent_for`` and ``past_threshold`` computed by the sweep's rule (``jobs.sql``)."""
        known = registry.all_types()
        thresholds = [list(known), [float(t.stale_after) for t in known.values()], registry.default_stale_after()]
        past = sql.PAST_THRESHOLD.format(not_before="NULL", stale_after=sql.TYPE_STALE_AFTER)
        return self.model.objects.stale().annotate(
            database_now=Now(),
            silent_for=RawSQL(sql.SILENT_FOR.format(not_before="NULL"), [], output_field=DurationField()),
            past_threshold=RawSQL(past, thresholds, output_field=DurationField()),
        )

    def get_ordering(self, request):
        return ["heartbeat_at"]

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, {"subtitle": ZOMBIE_SUBTITLE, **(extra_context or {})})

    @admin.display(description="last sign of life", ordering="heartbeat_at")
    def last_sign_of_life(self, job):
        return job.heartbeat_at

    @admin.display(description="stale for", ordering="past_threshold")
    def stale_for(self, job):
        # Silence is counted as the sweep counts it: a heartbeat from before the
        # server's start counts from that start, not from the heartbeat.
        threshold = job.silent_for - job.past_threshold
        return format_html(
            '<span title="silent for {}; threshold {}">{}</span>',
            readable_duration(job.silent_for), readable_duration(threshold), readable_duration(job.past_threshold),
        )


@admin.register(Process)
class ProcessAdmin(ReadOnly, SuperuserOnlyAdmin, admin.ModelAdmin):
    """Who is running, doing what: every runjobs and pollmail (jobs.processes), for superusers.

    Read-only. A process silent past ``processes.ALIVE_WITHIN`` is shown as not
    seen; one silent past ``FORGET_AFTER`` is left out (and deleted within
    ``FORGET_EVERY`` by any live process), so the list ages out even with none left.
    """

    list_display = ["kind", "host", "pid", "state", "started_at", "last_heartbeat", "doing_text"]
    list_filter = ["kind", "host"]
    fields = ["kind", "host", "pid", "started_at", "heartbeat_at", "doing"]
    readonly_fields = fields

    def get_queryset(self, request):
        return (super().get_queryset(request).exclude(pk__in=Process.objects.silent_for(processes.FORGET_AFTER))
                .annotate(silence=Now() - F("heartbeat_at")))

    @admin.display(description="state")
    def state(self, process):
        if process.silence <= timedelta(seconds=processes.ALIVE_WITHIN):
            return format_html('<span style="color:{}">running</span>', STATUS_COLOURS[JobStatus.DONE])
        return format_html('<span style="color:{}">not seen for {}</span>', STATUS_COLOURS[JobStatus.FAILED],
                           readable_duration(process.silence))

    @admin.display(description="last heartbeat", ordering="heartbeat_at")
    def last_heartbeat(self, process):
        return f"{readable_duration(process.silence)} ago"

    @admin.display(description="doing")
    def doing_text(self, process):
        return process.doing or "idle"


@admin.register(Schedule)
class ScheduleAdmin(ReadOnly, SuperuserOnlyAdmin, admin.ModelAdmin):
    """The periodic job types (jobs.schedules): the last period enqueued, its job, the next run.

    For superusers only: a schedule serves every org, its jobs belong to the system org
    (``jobs.system``), which no org's staff reaches. A row appears at a type's first period.
    """

    list_display = ["name", "repeats", "last_period", "last_job", "next_run"]
    fields = ["name", "repeats", "last_period", "last_job", "next_run", "updated_at"]
    readonly_fields = fields

    def get_queryset(self, request):
        status = Job.objects.filter(pk=OuterRef("last_job_id")).values("status")[:1]
        return super().get_queryset(request).annotate(database_now=Now(), last_job_status=Subquery(status))

    def changelist_view(self, request, extra_context=None):
        known = set(Schedule.objects.values_list("name", flat=True))
        waiting = sorted(t.name for t in schedules.periodic_types() if t.name not in known)
        extra = {"subtitle": f"Not enqueued yet (no worker has looked since they were registered): "
                             f"{', '.join(waiting)}"} if waiting else {}
        return super().changelist_view(request, {**extra, **(extra_context or {})})

    @staticmethod
    def job_type(row):
        job_type = registry.all_types().get(row.name)
        return job_type if job_type is not None and job_type.periodic else None

    @admin.display(description="repeats")
    def repeats(self, row):
        job_type = self.job_type(row)
        return schedules.describe(job_type) if job_type else "not a periodic type here (removed or renamed?)"

    @admin.display(description="last job")
    def last_job(self, row):
        if row.last_job_id is None:
            return EMPTY
        url = reverse("admin:jobs_job_change", args=[row.last_job_id])
        return format_html('<a href="{}">…{}</a> {}', url, str(row.last_job_id)[-8:],
                           row.last_job_status or "(deleted)")

    @admin.display(description="next run")
    def next_run(self, row):
        """The next period's start by the schedule's own rule (``schedules.plan``) on the database's clock."""
        job_type = self.job_type(row)
        if job_type is None:
            return EMPTY
        try:
            current = schedules.plan_for(job_type, row.last_period, row.database_now)
        except ValueError as exc:
            return f"unknown: {exc}"
        if current.due is not None:
            return f"due now: period {date_format(localtime(current.due), 'DATETIME_FORMAT')}, at a worker's next look"
        if current.next is None:
            return "never (the cron expression fires no more)"
        return format_html('<span title="in {}">{}</span>', readable_duration(current.next - row.database_now),
                           date_format(localtime(current.next), "DATETIME_FORMAT"))
