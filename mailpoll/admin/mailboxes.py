"""Admin for mailboxes: each one's health at a glance, its connection, its folders, what it is waiting on.

Mailboxes are edited here, their secrets write-only; an OAuth mailbox's Connect button starts the consent
flow of ``oauth.connect`` (its URLs hang under this admin's). Display helpers are in ``display``, list
filters in ``filters``, health in ``mailpoll.health``; what arrived is in ``intake``.
"""

from __future__ import annotations

from functools import partial

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.defaultfilters import truncatechars
from django.urls import path, reverse
from django.utils.html import format_html

from jobs import conf as jobs_conf
from seoinsight.orgscope import OrgScopedAdmin

from .. import conf
from ..oauth import tokens as oauth
from .connection import connection_test_action, connection_test_view
from .cursors import FolderCursorInline, resync_folders_action
from .display import (AMBER, BLUE, EMPTY, GREEN, GREY, RED, ago, badge, cliff_text, connect_button, counted,
                      error_heading, grant_of, live_state, next_try, recorded_error, report, token_badge, when,
                      with_next_try)
from .filters import HealthFilter, TokenStateFilter
from .forms import MailboxForm
from .post_actions import mailbox_attention, with_attention
from .sender_headers import shown as sender_headers_shown, warns as sender_headers_warn
from ..health import FAILING, HEALTHY, NEVER, mailbox_health
from ..models import Auth, GrantState, Mailbox, Provider
from ..oauth.connect import ConnectViews
from ..providers.diagnosis import split_recorded
from ..sync import poller
from ..sync.connection_check import DEADLINE as CONNECTION_DEADLINE


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
                       "live_watch_since", "attention", "poll_now_button", "connection_test", "sender_headers"]

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
            ("Senders", {"fields": ["authserv_id", "require_authenticated_sender",
                                    *(["sender_headers"] if obj and not sender_headers_warn(obj) else [])],
                         "description": "Who may route documents into a site: see Mail rules in docs/mail.md."}),
            ("After storing", {"fields": ["post_action", "post_action_folder"],
                               "description": "What the server is asked to do to a message once its documents are "
                               "stored (a mail rule may say otherwise for its messages). A Gmail or Microsoft grant "
                               "must allow changes: connect the mailbox again after turning this on."}),
        ]
        if obj:
            # First, so the page answers at a glance: which provider, its token, its health and last error.
            glance = ["provider_auth", "health_badge", "attention", "last_error_text"]
            if sender_headers_warn(obj):
                glance.append("sender_headers")  # a forged sender would pass: said first, not under Senders
            if self.has_change_permission(request, obj):
                glance += ["poll_now_button", "connection_test"]
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
            path("<path:object_id>/poll-now/", wrap(self.poll_now_view), name="mailpoll_mailbox_poll_now"),
            *super().get_urls(),
        ]

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        if obj is not None and self.has_change_permission(request, obj):
            # The buttons' forms, rendered after the change form (templates/admin/mailpoll/mailbox).
            context["test_connection_url"] = reverse("admin:mailpoll_mailbox_test_connection", args=[obj.pk])
            context["poll_now_url"] = reverse("admin:mailpoll_mailbox_poll_now", args=[obj.pk])
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

    @admin.display(description="sender headers")
    def sender_headers(self, mailbox):
        return sender_headers_shown(mailbox)

    @admin.display(description="connect")
    def connect(self, mailbox):
        return connect_button(mailbox)

    @admin.display(description="poll")
    def poll_now_button(self, mailbox):
        # Submits the page's separate "mailpoll-poll-now" form (a POST with its CSRF token).
        return format_html('<button type="submit" class="button" form="{}">Poll now</button> <small>Marks this '
                           "mailbox due: a running pollmail polls it at once. Save your edits first.</small>",
                           "mailpoll-poll-now")

    def poll_now_view(self, request, object_id):
        """The change page's Poll now: the list's action on this one mailbox, then back to its page."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        mailbox = self.get_object(request, unquote(object_id))  # of the user's orgs only
        if mailbox is None:
            raise Http404("No mailbox of your orgs has this id.")
        if not self.has_change_permission(request, mailbox):
            raise PermissionDenied
        self.poll_now(request, Mailbox.objects.filter(pk=mailbox.pk))
        return HttpResponseRedirect(reverse("admin:mailpoll_mailbox_change", args=[mailbox.pk]))

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
        # The headline Test connection would give; the raw text on hover.
        shown, _ = split_recorded(mailbox.last_error)
        return format_html(
            '<span title="{}" style="{}">{}{}</span> <small>({})</small>',
            mailbox.last_error, "opacity:.6" if heading else "", f"{heading}: " if heading else "",
            truncatechars(shown, 60), ago(mailbox.last_error_at) if mailbox.last_error_at else "?",
        )

    @admin.display(description="next try at", ordering="claim_due_at")
    def next_try_at(self, mailbox):
        return next_try(mailbox)

    @admin.display(description="last error")
    def last_error_text(self, mailbox):
        heading = error_heading(mailbox.last_error, mailbox.consecutive_failures, mailbox.last_success_at)
        shown = recorded_error(mailbox.last_error)
        if heading:
            return format_html("<p>{}:</p>{}", heading, shown)
        return shown

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
