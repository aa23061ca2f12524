"""Post-actions in the admin: what each stored message's source mailbox was asked to do, and how far it got.

Read-only rows; *Try again* is ``post_actions.try_again`` (failed or waiting → due at the mailbox's
next poll). Failed post-actions are counted on the admin's index, and each mailbox's page says how
many of its own are retrying or failed (``mailbox_attention``).
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Count, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from seoinsight import waiting
from seoinsight.orgscope import ReadOnlyAdmin

from .. import post_actions
from ..models import Attachment, AttachmentStatus, Mailbox, PostAction, PostActionStatus
from .display import AMBER, BLUE, EMPTY, GREEN, GREY, RED, badge, counted, preformatted, report, scoped_count, when

STATUS_COLOURS = {PostActionStatus.PENDING: BLUE, PostActionStatus.DONE: GREEN, PostActionStatus.GONE: GREY,
                  PostActionStatus.FAILED: RED}


waiting.register(
    "post-actions that failed on their mailbox",
    lambda: reverse("admin:mailpoll_postaction_changelist") + f"?status__exact={PostActionStatus.FAILED}",
    lambda request: scoped_count(request, PostAction, status=PostActionStatus.FAILED))


def _count(queryset, per: str = "mailbox_id"):
    """A correlated count of ``queryset``'s rows (0 for none), as a column."""
    return Coalesce(Subquery(queryset.values(per).annotate(n=Count("pk")).values("n"), output_field=IntegerField()), 0)


def with_attention(queryset):
    """Mailboxes with what waits on them: documents for a site, post-actions retrying and failed."""
    mine = OuterRef("pk")
    return queryset.annotate(
        documents_waiting=_count(Attachment.objects.filter(request__mailbox_id=mine,
                                                           status=AttachmentStatus.NEEDS_ROUTE), "request__mailbox_id"),
        post_actions_retrying=_count(PostAction.objects.filter(mailbox_id=mine, status=PostActionStatus.PENDING,
                                                               attempts__gt=0)),
        post_actions_failed=_count(PostAction.objects.filter(mailbox_id=mine, status=PostActionStatus.FAILED)),
    )


def mailbox_attention(mailbox):
    """What on this mailbox waits for a person or a retry, with links to the rows; "" when nothing does."""
    if not hasattr(mailbox, "documents_waiting"):
        mailbox = with_attention(Mailbox.objects.filter(pk=mailbox.pk)).get()
    parts = []
    if mailbox.documents_waiting:
        url = (reverse("admin:mailpoll_attachment_changelist")
               + f"?status__exact={AttachmentStatus.NEEDS_ROUTE}&request__mailbox__id__exact={mailbox.pk}")
        parts.append((AMBER, url, counted(mailbox.documents_waiting, "document", "documents") + " waiting for a site"))
    for count, status, colour, what in ((mailbox.post_actions_failed, PostActionStatus.FAILED, RED, "failed"),
                                        (mailbox.post_actions_retrying, PostActionStatus.PENDING, AMBER, "retrying")):
        if count:
            url = (reverse("admin:mailpoll_postaction_changelist")
                   + f"?status__exact={status}&mailbox__id__exact={mailbox.pk}")
            parts.append((colour, url, f"{counted(count, 'post-action', 'post-actions')} {what}"))
    if not parts:
        return ""
    return format_html_join(" ", '<a href="{}">{}</a>', ((url, badge(colour, text)) for colour, url, text in parts))


@admin.register(PostAction)
class PostActionAdmin(ReadOnlyAdmin):
    list_display = ["message", "mailbox", "folder", "what", "decided_by", "status_badge", "attempts", "next_try",
                    "last_error_short", "created_at"]
    list_filter = ["status", "action", "mailbox"]
    list_select_related = ["request", "mailbox"]
    search_fields = ["request__subject", "request__sender", "destination", "last_error"]
    search_help_text = "The message's subject or sender, the folder or label, the error."
    ordering = ["-created_at"]
    empty_value_display = EMPTY
    actions = ["try_again"]
    readonly_fields = ["message", "mailbox", "folder", "uid", "uidvalidity", "provider_ref", "what", "decided_by",
                       "status_badge", "attempts", "next_try", "error", "created_at", "finished_at"]
    fields = readonly_fields

    def has_operate_permission(self, request):
        return request.user.has_perm("mailpoll.change_postaction")

    @admin.display(description="message", ordering="request__created_at")
    def message(self, action):
        url = reverse("admin:mailpoll_request_change", args=[action.request_id])
        return format_html('<a href="{}">{}</a>', url, action.request.subject or action.request.source_ref)

    @admin.display(description="action", ordering="action")
    def what(self, action):
        return f"{action.get_action_display()}: {action.destination}" if action.destination \
            else action.get_action_display()

    @admin.display(description="status", ordering="status")
    def status_badge(self, action):
        return badge(STATUS_COLOURS.get(action.status, GREY), action.get_status_display(),
                     action.last_error if action.status == PostActionStatus.GONE else "")

    @admin.display(description="next try", ordering="next_try_at")
    def next_try(self, action):
        if action.status != PostActionStatus.PENDING:
            return EMPTY
        if action.next_try_at <= timezone.now():
            return "at the mailbox's next poll"
        return when(action.next_try_at)

    @admin.display(description="last error")
    def last_error_short(self, action):
        if action.status == PostActionStatus.GONE or not action.last_error:
            return EMPTY
        return action.last_error[:120]

    @admin.display(description="last error")
    def error(self, action):
        return preformatted(action.last_error) if action.last_error else EMPTY

    @admin.action(description="Try again at the mailbox's next poll", permissions=["operate"])
    def try_again(self, request, queryset):
        ids = list(queryset.values_list("pk", flat=True))
        moved = post_actions.try_again(ids, by=request.user.get_username())
        report(self, request, f"{counted(moved, 'post-action', 'post-actions')} to be tried again at the mailbox's "
               "next poll", len(ids) - moved, "done or gone: nothing left to do")
