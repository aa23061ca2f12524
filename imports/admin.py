"""Read-only admin for imports and metrics: they change only through their jobs.

Also the Search Console pull on the site target admin: the core's admin knows
nothing of imports, so this app registers the site target admin again, with its action.
"""

from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html

from seoinsight.admin import SiteTargetAdmin
from seoinsight.models import SiteTarget
from seoinsight.orgscope import ReadOnlyAdmin

from .models import Import, UrlMetric
from .searchconsole_api import DEFAULT_DAYS, create_api_import, settled_period



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


class SearchConsoleSiteTargetAdmin(SiteTargetAdmin):
    """The core's site target admin, with the action that queues a Search Console pull."""

    actions = [*SiteTargetAdmin.actions, "pull_search_console"]

    @admin.action(description=f"Pull Search Console data (last {DEFAULT_DAYS} settled days)")
    def pull_search_console(self, request, queryset):
        start, end = settled_period()
        queued, refused = [], []
        for target in queryset.select_related("site"):
            if target.search_console_property and target.has_search_console_credentials:
                queued.append(create_api_import(target, start, end, created_by=request.user))
            else:
                refused.append(str(target))
        if queued:
            self.message_user(request, f"{len(queued)} Search Console pull(s) queued for {start} to {end}.")
        if refused:
            self.message_user(request, "Needs a property and a service-account key first: " + ", ".join(refused),
                              messages.WARNING)


admin.site.unregister(SiteTarget)
admin.site.register(SiteTarget, SearchConsoleSiteTargetAdmin)
