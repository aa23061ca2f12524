"""The notes in the admin: an org's operators list, add, correct and delete their own sites' notes.

Scoped by org (``OrgScopedAdmin``: another org's note is a 404, the site choices are the user's); a note is
judged by the same rule as on the site page (``annotations.checked``). Registered from ``InsightConfig.ready``.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.utils import timezone

from seoinsight.list_cells import shortened
from seoinsight.orgscope import OrgScopedAdmin

from . import annotations
from .models import Annotation


class AnnotationForm(forms.ModelForm):
    class Meta:
        model = Annotation
        fields = ["site", "day", "text"]
        help_texts = {"day": "From 2000-01-01 to a year from today.",
                      "text": "One line, 200 characters at most: what happened on that day (“moved to HTTPS”)."}

    def clean(self):
        data = super().clean()
        if self.errors.get("day") or "text" not in data:
            return data
        found = annotations.checked(data["day"].isoformat(), data["text"], timezone.localdate())
        for error in found.errors:
            self.add_error("day" if error.startswith("The day") else "text", error)
        if not found.errors:
            data["text"] = found.text
        return data


class AnnotationAdmin(OrgScopedAdmin, admin.ModelAdmin):
    form = AnnotationForm
    list_display = ["day", "site_name", "note", "created_by", "created_at"]
    list_display_links = ["day"]
    list_filter = ["site"]
    search_fields = ["text", "site__domain"]
    date_hierarchy = "day"
    ordering = ["-day", "-pk"]
    readonly_fields = ["created_by", "created_at"]
    list_select_related = ["site", "created_by"]

    # Cut long domains and notes (whole on hover), so the list fits 1,400 px beside the menu and the filters.
    @admin.display(description="Site", ordering="site__domain")
    def site_name(self, obj):
        return shortened(obj.site.domain, 36, tail=8)

    @admin.display(description="Note", ordering="text")
    def note(self, obj):
        return shortened(obj.text, 90, width=30)

    def save_model(self, request, obj, form, change):
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)


def register(site=admin.site) -> None:
    if not site.is_registered(Annotation):
        site.register(Annotation, AnnotationAdmin)
