"""Admin for the outbox: the documents waiting for the downstream, how long, how many tries, the last error.

Read-only, scoped by org (``seoinsight.orgscope``): an entry changes only through
``outbox.entries``. "Retry now" (the change permission) makes waiting entries due
at once and queues a sender; deleting an entry would drop a held document, so
there is no delete. The heading counts the viewer's orgs' documents only (the
whole outbox for a superuser).

An entry links to its document's own admin page (``document_url``), found by the
admin's URL names alone, so the outbox knows no app above it. That page is
scoped by org as well; and an entry is of its document's org, so the operator
who sees the entry is one who may see the document.
"""

from __future__ import annotations

import re

from django.contrib import admin
from django.contrib.auth import get_permission_codename
from django.template.defaultfilters import truncatechars
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils import timezone
from django.utils.timesince import timesince

from seoinsight.orgscope import ReadOnlyAdmin, reachable_orgs

from . import capacity, entries
from .models import Entry
from .wake import wake


# A document_ref naming a model's row: "<app_label>.<model_name>:<pk>" ("mailpoll.attachment:42").
MODEL_REF = re.compile(r"(?P<app>[a-z][a-z0-9_]*)\.(?P<model>[a-z][a-z0-9_]*):(?P<pk>[0-9]+)")


def document_url(document_ref: str) -> tuple[str, str] | None:
    """The admin change page of the row ``document_ref`` names and a label for it; None for another kind of
    ref, or a model the admin does not show.

    ``mailpoll.attachment:42`` is ``admin:mailpoll_attachment_change`` of 42: the attachment, whose page
    links on to its Request.
    """
    match = MODEL_REF.fullmatch(document_ref)
    if match is None:
        return None
    try:
        url = reverse(f"admin:{match['app']}_{match['model']}_change", args=[match["pk"]])
    except NoReverseMatch:
        return None
    return url, f"{match['model']} {match['pk']}"


@admin.register(Entry)
class EntryAdmin(ReadOnlyAdmin):
    list_display = ["document_ref", "document_link", "org", "filename", "state", "age", "attempts", "next_try",
                    "error_short", "claimed_by"]
    list_filter = ["state", "org"]
    list_select_related = ["org"]
    ordering = ["created_at", "id"]
    search_fields = ["document_ref", "last_error"]
    readonly_fields = ["key", "org", "document_ref", "document_link", "source", "state", "attempts", "last_error", "next_attempt_at",
                       "unreachable", "claimed_by", "lease_until", "last_tried_at", "created_at", "file", "file_size",
                       "file_sha256", "document"]
    actions = ["retry_now"]

    def has_retry_permission(self, request):
        # An action that moves rows: the change permission, as the admin's own edits need (not view).
        opts = self.opts
        return request.user.has_perm(f"{opts.app_label}.{get_permission_codename('change', opts)}")

    def changelist_view(self, request, extra_context=None):
        extra_context = {**(extra_context or {}), "title": self.title(request)}
        return super().changelist_view(request, extra_context)

    def title(self, request) -> str:
        """The page's heading: the whole outbox for a superuser; for anyone else, their orgs' documents only."""
        current = capacity.depth()
        if not capacity.enabled():
            state = " (DOWNSTREAM_URL is not set: the outbox is off)"
        else:
            state = " (full: mail intake is stopped)" if current.full else ""
        if reachable_orgs(request) is None:
            return f"Outbox: {current.held} of {current.capacity} documents waiting for the downstream{state}"
        mine = self.get_queryset(request).count()
        return f"Outbox: {mine} document{'' if mine == 1 else 's'} of your orgs waiting for the downstream{state}"

    @admin.display(description="document page")
    def document_link(self, entry):
        found = document_url(entry.document_ref)
        if found is None:
            return "—"
        return format_html('<a href="{}">{}</a>', *found)

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
        wait = f"in {timesince(timezone.now(), entry.next_attempt_at)}"
        # Not sooner than its backoff unless the downstream was merely away: then its next success brings it.
        return f"{wait}, or as soon as the downstream answers again" if entry.unreachable else wait

    @admin.display(description="last error")
    def error_short(self, entry):
        return truncatechars(entry.last_error, 120) or "—"

    @admin.action(description="Retry now (waiting entries due at once)", permissions=["retry"])
    def retry_now(self, request, queryset):
        ids = list(queryset.values_list("pk", flat=True))
        moved = entries.retry_now(ids)
        if moved:
            wake()
        self.message_user(request, f"{len(moved)} of {len(ids)} entries due now"
                          + ("; the others are being sent right now" if len(moved) < len(ids) else ""))
