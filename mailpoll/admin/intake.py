"""Admin for mail intake: mailbox health at a glance, what arrived, stuck documents.

Mailboxes are edited here, their secrets write-only; an OAuth mailbox's Connect button starts the consent
flow of ``oauth.connect`` (its URLs hang under this admin's). Requests and attachments
are read-only: an attachment changes state only through the guarded
transitions of ``mailpoll.attachments`` behind "Release" and "Retry failed",
the ones the watchdog uses — back to ``pending`` with a ``process_attachment``
job, in one transaction. Display helpers are in ``display``, list filters
in ``filters``, health in ``mailpoll.health``.
"""

from __future__ import annotations

from functools import partial

from django.contrib import admin, messages
from django.db.models import Count
from django.template.defaultfilters import filesizeformat, truncatechars
from django.urls import path, reverse
from django.utils.html import format_html

from imports.models import ImportStatus
from jobs import conf as jobs_conf
from seoinsight.orgscope import OrgScopedAdmin, OrgScopedInline, ReadOnlyAdmin

from .. import attachments, conf
from ..oauth import tokens as oauth
from .connection import connection_test_action, connection_test_view
from .cursors import FolderCursorInline, resync_folders_action
from .display import (ATTACHMENT_COLOURS, BLUE, EMPTY, GREEN, GREY, RED, AMBER, ago, badge, cliff_text, connect_button,
                      counted, duration_label, error_heading, grant_of, import_badge, live_state, next_try,
                      preformatted, report, shortened, token_badge, when, with_next_try)
from .filters import DocumentTypeFilter, HealthFilter, ImportOutcomeFilter, StuckFilter, TokenStateFilter
from .forms import MailboxForm
from .post_actions import mailbox_attention, with_attention
from .triage import ignore_action, make_rule_link, route_to_action
from ..health import FAILING, HEALTHY, NEVER, mailbox_health
from ..models import Attachment, AttachmentStatus, Auth, GrantState, Mailbox, Provider, Request, RequestStatus
from ..oauth.connect import ConnectViews
from ..sync import poller
from ..sync.connection_check import DEADLINE as CONNECTION_DEADLINE




# Mailboxes ------------------------------------------------------------------------------------------------


@admin.register(Mailbox)
class MailboxAdmin(OrgScopedAdmin, admin.ModelAdmin):
    form = MailboxForm
    # What needs doing first (health, last error, next try, what waits), then which account: it fits 1,400 px
    # with the side bar and the filters open. The health cell also says enabled, failures in a row, the token
    # and the live watch; the org is under the name, the last poll under the next try.
    list_display = ["mailbox", "health", "last_error_short", "next_try_column", "attention", "account"]
    list_filter = ["org", "enabled", "provider", "auth", HealthFilter, TokenStateFilter]
    list_select_related = ["org", "oauth_grant", "live_watch"]
    search_fields = ["name", "username", "host"]
    ordering = ["org", "name"]
    autocomplete_fields = ["org"]
    empty_value_display = EMPTY
    inlines = [FolderCursorInline]
    actions = ["poll_now", "test_connection", "enable", "disable", "resync_folders"]
    readonly_fields = ["provider_auth", "secret_state", "app_secret_state", "token_detail", "cliff", "connect",
                       "health_badge", "last_polled_at", "last_success_at", "consecutive_failures", "next_try_at",
                       "last_error_at", "last_error_text", "requests_link", "created_at", "live_watch_state",
                       "live_watch_since", "attention", "connection_test"]

    def get_queryset(self, request):
        return with_attention(with_next_try(super().get_queryset(request)))

    def get_fieldsets(self, request, obj=None):
        secret = ["password", "remove_secret", "secret_state"] if obj else ["password"]
        app_secret = ["new_app_secret", "remove_app_secret", "app_secret_state"] if obj else ["new_app_secret"]
        # On an existing mailbox, the sections it does not use are folded away (still editable).
        unused_imap = ["collapse"] if obj and obj.provider != Provider.IMAP else []
        unused_app = ["collapse"] if obj and obj.auth == Auth.PASSWORD else []
        fieldsets = [
            (None, {"fields": ["org", "name", "enabled"]}),
            ("Connection", {"fields": ["provider", "auth", "username"]}),
            ("IMAP server", {"fields": ["host", "port", "security", *secret], "classes": unused_imap,
                             "description": "IMAP only; the password with password auth only."}),
            ("OAuth app", {"fields": ["oauth_provider", "client_id", "tenant", *app_secret], "classes": unused_app,
                           "description": "OAuth and service-account mailboxes; empty fields: the settings' app."}),
            ("What to read", {"fields": ["folders", "poll_interval", "initial_mode", "initial_since",
                                         "site_target", "live"]}),
            ("Senders", {"fields": ["authserv_id", "require_authenticated_sender"],
                         "description": "Who may route documents into a site: see Mail rules in docs/mail.md."}),
            ("After storing", {"fields": ["post_action", "post_action_folder"],
                               "description": "What the server is asked to do to a message once its documents are "
                               "stored (a mail rule may say otherwise for its messages). A Gmail or Microsoft grant "
                               "must allow changes: connect the mailbox again after turning this on."}),
        ]
        if obj:
            # First, so the page answers at a glance: which provider, its token, its health and last error.
            glance = ["provider_auth", "health_badge", "attention", "last_error_text"]
            if self.has_change_permission(request, obj):
                glance.append("connection_test")
            if obj.auth != Auth.PASSWORD:
                # Connect changes the mailbox's grant: offered only to who may change the mailbox.
                connect = ["connect"] if self.has_change_permission(request, obj) else []
                glance[1:1] = ["token_detail", "cliff", *connect]
            fieldsets.insert(0, ("At a glance", {"fields": glance}))
            fieldsets.append(("Health", {"fields": ["last_polled_at", "last_success_at", "consecutive_failures",
                                                    "next_try_at", "last_error_at", "requests_link",
                                                    "created_at", "live_watch_state"]}))
        return self._live_column(request, fieldsets)

    def get_list_display(self, request):
        return self._live_column(request, super().get_list_display(request))

    # The fields and columns that name the process watching a live mailbox, and what org staff see instead.
    SUPERUSERS_ONLY = {"live_watch_state": "live_watch_since", "health": "health_seen_by_staff"}

    @classmethod
    def _live_column(cls, request, names):
        """Only superusers see which host and process watches a live mailbox: org staff see since when."""
        if request.user.is_superuser:
            return names
        if isinstance(names, list) and names and isinstance(names[0], tuple):  # fieldsets
            return [(title, {**options, "fields": [cls.SUPERUSERS_ONLY.get(name, name) for name in options["fields"]]})
                    for title, options in names]
        return [cls.SUPERUSERS_ONLY.get(name, name) for name in names]

    def get_readonly_fields(self, request, obj=None):
        # An org owns its mailboxes' requests (and their dedup): a mailbox does not move between orgs.
        return [*self.readonly_fields, "org"] if obj else self.readonly_fields

    def get_inlines(self, request, obj):
        return self.inlines if obj else []

    def get_urls(self):
        views, wrap = ConnectViews(self), self.admin_site.admin_view
        # Before the defaults: their <path:object_id>/ would take "oauth/callback/" for an object id.
        return [
            # The redirect URI registered at Google and Microsoft: one for every mailbox (the state says which).
            path("oauth/callback/", wrap(views.callback), name="mailpoll_mailbox_oauth_callback"),
            path("<path:object_id>/connect/", wrap(views.start), name="mailpoll_mailbox_connect"),
            path("<path:object_id>/test-connection/", wrap(partial(connection_test_view, self)),
                 name="mailpoll_mailbox_test_connection"),
            *super().get_urls(),
        ]

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        if obj is not None and self.has_change_permission(request, obj):
            # The buttons' forms, rendered after the change form (templates/admin/mailpoll/mailbox).
            context["test_connection_url"] = reverse("admin:mailpoll_mailbox_test_connection", args=[obj.pk])
            if obj.auth == Auth.OAUTH:
                context["connect_url"] = reverse("admin:mailpoll_mailbox_connect", args=[obj.pk])
        return super().render_change_form(request, context, add=add, change=change, form_url=form_url, obj=obj)

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if change and getattr(form, "app_changed", None):
            # The grant was given to the old app (or issuer): its refresh token is never sent to the new one.
            if oauth.disconnect(obj, f"the {', '.join(form.app_changed)} changed"):
                self.message_user(request, f"The {', '.join(form.app_changed)} changed: the mailbox's OAuth grant "
                                  "was removed; connect it again.", messages.WARNING)

    @admin.display(description="waiting")
    def attention(self, mailbox):
        return mailbox_attention(mailbox) or EMPTY

    @admin.display(description="mailbox", ordering="name")
    def mailbox(self, mailbox):
        return format_html("{}<br><small>{}</small>", mailbox.name, mailbox.org)

    @admin.display(description="account", ordering="username")
    def account(self, mailbox):
        where = mailbox.host if mailbox.provider == Provider.IMAP else mailbox.get_provider_display()
        # A long address has no space to wrap at: it may break anywhere rather than widen the list.
        return format_html('<span style="overflow-wrap:anywhere">{}</span><br><small>{}</small>',
                           f"{mailbox.username}@{where}", self.provider_auth(mailbox))

    @admin.display(description="provider", ordering="provider")
    def provider_auth(self, mailbox):
        return f"{mailbox.get_provider_display()}, {mailbox.get_auth_display()}"

    @admin.display(description="token state")
    def token_detail(self, mailbox):
        return token_badge(mailbox, detail=True)

    @admin.display(description="warning")
    def cliff(self, mailbox):
        text = cliff_text(grant_of(mailbox))
        return format_html('<span style="color:{}">{}</span>', AMBER, text) if text else EMPTY

    @admin.display(description="connect")
    def connect(self, mailbox):
        return connect_button(mailbox)

    @admin.display(description="connection")
    def connection_test(self, mailbox):
        # Submits the page's separate "mailpoll-test-connection" form (a POST with its CSRF token).
        return format_html('<button type="submit" class="button" form="mailpoll-test-connection">Test connection'
                           "</button> <small>Connects, logs in and opens each folder read-only, within {} s; "
                           "stores and changes nothing. Save your edits first.</small>", f"{CONNECTION_DEADLINE:g}")

    @admin.display(description="app secret")
    def app_secret_state(self, mailbox):
        return "stored (encrypted)" if mailbox.app_secret else "none stored"

    @admin.display(description="health", ordering="consecutive_failures")
    def health_badge(self, mailbox):
        state, label = mailbox_health(mailbox)
        colour = {HEALTHY: GREEN, FAILING: RED, NEVER: BLUE}.get(state, GREY)
        if state == FAILING:
            return badge(colour, label, mailbox.last_error)
        return badge(colour, label, f"last success {ago(mailbox.last_success_at)}" if state == HEALTHY else "")

    @admin.display(description="health", ordering="consecutive_failures")
    def health(self, mailbox, *, internal: bool = True):
        """The list's health cell: the health, a user-consent mailbox's token state, and a live mailbox's watch."""
        token = token_badge(mailbox) if mailbox.auth == Auth.OAUTH else ""
        live = format_html("<br><small>{}</small>", live_state(mailbox, internal=internal)) if mailbox.live else ""
        return format_html("{} {}{}", self.health_badge(mailbox), token, live)

    @admin.display(description="health", ordering="consecutive_failures")
    def health_seen_by_staff(self, mailbox):
        return self.health(mailbox, internal=False)

    @admin.display(description="live (IMAP IDLE)")
    def live_watch_state(self, mailbox):
        return live_state(mailbox, internal=True)

    @admin.display(description="live (IMAP IDLE)")
    def live_watch_since(self, mailbox):
        return live_state(mailbox, internal=False)

    @admin.display(description="next try at", ordering="claim_due_at")
    def next_try_column(self, mailbox):
        """When a poller takes it next, and when one last did (it keeps growing when no pollmail runs)."""
        polled = mailbox.last_polled_at
        last = format_html("<br><small>last poll {}</small>", when(polled)) if polled else ""
        return format_html("{}{}", next_try(mailbox), last)

    @admin.display(description="last error", ordering="last_error_at")
    def last_error_short(self, mailbox):
        if not mailbox.last_error:
            return EMPTY
        heading = error_heading(mailbox.last_error, mailbox.consecutive_failures, mailbox.last_success_at)
        return format_html(
            '<span title="{}" style="{}">{}{}</span> <small>({})</small>',
            mailbox.last_error, "opacity:.6" if heading else "", f"{heading}: " if heading else "",
            truncatechars(mailbox.last_error, 60), ago(mailbox.last_error_at) if mailbox.last_error_at else "?",
        )

    @admin.display(description="next try at", ordering="claim_due_at")
    def next_try_at(self, mailbox):
        return next_try(mailbox)

    @admin.display(description="last error")
    def last_error_text(self, mailbox):
        heading = error_heading(mailbox.last_error, mailbox.consecutive_failures, mailbox.last_success_at)
        if heading:
            return format_html("<p>{}:</p>{}", heading, preformatted(mailbox.last_error))
        return preformatted(mailbox.last_error)

    @admin.display(description="secret")
    def secret_state(self, mailbox):
        return "stored (encrypted)" if mailbox.secret else "none stored"

    @admin.display(description="requests")
    def requests_link(self, mailbox):
        url = reverse("admin:mailpoll_request_changelist") + f"?mailbox__id__exact={mailbox.pk}"
        return format_html('<a href="{}">{}</a>', url, counted(mailbox.requests.count(), "request", "requests"))

    @admin.action(description="Poll now (wakes any running pollmail)", permissions=["change"])
    def poll_now(self, request, queryset):
        ids = list(queryset.values_list("pk", flat=True))
        changed = poller.mark_due(ids)
        woken = ("any running pollmail is woken and polls them now" if jobs_conf.get("JOBS_LISTEN_NOTIFY") else
                 f"the next cycle of any running pollmail (every {conf.get('MAILPOLL_INTERVAL'):g} s) polls them")
        report(self, request, f"{counted(changed, 'mailbox', 'mailboxes')} marked due: {woken}", len(ids) - changed,
               "disabled mailboxes are never polled: enable them first")
        # The claim takes an OAuth mailbox only with an active grant (mailpoll.sql): say so rather than wait.
        blocked = (Mailbox.objects.filter(pk__in=ids, enabled=True, auth=Auth.OAUTH)
                   .exclude(oauth_grant__state=GrantState.ACTIVE).order_by("name").values_list("name", flat=True))
        if blocked:
            self.message_user(request, f"{', '.join(blocked)}: needs re-authorization or not connected, so it will "
                              "not be polled until someone reconnects it (Connect on its page).", messages.WARNING)

    @admin.action(description="Test connection (log in, open the folders; changes nothing)", permissions=["change"])
    def test_connection(self, request, queryset):
        return connection_test_action(self, request, queryset)

    @admin.action(description="Resync folders… (pick the folders to read again in full)", permissions=["change"])
    def resync_folders(self, request, queryset):
        return resync_folders_action(self, request, queryset)

    @admin.action(description="Enable selected mailboxes", permissions=["change"])
    def enable(self, request, queryset):
        ids = list(queryset.values_list("pk", flat=True))
        changed = Mailbox.objects.filter(pk__in=ids, enabled=False).update(enabled=True)
        report(self, request, f"{counted(changed, 'mailbox', 'mailboxes')} enabled", len(ids) - changed,
               "already enabled")

    @admin.action(description="Disable selected mailboxes", permissions=["change"])
    def disable(self, request, queryset):
        ids = list(queryset.values_list("pk", flat=True))
        changed = Mailbox.objects.filter(pk__in=ids, enabled=True).update(enabled=False)
        report(self, request, f"{counted(changed, 'mailbox', 'mailboxes')} disabled", len(ids) - changed,
               "already disabled")


# Requests and attachments ---------------------------------------------------------------------------------


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
    fields = ["filename", "document_type", "mime", "human_size", "status_badge", "reason"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("source_import")

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
                    "attempts", "reason", "arrived"]
    list_display_links = ["filename_short"]
    list_filter = [StuckFilter, "status", ImportOutcomeFilter, DocumentTypeFilter]
    list_select_related = ["request", "source_import"]
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
