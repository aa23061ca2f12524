"""Admin for what arrived: requests and their attachments, documents waiting for a site, stuck documents.

Requests and attachments are read-only: an attachment changes state only through the guarded
transitions of ``mailpoll.attachments`` behind "Release" and "Retry failed",
the ones the watchdog uses — back to ``pending`` with a ``process_attachment``
job, in one transaction. Display helpers are in ``display``, list filters
in ``filters``; mailboxes are in ``mailboxes``.
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Count
from django.template.defaultfilters import filesizeformat, truncatechars
from django.urls import reverse
from django.utils.html import format_html

from imports.models import ImportStatus
from seoinsight.list_cells import shortened
from seoinsight.orgscope import OrgScopedInline, ReadOnlyAdmin

from .. import attachments, conf
from .display import (ATTACHMENT_COLOURS, EMPTY, GREEN, GREY, RED, badge, counted, duration_label, import_badge,
                      preformatted, report, when)
from .filters import DocumentTypeFilter, ImportOutcomeFilter, StuckFilter
from .triage import ignore_action, make_rule_link, route_to_action
from ..models import Attachment, AttachmentStatus, Request, RequestStatus


# Statuses whose document went to no site (a site target chosen then, if any, is not where it went).
SITELESS = {AttachmentStatus.NEEDS_ROUTE, AttachmentStatus.SKIPPED}


class AttachmentColumns:
    """Columns shared by the attachment list and the inline of a request (their querysets join ``source_import``).

    A CSV or Excel attachment is ``done`` once its run handed the file to an Import. What then becomes of the
    data is that Import's own state, which moves on its own (its job retried, requeued, failed by an operator),
    so the attachment's state machine does not follow it: where the attachment says only "done", these columns
    show its Import's outcome instead, failure and error included.
    """

    @admin.display(description="size", ordering="size")
    def human_size(self, attachment):
        return filesizeformat(attachment.size)

    @admin.display(description="status", ordering="status")
    def status_badge(self, attachment):
        if attachment.status == AttachmentStatus.DONE and attachment.source_import is not None:
            return import_badge(attachment.source_import)
        return badge(ATTACHMENT_COLOURS.get(attachment.status, GREY), attachment.get_status_display())

    @admin.display(description="site", ordering="site_target__site__domain")
    def went_to(self, attachment):
        """The site an imported document went to, and the rule that sent it there (else why it went there)."""
        if attachment.site_target_id is None or attachment.status in SITELESS:
            return EMPTY
        how = f"rule '{attachment.rule_name}'" if attachment.rule_name else attachment.route_reason
        return format_html("{}<br><small>{}</small>", shortened(attachment.site_target.site.domain, 28),
                           shortened(how, 28) if how else "")

    @admin.display(description="why")
    def reason(self, attachment):
        """Why it failed, was skipped, waits for a site, or why its import failed."""
        waiting = attachment.status == AttachmentStatus.NEEDS_ROUTE
        text = attachment.error or attachment.skip_reason or (attachment.route_reason if waiting else "")
        imp = attachment.source_import
        if not text and imp is not None and imp.status == ImportStatus.FAILED:
            text = f"its import failed: {imp.error}"
        return shortened(text, 100) if text else EMPTY


class AttachmentInline(AttachmentColumns, OrgScopedInline, admin.TabularInline):
    model = Attachment
    fields = ["filename", "document_type", "mime", "human_size", "status_badge", "went_to", "reason"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("source_import", "site_target__site")

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Request)
class RequestAdmin(ReadOnlyAdmin):
    list_display = ["received_at", "org", "mailbox", "sender", "subject_short", "status_badge", "reject_reason_short",
                    "attachment_count"]
    list_filter = ["mailbox", "status", "org"]
    list_select_related = ["org", "mailbox"]
    date_hierarchy = "created_at"
    search_fields = ["subject", "sender", "source_ref"]
    search_help_text = "Subject, sender or Message-ID."
    empty_value_display = EMPTY
    inlines = [AttachmentInline]
    readonly_fields = ["org", "mailbox", "folder", "uid", "source_ref", "sender", "subject", "received_at",
                       "created_at", "human_size", "status_badge", "reject_reason", "body"]
    fields = readonly_fields

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(attachment_count=Count("attachments"))

    @admin.display(description="subject", ordering="subject")
    def subject_short(self, req):
        return truncatechars(req.subject, 80) or EMPTY

    @admin.display(description="status", ordering="status")
    def status_badge(self, req):
        return badge(GREEN if req.status == RequestStatus.ACCEPTED else RED, req.get_status_display())

    @admin.display(description="reject reason")
    def reject_reason_short(self, req):
        if not req.reject_reason:
            return EMPTY
        return shortened(req.reject_reason, 60)

    @admin.display(description="attachments", ordering="attachment_count")
    def attachment_count(self, req):
        return req.attachment_count

    @admin.display(description="size")
    def human_size(self, req):
        return filesizeformat(req.size)

    @admin.display(description="body")
    def body(self, req):
        return preformatted(req.body_text)

@admin.register(Attachment)
class AttachmentAdmin(AttachmentColumns, ReadOnlyAdmin):
    # Sized for 1,400 px with the side bar and the filters (tests/mailpoll/test_attachment_list_width.py): long
    # texts cut with the whole on hover, short headers, the arrival as "2 h ago".
    list_display = ["filename_short", "request_link", "sender_short", "type_short", "human_size", "status_badge",
                    "went_to", "attempts", "reason", "arrived"]
    list_display_links = ["filename_short"]
    list_filter = [StuckFilter, "status", ImportOutcomeFilter, DocumentTypeFilter]
    list_select_related = ["request", "source_import", "site_target__site"]
    search_fields = ["filename", "original_filename", "=sha256", "request__subject"]
    search_help_text = "File name, SHA-256 or the request's subject."
    ordering = ["-created_at"]
    empty_value_display = EMPTY
    actions = ["route_to", "ignore", "release", "retry"]
    readonly_fields = ["request_link", "sender", "kind", "document_type", "filename", "original_filename", "mime",
                       "human_size", "sha256", "stored_as", "status_badge", "route", "skip_reason", "error",
                       "attempts", "processing_started_at", "created_at", "import_outcome", "context", "extracted"]
    fields = readonly_fields

    def has_operate_permission(self, request):
        """The actions write to attachments, so they need ``change_attachment`` although no field is editable."""
        return request.user.has_perm("mailpoll.change_attachment")

    def changelist_view(self, request, extra_context=None):
        after = conf.get("MAILPOLL_STUCK_AFTER")
        subtitle = None
        if request.GET.get(StuckFilter.parameter_name) == "yes":
            subtitle = (f"Attachments processing for over {duration_label(after)}: their worker probably died. "
                        "The watchdog releases them at the end of every poll cycle; Release does it now.")
        elif request.GET.get(ImportOutcomeFilter.parameter_name) == ImportStatus.FAILED:
            subtitle = ("Documents handed to their import, whose import then failed: the attachment did its part, "
                        "the import's page says what went wrong. Once the cause is fixed, requeue the import's job "
                        "(Jobs) or send the file again.")
        elif request.GET.get("status__exact") == AttachmentStatus.NEEDS_ROUTE:
            subtitle = ("Documents waiting for a person to choose their site: no rule routed them, their sender "
                        "was not authenticated as required, or their mailbox has no site target. Route to… "
                        "imports them; Ignore drops them, recorded.")
        elif stuck := self.get_queryset(request).stuck(after).count():
            subtitle = format_html('<a href="?{}=yes">{} stuck</a> in processing for over {}',
                                   StuckFilter.parameter_name, counted(stuck, "attachment", "attachments"),
                                   duration_label(after))
        return super().changelist_view(request, {"subtitle": subtitle, **(extra_context or {})})

    @admin.display(description="import")
    def import_outcome(self, attachment):
        """What became of the data: the import's status, counts and whole error, with its pages."""
        imp = attachment.source_import
        if imp is None:
            return EMPTY
        counts = format_html("<p>{} rows read, {} inserted, {} updated, {} skipped</p>", imp.read, imp.inserted,
                             imp.updated, imp.skipped)
        return format_html('{} <small>import {}, <a href="{}">in the admin</a></small>{}{}', import_badge(imp), imp.pk,
                           reverse("admin:imports_import_change", args=[imp.pk]), counts, preformatted(imp.error))

    @admin.display(description="from", ordering="request__sender")
    def sender(self, attachment):
        return attachment.request.sender or EMPTY

    @admin.display(description="filename", ordering="filename")
    def filename_short(self, attachment):
        return shortened(attachment.filename, 48, tail=14) if attachment.filename else EMPTY

    @admin.display(description="from", ordering="request__sender")
    def sender_short(self, attachment):
        return shortened(attachment.request.sender, 32) if attachment.request.sender else EMPTY

    @admin.display(description="type", ordering="document_type")
    def type_short(self, attachment):
        return attachment.document_type or EMPTY

    @admin.display(description="arrived", ordering="created_at")
    def arrived(self, attachment):
        return when(attachment.created_at)

    @admin.display(description="routing")
    def route(self, attachment):
        if not attachment.route_reason:
            return EMPTY
        target = format_html(" → {}", attachment.site_target) if attachment.site_target_id else ""
        rule = format_html(" (rule '{}')", attachment.rule_name) if attachment.rule_name else ""
        make = make_rule_link(attachment) if attachment.status == AttachmentStatus.NEEDS_ROUTE else ""
        return format_html("{}{}{} {}", attachment.route_reason, target, rule, make)

    @admin.display(description="request", ordering="request")
    def request_link(self, attachment):
        url = reverse("admin:mailpoll_request_change", args=[attachment.request_id])
        return format_html('<a href="{}">{}</a>', url, shortened(str(attachment.request), 40))

    @admin.display(description="stored as")
    def stored_as(self, attachment):
        return attachment.file.name or EMPTY

    @admin.display(description="context (message body)")
    def context(self, attachment):
        return preformatted(attachment.context_text)

    @admin.display(description="extracted text")
    def extracted(self, attachment):
        return preformatted(attachment.extracted_text)

    @admin.action(description="Route to… a site target (documents waiting for a site)", permissions=["operate"])
    def route_to(self, request, queryset):
        return route_to_action(self, request, queryset)

    @admin.action(description="Ignore documents waiting for a site (recorded, not imported)", permissions=["operate"])
    def ignore(self, request, queryset):
        ignore_action(self, request, queryset)

    @admin.action(description="Release stuck attachments (back to pending, new job)", permissions=["operate"])
    def release(self, request, queryset):
        ids = list(queryset.values_list("pk", flat=True))
        released = attachments.release_stuck(ids).released
        report(self, request, f"{counted(len(released), 'attachment', 'attachments')} released and queued",
               len(ids) - len(released),
               f"only attachments processing for over {duration_label(conf.get('MAILPOLL_STUCK_AFTER'))} "
               "can be released")

    @admin.action(description="Retry failed attachments (back to pending, new job)", permissions=["operate"])
    def retry(self, request, queryset):
        ids = list(queryset.values_list("pk", flat=True))
        retried = attachments.retry_failed(ids)
        report(self, request, f"{counted(len(retried), 'attachment', 'attachments')} queued again",
               len(ids) - len(retried), "only failed attachments can be retried")
