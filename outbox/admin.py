"""Admin for the outbox: the documents waiting for the downstream, how long, how many tries, the last error.

Read-only, scoped by org (``seoinsight.orgscope``): an entry changes only through
``outbox.entries``. "Retry now" makes waiting entries due at once and queues a
sender; deleting an entry would drop a held document, so there is no delete.
"""

from __future__ import annotations

from django.contrib import admin
from django.template.defaultfilters import truncatechars
from django.utils import timezone
from django.utils.timesince import timesince

from seoinsight.orgscope import ReadOnlyAdmin

from . import capacity, entries
from .models import Entry
from .wake import wake


@admin.register(Entry)
class EntryAdmin(ReadOnlyAdmin):
    list_display = ["document_ref", "org", "filename", "state", "age", "attempts", "next_try", "error_short",
                    "claimed_by"]
    list_filter = ["state", "org"]
    list_select_related = ["org"]
    ordering = ["created_at", "id"]
    search_fields = ["document_ref", "last_error"]
    readonly_fields = ["key", "org", "document_ref", "source", "state", "attempts", "last_error", "next_attempt_at",
                       "claimed_by", "lease_until", "last_tried_at", "created_at", "file", "file_size",
                       "file_sha256", "document"]
    actions = ["retry_now"]

    def has_retry_permission(self, request):
        return self.has_view_permission(request)

    def changelist_view(self, request, extra_context=None):
        current = capacity.depth()
        extra_context = {**(extra_context or {}), "title": (
            f"Outbox: {current.held} of {current.capacity} documents waiting for the downstream"
            + (" (full: mail intake is stopped)" if current.full and capacity.enabled() else "")
            + ("" if capacity.enabled() else " (DOWNSTREAM_URL is not set: the outbox is off)"))}
        return super().changelist_view(request, extra_context)

    @admin.display(description="file")
    def filename(self, entry):
        return entry.document.get("filename") or "—"

    @admin.display(description="age", ordering="created_at")
    def age(self, entry):
        return timesince(entry.created_at, timezone.now())

    @admin.display(description="next try", ordering="next_attempt_at")
    def next_try(self, entry):
        if entry.state == "sending":
            return f"sending (claim until {timezone.localtime(entry.lease_until):%H:%M:%S})"
        if entry.next_attempt_at <= timezone.now():
            return "now"
        return f"in {timesince(timezone.now(), entry.next_attempt_at)}"

    @admin.display(description="last error")
    def error_short(self, entry):
        return truncatechars(entry.last_error, 120) or "—"

    @admin.action(description="Retry now (waiting entries due at once)", permissions=["retry"])
    def retry_now(self, request, queryset):
        ids = list(queryset.values_list("pk", flat=True))
        moved = entries.retry_now(ids)
        if moved:
            wake(queryset.filter(pk__in=moved).values_list("org_id", flat=True).first())
        self.message_user(request, f"{len(moved)} of {len(ids)} entries due now"
                          + ("; the others are being sent right now" if len(moved) < len(ids) else ""))
