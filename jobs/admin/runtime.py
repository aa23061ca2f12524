"""What runs the queue: the process list (superusers; the Operator group sees it without what each process
does) and the periodic schedules (superusers)."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import admin
from django.db.models import F, OuterRef, Subquery
from django.db.models.functions import Now
from django.urls import reverse
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.timezone import localtime

from seoinsight.orgscope import ReadOnly, SuperuserOnlyAdmin

from .. import processes, registry, schedules
from ..models import Job, JobStatus, Process, Schedule
from .display import EMPTY, STATUS_COLOURS, readable_duration


@admin.register(Process)
class ProcessAdmin(ReadOnly, admin.ModelAdmin):
    """Who is running, doing what: every runjobs and pollmail (jobs.processes).

    Read-only. A process silent past ``processes.ALIVE_WITHIN`` is shown as not
    seen; one silent past ``FORGET_AFTER`` is left out (and deleted within
    ``FORGET_EVERY`` by any live process), so the list ages out even with none left.
    Whoever may view processes (the Operator group) sees whether workers run; only a
    superuser sees what each is doing, which names every org's jobs and mailboxes.
    """

    shows_no_org_data = "a process serves every org: others than superusers see it without what it is doing"
    list_display = ["kind", "host", "pid", "state", "started_at", "last_heartbeat", "doing_text"]
    list_filter = ["kind", "host"]
    fields = ["kind", "host", "pid", "started_at", "heartbeat_at", "doing"]
    readonly_fields = fields
    SUPERUSER_ONLY = ("doing_text", "doing")

    def get_list_display(self, request):
        shown = super().get_list_display(request)
        return shown if request.user.is_superuser else [f for f in shown if f not in self.SUPERUSER_ONLY]

    def get_fields(self, request, obj=None):
        shown = super().get_fields(request, obj)
        return shown if request.user.is_superuser else [f for f in shown if f not in self.SUPERUSER_ONLY]

    def get_readonly_fields(self, request, obj=None):
        return self.get_fields(request, obj)

    def get_search_fields(self, request):
        return super().get_search_fields(request) if request.user.is_superuser else ()

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

    list_display = ["name", "repeats", "last_period", "last_job_link", "next_run"]
    fields = ["name", "repeats", "last_period", "last_job_link", "next_run", "updated_at"]
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
    def last_job_link(self, row):
        # Never a deleted job's: the database clears last_job when its job is deleted (ON DELETE SET NULL).
        if row.last_job_id is None:
            return EMPTY
        url = reverse("admin:jobs_job_change", args=[row.last_job_id])
        return format_html('<a href="{}">…{}</a> {}', url, str(row.last_job_id)[-8:], row.last_job_status)

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
