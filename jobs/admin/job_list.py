"""Read-only admin for the job queue, plus the operator transitions, and the zombie list.

No field can be edited here: a job changes state only through ``jobs.operator_actions``'
guarded statements, which the "requeue", "mark failed" and "cancel" actions call.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.db.models import DurationField, F
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce, Now
from django.urls import reverse
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.timezone import localtime

from seoinsight import waiting
from seoinsight.orgscope import ReadOnlyAdmin

from .. import liveness, operator_actions, registry, sql, subjects
from ..cancellation import NOT_LIVE, cancel_jobs
from ..models import Job, JobStatus, ZombieJob
from ..registry import DEFAULT_QUEUE
from .display import (EMPTY, STATUS_COLOURS, countable, job_facts, max_attempts, plural_jobs, pretty_json,
                      readable_duration, subject_html)
from .filters import FactFilter, InternalFilter, OrgFilter, QueueFilter, TypeFilter

ZOMBIE_SUBTITLE = (
    "A zombie is a running job whose worker has given no sign of life (heartbeat) for longer than "
    "its type's threshold, usually because the worker died; the sweep requeues it, or you can now."
)


class JobChangeList(ChangeList):
    def get_results(self, request):
        super().get_results(request)
        self.model_admin.attach_subjects(request, self.result_list)
        self.model_admin.attach_stalled(self.result_list)


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    # Seven columns, so the list fits 1,400 px beside the side bar and the filters: what does not need a column
    # of its own rides in one (queue and priority under the type, attempts and "runs at" under the status,
    # the duration under the progress); the job's page shows each apart.
    list_display = ["job_label", "subject", "org", "status_cell", "progress_cell", "created"]
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
        if job is not None:
            self.attach_subjects(request, [job])
            self.attach_stalled([job])
        return job

    def attach_stalled(self, jobs) -> None:
        """Set ``stalled`` on each of ``jobs``: what it says instead of its status (``jobs.liveness``), or None."""
        clock = liveness.read_clock()
        for job in jobs:
            job.stalled = liveness.stalled(job, clock)

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

    @admin.display(description="job", ordering="type")
    def job_label(self, job):
        """The type, the id's tail, and the queue and priority when they are not the default ones."""
        extra = [f"queue {job.queue_name}"] if job.queue_name != DEFAULT_QUEUE else []
        extra += [f"priority {job.priority}"] if job.priority else []
        return format_html('{}<div class="small" title="{}">…{}</div>{}', job.type, job.pk, str(job.pk)[-8:],
                           format_html('<div class="small">{}</div>', ", ".join(extra)) if extra else "")

    @admin.display(description="org", ordering="org_id")
    def org(self, job):
        return job.org_id

    @admin.display(description="status", ordering="status")
    def status_cell(self, job):
        """The status (or that the job gives no sign of life), its facts, when it may start, its attempts."""
        runs_at = self.runs_at(job)
        return format_html('{}<div class="small">{}{}</div>', self.status_badge(job), self.attempts_of_max(job),
                           format_html(" · runs at {}", runs_at) if runs_at != EMPTY else "")

    @admin.display(description="progress", ordering=Coalesce(F("finished_at"), Now()) - F("started_at"))
    def progress_cell(self, job):
        bar, took = self.progress_bar(job), self.duration(job)
        if bar == EMPTY:
            return took
        return bar if took == EMPTY else format_html('{}<div class="small">{}</div>', bar, took)

    @admin.display(description="created", ordering="created_at")
    def created(self, job):
        when = localtime(job.created_at)
        return format_html('<span title="{}">{}</span>', date_format(when, "DATETIME_FORMAT"),
                           date_format(when, "M j, H:i"))

    @admin.display(description="for")
    def subject(self, job):
        """The import, attachment or site target the job works on (``jobs.subjects``)."""
        return getattr(job, "subject_html", EMPTY)

    @admin.display(description="status", ordering="status")
    def status_badge(self, job):
        # A job without a sign of life says so instead of its status: "Running" would be a claim nobody makes.
        stalled = getattr(job, "stalled", None)
        status = format_html(
            '<span class="job-status" style="background:{};color:#fff;padding:1px 7px;border-radius:8px">{}</span>',
            STATUS_COLOURS[JobStatus.FAILED] if stalled else STATUS_COLOURS.get(job.status, "#6c757d"),
            stalled or job.get_status_display(),
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
        if fraction is None or getattr(job, "stalled", None):
            return EMPTY
        done, total = fraction
        percent = max(0.0, min(100.0, 100.0 * done / total))
        return format_html(
            '<progress value="{}" max="{}" title="{} of {}" style="width:6em"></progress> {}%',
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


def zombie_count(request) -> int | None:
    """The zombies of the user's orgs (all for a superuser): the zombie list's rows, counted once."""
    zombies = admin.site._registry.get(ZombieJob)
    if zombies is None or not zombies.has_view_permission(request):
        return None
    return zombies.scope(request, ZombieJob.objects.stale()).count()


waiting.register("zombie jobs: no sign of life from their worker",
                 lambda: reverse("admin:jobs_zombiejob_changelist"), zombie_count)
