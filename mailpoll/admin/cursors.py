"""Folder cursors in the admin: how far each folder has been durably read, and the operator's *Resync folder*.

A cursor the provider no longer honours (a Gmail ``historyId`` it answers 400 to, a Graph ``deltaLink`` of
another cloud, an IMAP position an operator distrusts) would otherwise need SQL. *Resync folder* expires it
so that the next poll takes the provider's own resync path, the one a 404 / 410 / UIDVALIDITY change
takes, with dedup absorbing what was stored before:

* an API cursor (``position``) is dropped and a resync is started on the row (``resync_started_at``, the
  count, the reason): ``cursor.plan_changes_read`` then reads the whole folder, and the resync ends when
  a position that completes the read is committed (``changes_sync``);
* an IMAP cursor gets ``EXPIRED_UIDVALIDITY``, which no server sends (RFC 3501: UIDVALIDITY is non-zero):
  ``cursor.plan_folder_sync`` sees a UIDVALIDITY change and sweeps the folder in full.

It is an action of the mailbox list (it needs the right to change mailboxes), with a page of its own on
which the operator picks the folders of the selected mailboxes: only cursors of those mailboxes, which the
list has already limited to the user's orgs, can be picked, so a forged id does nothing. Each resync is
logged and kept in the mailbox's history.
"""

from __future__ import annotations

import logging

from django.contrib import admin
from django.contrib.admin import helpers
from django.db import transaction
from django.db.models import F
from django.template.defaultfilters import truncatechars
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.html import format_html

from seoinsight.orgscope import OrgScopedInline

from .display import EMPTY, RED, counted, cursor_position, cursor_resyncs, report, when
from ..models import FolderCursor, Mailbox

logger = logging.getLogger("mailpoll.admin_cursors")  # its name before the move: operators grep it

# RFC 3501 §2.3.1.1: a server's UIDVALIDITY is a non-zero 32-bit value, so 0 never matches the folder's.
EXPIRED_UIDVALIDITY = 0
API, IMAP = "api", "imap"


def resync_kind(position: str, uidvalidity: int | None, resyncing: bool) -> str:
    """How a cursor is expired (``API`` or ``IMAP``), or why it is left alone.

    >>> resync_kind("4711", None, False), resync_kind("https://graph/delta?t=1", None, True)
    ('api', 'api')
    >>> resync_kind("", 1234, False), resync_kind("", EXPIRED_UIDVALIDITY, False)
    ('imap', 'already due for a full sweep')
    >>> resync_kind("", None, True), resync_kind("", None, False)
    ('already resyncing from the start', 'not read yet: its first poll reads it')
    """
    if position:
        return API  # a resync under way that got somewhere starts over too
    if resyncing:
        return "already resyncing from the start"
    if uidvalidity is None:
        return "not read yet: its first poll reads it"
    if uidvalidity == EXPIRED_UIDVALIDITY:
        return "already due for a full sweep"
    return IMAP


def resync_cursors(ids, *, reason: str, now=None) -> tuple[list[FolderCursor], dict[int, str]]:
    """Expire the cursors ``ids`` (locked, then one guarded UPDATE per kind); the ones expired, and why the
    others were left alone. Their enabled mailboxes are made due, so the resync starts at the next cycle.

    A poll of the folder already under way may still commit the position it read to: it vouches only for
    what it stored, and the operator can resync again once it is done.
    """
    now = now or timezone.now()
    reason = reason[:2000]
    with transaction.atomic():
        rows = list(FolderCursor.objects.select_for_update().filter(pk__in=ids).order_by("pk"))
        kinds = {row.pk: resync_kind(row.position, row.uidvalidity, row.resync_started_at is not None) for row in rows}
        by_kind = {kind: [pk for pk, k in kinds.items() if k == kind] for kind in (API, IMAP)}
        # An API cursor with a position -> none, a resync started: the next read is the whole folder.
        api = FolderCursor.objects.filter(pk__in=by_kind[API]).exclude(position="").update(
            position="", resync_started_at=now, resyncs=F("resyncs") + 1, last_resync_at=now, resync_reason=reason)
        # An IMAP cursor -> a UIDVALIDITY no server has: the next read is a full sweep.
        imap = (FolderCursor.objects.filter(pk__in=by_kind[IMAP], uidvalidity__isnull=False)
                .exclude(uidvalidity=EXPIRED_UIDVALIDITY)
                .update(uidvalidity=EXPIRED_UIDVALIDITY, last_uid=0, sweep_until=None, sweep_since=None,
                        resyncs=F("resyncs") + 1, last_resync_at=now, resync_reason=reason))
        if (api, imap) != (len(by_kind[API]), len(by_kind[IMAP])):
            raise RuntimeError("a folder cursor changed under its row lock")
        done = [row for row in rows if kinds[row.pk] in (API, IMAP)]
        Mailbox.objects.filter(pk__in={row.mailbox_id for row in done}, enabled=True).update(last_polled_at=None)
    return done, {pk: kind for pk, kind in kinds.items() if kind not in (API, IMAP)}


class CursorColumns:
    """Columns shared by the cursor list and the mailbox page's inline."""

    @admin.display(description="last sync")
    def last_sync(self, cursor):
        return when(cursor.last_sync_ts)

    @admin.display(description="cursor")
    def position_shown(self, cursor):
        if cursor.uidvalidity == EXPIRED_UIDVALIDITY:
            return "expired: the next poll sweeps the whole folder again"
        return cursor_position(cursor)

    @admin.display(description="resyncs")
    def resync(self, cursor):
        return cursor_resyncs(cursor)

    @admin.display(description="sweep")
    def sweep(self, cursor):
        """An unfinished first (or UIDVALIDITY) sweep, resumed by the next poll."""
        if cursor.sweep_until is None:
            return EMPTY
        since = f" since {cursor.sweep_since:%Y-%m-%d}" if cursor.sweep_since else ""
        return f"unfinished{since}: up to uid {cursor.sweep_until}"

    @admin.display(description="problem")
    def problem(self, cursor):
        """The folder's own error at its last poll (it could not be read, or one message in it)."""
        if not cursor.last_error:
            return EMPTY
        return format_html('<span style="color:{}">{}</span> {}', RED, truncatechars(cursor.last_error, 300),
                           when(cursor.last_error_at))


class FolderCursorInline(CursorColumns, OrgScopedInline, admin.TabularInline):
    model = FolderCursor
    verbose_name_plural = ("cursors (how far each folder has been durably read; to read one again in full: "
                           "Resync folders, an action of the mailbox list)")
    fields = ["folder", "position_shown", "sweep", "resync", "last_sync", "problem"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_view_permission(self, request, obj=None):
        return request.user.has_perm("mailpoll.view_mailbox") or super().has_view_permission(request, obj)

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


def resync_folders_action(model_admin, request, queryset):
    """The mailbox list's *Resync folders*: a page to pick the folders of the selected mailboxes, then the
    resync of the ones picked (``resync_cursors``), recorded in each mailbox's history and the log."""
    cursors = FolderCursor.objects.filter(mailbox__in=queryset).select_related("mailbox").order_by(
        "mailbox__name", "mailbox_id", "folder")
    if "apply" not in request.POST:
        columns = CursorColumns()
        rows = [(row, columns.position_shown(row), columns.resync(row), columns.last_sync(row)) for row in cursors]
        return TemplateResponse(request, "admin/mailpoll/mailbox/resync_folders.html", {
            **model_admin.admin_site.each_context(request), "title": "Resync folders", "rows": rows,
            "opts": model_admin.model._meta, "mailboxes": list(queryset.values_list("pk", flat=True)),
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        })
    picked = [value for value in request.POST.getlist("cursor") if value.isdigit()]
    # Only cursors of the selected (org-scoped) mailboxes: another org's id, forged into the form, is not among them.
    ids = list(cursors.filter(pk__in=picked).values_list("pk", flat=True))
    reason = f"Resync folders, asked by {request.user.get_username()} in the admin"
    done, skipped = resync_cursors(ids, reason=reason)
    for row in done:
        kind = "API cursor dropped" if row.position else f"IMAP cursor (uidvalidity {row.uidvalidity}) expired"
        logger.info("mailbox=%s folder=%s resync asked by user=%s: %s", row.mailbox_id, row.folder,
                    request.user.pk, kind)
        model_admin.log_change(request, row.mailbox,
                               f"Resync folder {row.folder}: {kind}; the next poll reads it again in full.")
    report(model_admin, request, f"{counted(len(done), 'folder', 'folders')} will be read again in full at the "
           "next poll of their mailbox (dedup absorbs what was stored before)", len(skipped) + len(picked) - len(ids),
           "; ".join(sorted({*skipped.values(), *(["not a folder of the selected mailboxes"]
                                                   if len(picked) > len(ids) else [])})))
    return None
