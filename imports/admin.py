"""Read-only admin for imports and metrics: they change only through their jobs.

Also the Search Console pull on the site target admin: the core's admin knows
nothing of imports, so this app registers the site target admin again, with its action.
"""

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from seoinsight import figure_text, list_cells, periods
from seoinsight.admin import SiteTargetAdmin
from seoinsight.models import SiteTarget
from seoinsight.orgscope import OrgScopedAdmin, ReadOnlyAdmin

from .formats.headers import mapping_problem
from .models import ColumnMapping, Import, ImportOutcome, ImportStatus, UrlMetric
from .outcomes import SHOWN_LABELS, shown_status
from .searchconsole_api import DEFAULT_DAYS, create_api_import, settled_period

# The statuses the import list marks (any other is plain text).
STATUS_COLOURS = {ImportStatus.FAILED: "#c62828", ImportOutcome.NOTHING_IMPORTED: "#c62828",
                  ImportOutcome.MOSTLY_SKIPPED: "#a15c00"}


@admin.register(Import)
class ImportAdmin(ReadOnlyAdmin):
    # Fits 1,400 px beside the admin's menu and filters, whatever the names: text is cut (whole on hover),
    # counts are one column, so the status stays in sight.
    # The org and the kind are filters (a file's name says its kind; an API pull reads as one).
    list_display = ["id", "file_shown", "target_shown", "status_shown", "rows_shown", "created_shown", "job_link"]
    list_display_links = ["id", "file_shown"]
    list_filter = ["status", "outcome", "kind", "origin", "org"]
    list_select_related = ["site_target__site"]
    search_fields = ["original_filename", "=uid"]
    date_hierarchy = "created_at"
    readonly_fields = ["org", "site_target", "kind", "origin", "status", "outcome", "reimport_of",
                       "original_filename", "size", "file",
                       "period_start", "period_end", "read", "inserted", "updated", "skipped", "errors", "error",
                       "created_by", "created_at", "finished_at", "job_link"]
    fields = readonly_fields

    @admin.display(description="file", ordering="original_filename")
    def file_shown(self, imp):
        if not imp.original_filename:
            return imp.get_kind_display()
        return list_cells.shortened(imp.original_filename, 40, tail=12, width=16)

    @admin.display(description="site target", ordering="site_target")
    def target_shown(self, imp):
        return list_cells.shortened(str(imp.site_target), 40, width=14) if imp.site_target_id else "—"

    @admin.display(description="rows", ordering="read")
    def rows_shown(self, imp):
        """Each count on a line of its own when the column is narrow; a count of nothing left out."""
        counts = [("read", imp.read), ("new", imp.inserted), ("replaced", imp.updated), ("skipped", imp.skipped),
                  ("errors", imp.errors)]
        shown = [(list_cells.count(n), what) for what, n in counts if n or what == "read"]
        return format_html_join(" ", '<span style="white-space:nowrap">{} {}</span>', shown)

    @admin.display(description="created", ordering="created_at")
    def created_shown(self, imp):
        moment = timezone.localtime(imp.created_at)
        return format_html('<span style="white-space:nowrap">{}</span> {}', f"{moment:%Y-%m-%d}", f"{moment:%H:%M}")

    @admin.display(description="status", ordering="status")
    def status_shown(self, imp):
        """A done import that imported little or nothing shows that, in colour, not a plain "Done"."""
        shown = shown_status(imp.status, imp.outcome)
        colour = STATUS_COLOURS.get(shown)
        if colour is None:
            return SHOWN_LABELS[shown]
        return format_html('<span style="color: {}; font-weight: 600">{}</span>', colour, SHOWN_LABELS[shown])

    @admin.display(description="job")
    def job_link(self, imp):
        if imp.job_id is None:
            return "—"
        url = reverse("admin:jobs_job_change", args=[imp.job_id])
        return format_html('<a href="{}" style="white-space:nowrap">…{}</a>', url, str(imp.job_id)[-8:])


class MetricPeriodFilter(admin.SimpleListFilter):
    """The site page's presets (up to yesterday here: the list spans every site): rows whose whole period is inside."""

    title = "period"
    parameter_name = "period"

    def lookups(self, request, model_admin):
        return [(key, label) for key, label in periods.PRESETS.items() if key != "custom"]

    def queryset(self, request, queryset):
        if self.value() not in periods.PRESETS or self.value() == "custom":
            return queryset
        period = periods.choose(self.value(), today=timezone.localdate(), newest=None).current
        return queryset.filter(period_start__gte=period.start, period_end__lte=period.end)


@admin.register(UrlMetric)
class UrlMetricAdmin(ReadOnlyAdmin):
    # Fits 1,400 px beside the admin's menu: the URL names its site (the target is a filter), the period
    # is one column, figures are rounded as the site page shows them.
    list_display = ["url", "period", "clicks", "impressions", "ctr_percent", "position_rounded"]
    # Plain filters only: this table holds millions of rows, so no per-row distinct lookups.
    list_filter = [MetricPeriodFilter, "site_target"]
    list_select_related = ["site_target"]
    search_fields = ["url"]
    search_help_text = "Part of the URL, as imported."
    show_full_result_count = False
    readonly_fields = ["url", "url_normalized", "site_target", "period_start", "period_end", "clicks", "impressions",
                       "ctr_percent", "position_rounded", "page", "source_import", "updated_at"]
    fields = readonly_fields

    @admin.display(description="period", ordering="period_start")
    def period(self, metric):
        days = {f"{metric.period_start:%Y-%m-%d}": None, f"{metric.period_end:%Y-%m-%d}": None}  # one if equal
        return format_html_join(" → ", '<span class="nowrap">{}</span>', ([day] for day in days))

    @admin.display(description="CTR", ordering="ctr")
    def ctr_percent(self, metric):
        return figure_text.percent(metric.ctr)

    @admin.display(description="position", ordering="position")
    def position_rounded(self, metric):
        return figure_text.position(metric.position)


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


@admin.register(ColumnMapping)
class ColumnMappingAdmin(OrgScopedAdmin, admin.ModelAdmin):
    """An org's saved column mappings: fix one that reads a source wrongly, or delete it to be asked again."""

    list_display = ["id", "org", "mapping_shown", "created_by", "created_at", "used_at"]
    list_filter = ["org"]
    readonly_fields = ["org", "signature", "headers", "created_by", "created_at", "used_at"]
    fields = ["org", "headers", "mapping", "signature", "created_by", "created_at", "used_at"]

    def has_add_permission(self, request):
        return False  # made on the Imports page, from a file's own headers

    @admin.display(description="mapping")
    def mapping_shown(self, obj):
        return str(obj)

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)

        def clean_mapping(self):
            mapping = self.cleaned_data["mapping"]
            problem = (mapping_problem(tuple(self.instance.headers), mapping) if isinstance(mapping, dict)
                       else "the mapping is an object: field -> header")
            if problem:
                raise ValidationError(problem)
            return mapping

        form.clean_mapping = clean_mapping
        return form
