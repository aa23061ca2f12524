"""The mail admin's list filters: mailbox health, stuck attachments, document type."""

from __future__ import annotations

from django.contrib import admin

from . import conf
from .admin_display import duration_label
from .health import FAILING, FILTERS, HEALTHY, NEVER


class HealthFilter(admin.SimpleListFilter):
    """``mailpoll.health``'s rules as a filter (a disabled mailbox has no health to filter by)."""

    title = "health"
    parameter_name = "health"

    def lookups(self, request, model_admin):
        return [(FAILING, "failing"), (HEALTHY, "healthy"), (NEVER, "never polled")]

    def queryset(self, request, queryset):
        return queryset.filter(FILTERS[self.value()]) if self.value() in (FAILING, HEALTHY, NEVER) else queryset


class StuckFilter(admin.SimpleListFilter):
    """The watchdog's rule: processing for longer than MAILPOLL_STUCK_AFTER (its worker probably died)."""

    title = "stuck"
    parameter_name = "stuck"

    def lookups(self, request, model_admin):
        return [("yes", f"processing over {duration_label(conf.get('MAILPOLL_STUCK_AFTER'))}")]

    def queryset(self, request, queryset):
        return queryset.stuck(conf.get("MAILPOLL_STUCK_AFTER")) if self.value() == "yes" else queryset


class DocumentTypeFilter(admin.SimpleListFilter):
    title = "type"
    parameter_name = "type"

    def lookups(self, request, model_admin):
        return [("pdf", "PDF"), ("xlsx", "Excel .xlsx"), ("xls", "Excel .xls"), ("csv", "CSV"),
                ("body", "message body"), ("none", "not a document")]

    def queryset(self, request, queryset):
        if not self.value():
            return queryset
        return queryset.filter(document_type="" if self.value() == "none" else self.value())

