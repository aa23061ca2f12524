"""Read-only admin for imports and metrics: they change only through their jobs."""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from seoinsight.orgscope import OrgScopedAdmin

from .models import Import, UrlMetric


class ReadOnlyAdmin(OrgScopedAdmin, admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Import)
class ImportAdmin(ReadOnlyAdmin):
    list_display = ["id", "original_filename", "org", "site_target", "kind", "status", "read", "inserted",
                    "updated", "skipped", "errors", "created_at", "job_link"]
    list_display_links = ["id", "original_filename"]
    list_filter = ["status", "kind", "origin", "org"]
    list_select_related = ["site_target__site"]
    search_fields = ["original_filename", "=uid"]
    date_hierarchy = "created_at"
    readonly_fields = ["org", "site_target", "kind", "origin", "status", "original_filename", "size", "file",
                       "period_start", "period_end", "read", "inserted", "updated", "skipped", "errors", "error",
                       "created_by", "created_at", "finished_at", "job_link"]
    fields = readonly_fields

    @admin.display(description="job")
    def job_link(self, imp):
        if imp.job_id is None:
            return "—"
        url = reverse("admin:jobs_job_change", args=[imp.job_id])
        return format_html('<a href="{}">…{}</a>', url, str(imp.job_id)[-8:])


@admin.register(UrlMetric)
class UrlMetricAdmin(ReadOnlyAdmin):
    list_display = ["url", "site_target", "period_start", "period_end", "clicks", "impressions", "ctr", "position",
                    "page"]
    # Plain filters only: this table holds millions of rows, so no per-row distinct lookups.
    list_filter = ["site_target", "period_start", "period_end"]
    list_select_related = ["site_target", "page"]
    show_full_result_count = False
    readonly_fields = list_display + ["url_normalized", "source_import", "updated_at"]
    fields = readonly_fields
