"""The mail admin's list filters: mailbox health, token state, stuck attachments, their imports, document type."""

from __future__ import annotations

from django.contrib import admin

from imports.models import ImportOutcome, ImportStatus

from .. import conf
from .display import TOKEN_ACTIVE, TOKEN_NEEDS_REAUTH, TOKEN_NOT_CONNECTED, duration_label
from ..health import FAILING, FILTERS, HEALTHY, NEVER
from ..models import Auth, GrantState


class HealthFilter(admin.SimpleListFilter):
    """``mailpoll.health``'s rules as a filter (a disabled mailbox has no health to filter by)."""

    title = "health"
    parameter_name = "health"

    def lookups(self, request, model_admin):
        return [(FAILING, "failing"), (HEALTHY, "healthy"), (NEVER, "never polled")]

    def queryset(self, request, queryset):
        return queryset.filter(FILTERS[self.value()]) if self.value() in (FAILING, HEALTHY, NEVER) else queryset


class StuckFilter(admin.SimpleListFilter):
    """The watchdog's rule: processing for longer than MAILPOLL_STUCK_AFTER (its worker probably died)."""

    title = "stuck"
    parameter_name = "stuck"

    def lookups(self, request, model_admin):
        return [("yes", f"processing over {duration_label(conf.get('MAILPOLL_STUCK_AFTER'))}")]

    def queryset(self, request, queryset):
        return queryset.stuck(conf.get("MAILPOLL_STUCK_AFTER")) if self.value() == "yes" else queryset


class ImportOutcomeFilter(admin.SimpleListFilter):
    """What became of the Import a CSV or Excel attachment was handed to (the attachment itself is done)."""

    title = "import"
    parameter_name = "import"

    def lookups(self, request, model_admin):
        return [(ImportStatus.FAILED, "import failed"), (ImportOutcome.NOTHING_IMPORTED, "nothing imported"),
                (ImportOutcome.MOSTLY_SKIPPED, "mostly skipped"), (ImportStatus.DONE, "imported"),
                ("waiting", "import queued or running")]

    def queryset(self, request, queryset):
        if self.value() == "waiting":
            return queryset.filter(source_import__status__in=[ImportStatus.QUEUED, ImportStatus.RUNNING])
        if self.value() in (ImportOutcome.NOTHING_IMPORTED, ImportOutcome.MOSTLY_SKIPPED):
            return queryset.filter(source_import__status=ImportStatus.DONE, source_import__outcome=self.value())
        if self.value() == ImportStatus.DONE:
            # Imported: done, and not one of the outcomes listed above it.
            return queryset.filter(source_import__status=ImportStatus.DONE).exclude(
                source_import__outcome__in=(ImportOutcome.NOTHING_IMPORTED, ImportOutcome.MOSTLY_SKIPPED))
        if self.value() == ImportStatus.FAILED:
            return queryset.filter(source_import__status=self.value())
        return queryset


class DocumentTypeFilter(admin.SimpleListFilter):
    title = "type"
    parameter_name = "type"

    def lookups(self, request, model_admin):
        return [("pdf", "PDF"), ("xlsx", "Excel .xlsx"), ("xls", "Excel .xls"), ("csv", "CSV"),
                ("body", "message body"), ("none", "not a document")]

    def queryset(self, request, queryset):
        if not self.value():
            return queryset
        return queryset.filter(document_type="" if self.value() == "none" else self.value())



class TokenStateFilter(admin.SimpleListFilter):
    """User-consent mailboxes by their grant: the ones the poller skips until someone connects them."""

    title = "token"
    parameter_name = "token"

    def lookups(self, request, model_admin):
        return [(TOKEN_ACTIVE, "active"), (TOKEN_NEEDS_REAUTH, "needs re-authorization"),
                (TOKEN_NOT_CONNECTED, "not connected")]

    def queryset(self, request, queryset):
        oauth = queryset.filter(auth=Auth.OAUTH)
        if self.value() == TOKEN_ACTIVE:
            return oauth.filter(oauth_grant__state=GrantState.ACTIVE)
        if self.value() == TOKEN_NEEDS_REAUTH:
            return oauth.filter(oauth_grant__state=GrantState.NEEDS_REAUTH)
        if self.value() == TOKEN_NOT_CONNECTED:
            return oauth.filter(oauth_grant__isnull=True)
        return queryset
