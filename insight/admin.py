"""The admin's alerts, org-scoped: Operators see their orgs' alerts and acknowledge them (an action, a button).

Alerts are written by the detector only: no field is edited by hand, nobody adds or deletes one here. The thresholds
that raise them are an org setting, a superuser's (``operator_group.LEFT_OUT``).
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html

from seoinsight.admin import SaysWhoDecides
from seoinsight.orgscope import OrgScopedAdmin, SuperuserOnlyAdmin

from .alerts import describe
from .alerts.acknowledge import acknowledge
from .models import Alert, AlertThresholds


class AcknowledgedFilter(admin.SimpleListFilter):
    title = "acknowledged"
    parameter_name = "acknowledged"

    def lookups(self, request, model_admin):
        return [("no", "Not yet"), ("yes", "Acknowledged")]

    def queryset(self, request, queryset):
        if self.value() == "no":
            return queryset.filter(acknowledged_at__isnull=True)
        if self.value() == "yes":
            return queryset.filter(acknowledged_at__isnull=False)
        return queryset


@admin.register(Alert)
class AlertAdmin(OrgScopedAdmin, admin.ModelAdmin):
    change_form_template = "admin/insight/alert/change_form.html"
    list_display = ["id", "site_kind", "what", "period", "created_at", "acknowledged"]
    list_display_links = ["id", "what"]
    list_filter = [AcknowledgedFilter, "kind", "site__org"]
    list_select_related = ["site", "acknowledged_by"]
    search_fields = ["site__domain", "page_url"]
    date_hierarchy = "created_at"
    actions = ["acknowledge_selected"]
    fields = ["site", "kind", "page_url", "what", "period", "before", "after", "created_at", "acknowledged",
              "acknowledge_button"]
    readonly_fields = fields

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [path("<path:object_id>/acknowledge/", wrap(self.acknowledge_view), name="insight_alert_acknowledge"),
                *super().get_urls()]

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        if obj is not None and obj.acknowledged_at is None and self.has_change_permission(request, obj):
            context["acknowledge_url"] = reverse("admin:insight_alert_acknowledge", args=[obj.pk])
        return super().render_change_form(request, context, add=add, change=change, form_url=form_url, obj=obj)

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        # Every field is read-only: nothing to save, so no Save buttons.
        extra_context = {**(extra_context or {}), "show_save": False, "show_save_and_continue": False,
                         "show_save_and_add_another": False}
        return super().changeform_view(request, object_id, form_url, extra_context)

    @admin.action(description="Acknowledge the selected alerts", permissions=["change"])
    def acknowledge_selected(self, request, queryset):
        done = acknowledge(queryset, request.user)
        left = queryset.count() - done
        already = f"; {left} already were" if left else ""
        self.message_user(request, f"Acknowledged {done} alert(s){already}.", messages.SUCCESS)

    def acknowledge_view(self, request, object_id):
        """The change page's Acknowledge button: the action on this one alert, then back to its page."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        alert = self.get_object(request, unquote(object_id))  # of the user's orgs only
        if alert is None:
            raise Http404("No alert of your orgs has this id.")
        if not self.has_change_permission(request, alert):
            raise PermissionDenied
        self.acknowledge_selected(request, Alert.objects.filter(pk=alert.pk))
        return HttpResponseRedirect(reverse("admin:insight_alert_change", args=[alert.pk]))

    @admin.display(description="site", ordering="site__domain")
    def site_kind(self, alert):
        return format_html("{}<br><small>{}</small>", alert.site.domain, alert.get_kind_display())

    @admin.display(description="what")
    def what(self, alert):
        # A page's address has no space to wrap at: it may break anywhere rather than widen the list.
        return format_html('<span style="overflow-wrap:anywhere">{}</span>', describe.headline(alert))

    @admin.display(description="period", ordering="period_end")
    def period(self, alert):
        return describe.period(alert)

    @admin.display(description="acknowledged", ordering="acknowledged_at")
    def acknowledged(self, alert):
        return describe.acknowledged(alert) or "not yet"

    @admin.display(description="acknowledge")
    def acknowledge_button(self, alert):
        if alert.acknowledged_at is not None:
            return describe.acknowledged(alert)
        # Submits the page's separate "insight-acknowledge" form (a POST with its CSRF token).
        return format_html('<button type="submit" class="button" form="{}">Acknowledge</button> '
                           "<small>Keeps your name and the time; the alert leaves <em>Waiting for you</em>.</small>",
                           "insight-acknowledge")


@admin.register(AlertThresholds)
class AlertThresholdsAdmin(SaysWhoDecides, SuperuserOnlyAdmin, admin.ModelAdmin):
    decided_by_superuser = ("How far an org's clicks must fall to raise an alert is an org setting, decided by a "
                            "superuser.")
    list_display = ["org", "drop_percent", "drop_clicks"]
    autocomplete_fields = ["org"]
