"""The job list's filters: type, internal types, org, queue, and the facts an operator asks about."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Q
from django.db.models.functions import Now

from seoinsight.models import Org

from .. import registry
from ..errors import CANCELLED, TIMED_OUT
from ..models import Job, JobStatus
from .display import INTERNAL_TYPES, Fact


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
