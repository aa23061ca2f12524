"""What the mail admin pages show: badges, times at a glance, long texts, token states, and the message after
an action."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import BooleanField, DateTimeField
from django.db.models.expressions import RawSQL
from django.template.defaultfilters import truncatechars
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from imports.models import Import, ImportOutcome, ImportStatus
from imports.outcomes import SHOWN_LABELS, outcome_reason, shown_status
from seoinsight.auth import org_link

from ..models import Auth, AttachmentStatus, FolderCursor, GrantState, LiveWatch, Mailbox, OAuthGrant, Provider
from ..oauth.rules import CLIFFS, cliff_warning
from ..providers.diagnosis import split_recorded
from ..sync import sql

EMPTY = "—"

GREEN, RED, GREY, BLUE, AMBER = "#2e7d32", "#c62828", "#6c757d", "#1f6fb2", "#b26a00"
ATTACHMENT_COLOURS = {
    AttachmentStatus.PENDING: GREY,
    AttachmentStatus.PROCESSING: BLUE,
    AttachmentStatus.HELD: AMBER,
    AttachmentStatus.DONE: GREEN,
    AttachmentStatus.FAILED: RED,
    AttachmentStatus.SKIPPED: AMBER,
    AttachmentStatus.NEEDS_ROUTE: BLUE,
}

# A mailed document's import, as the attachment list shows it (any other status: AMBER); a done import that
# brought in little or nothing shows that instead of Done (imports.outcomes.shown_status).
IMPORT_COLOURS = {ImportStatus.QUEUED: GREY, ImportStatus.RUNNING: BLUE, ImportStatus.DONE: GREEN,
                  ImportStatus.FAILED: RED, ImportOutcome.NOTHING_IMPORTED: RED, ImportOutcome.MOSTLY_SKIPPED: AMBER}

# A mailbox's token state: what decides whether the poller takes it at all (mailpoll.sql's claim).
TOKEN_ACTIVE, TOKEN_NEEDS_REAUTH, TOKEN_NOT_CONNECTED, TOKEN_SERVICE, TOKEN_NONE = (
    "active", "needs_reauth", "not_connected", "service", "none")
TOKEN_LABELS = {TOKEN_ACTIVE: "Active", TOKEN_NEEDS_REAUTH: "Needs re-authorization",
                TOKEN_NOT_CONNECTED: "Not connected", TOKEN_SERVICE: "Service account / app-only",
                TOKEN_NONE: "Password"}
TOKEN_COLOURS = {TOKEN_ACTIVE: GREEN, TOKEN_NEEDS_REAUTH: RED, TOKEN_NOT_CONNECTED: AMBER}

# How much of an API cursor the page shows: enough to see it move, not a wall of base64.
POSITION_SHOWN = 24


def badge(colour: str, text: str, title: str = ""):
    return format_html(
        '<span title="{}" style="background:{};color:#fff;padding:1px 7px;border-radius:8px;white-space:nowrap">'
        "{}</span>", title, colour, text,
    )


def import_badge(imp: Import):
    """The import's status as a badge, its error on hover, linked to its page on the Imports pages."""
    url = org_link(reverse("imports:detail", args=[imp.pk]), imp.org_id)  # works whichever org the user is in
    status = shown_status(imp.status, imp.outcome)
    why = imp.error or outcome_reason(status, read=imp.read, skipped=imp.skipped, errors=imp.errors,
                                      skipped_reasons={})
    shown = badge(IMPORT_COLOURS.get(status, AMBER), f"Import {SHOWN_LABELS[status].lower()}", why)
    return format_html('<a href="{}" title="{}">{}</a>', url, f"import {imp.pk} on the Imports pages", shown)


def ago(moment, now=None) -> str:
    """One unit, for a glance: 'just now', '45 s ago', '2 min ago', '5 h ago', '3 d ago'."""
    seconds = int(((now or timezone.now()) - moment).total_seconds())
    if seconds < 5:
        return "just now"  # also a little clock skew between the database and this process
    if seconds < 60:
        return f"{seconds} s ago"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    if seconds < 2 * 86400:
        return f"{seconds // 3600} h ago"
    return f"{seconds // 86400} d ago"


def when(moment):
    """'2 min ago', with the exact time on hover."""
    if moment is None:
        return EMPTY
    return format_html('<span title="{}">{}</span>', timezone.localtime(moment).strftime("%Y-%m-%d %H:%M:%S %Z"),
                       ago(moment))


def with_next_try(queryset):
    """``queryset`` with the claim's own rules as columns (``mailpoll.sync.sql``): what ``next_try`` shows."""
    return queryset.annotate(
        claim_pollable=RawSQL(sql.POLLABLE, (), output_field=BooleanField()),
        claim_due_now=RawSQL(sql.DUE_NOW, (), output_field=BooleanField()),
        claim_due_at=RawSQL(sql.DUE_AT, (), output_field=DateTimeField()),
        claim_backing_off=RawSQL(sql.BACKING_OFF, (), output_field=BooleanField()),
    )


def next_try(mailbox: Mailbox):
    """When a poller takes the mailbox next: at its next cycle, after its interval, or after its backoff.

    Read from ``with_next_try``'s columns, the claim's WHERE evaluated by the database on its clock: the screen
    says "next cycle" exactly when the claim would take the mailbox.
    """
    if not mailbox.enabled:
        return EMPTY
    if not hasattr(mailbox, "claim_due_now"):
        mailbox = with_next_try(Mailbox.objects.filter(pk=mailbox.pk)).get()
    if not mailbox.claim_pollable:
        return "not until connected"  # the claim skips it
    if mailbox.claim_due_now:
        return format_html('<span title="{}">{}</span>', "due now", "next cycle")
    due = mailbox.claim_due_at
    seconds = max(1, int((due - timezone.now()).total_seconds()))
    if seconds < 60:
        label = f"in {seconds} s"
    elif seconds < 3600:
        label = f"in {seconds // 60} min"
    else:
        label = f"in {seconds / 3600:.1f} h"
    if mailbox.claim_backing_off:
        label += f" (backing off after {counted(mailbox.consecutive_failures, 'failure', 'failures')})"
    return format_html('<span title="{}">{}</span>', timezone.localtime(due).strftime("%Y-%m-%d %H:%M:%S %Z"), label)


def duration_label(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


def scoped_count(request, model, **lookups) -> int | None:
    """How many rows of ``model`` matching ``lookups`` the user's orgs have, as its admin's scoped list counts
    them; None for a user who may not view that list (the index's "Waiting for you" counts)."""
    model_admin = admin.site._registry[model]
    if not model_admin.has_view_permission(request):
        return None
    return model_admin.get_queryset(request).filter(**lookups).count()


def counted(n: int, singular: str, plural: str) -> str:
    return f"{n} {singular if n == 1 else plural}"


def preformatted(text: str, limit: int = 20_000):
    if not text:
        return EMPTY
    cut = f"\n… ({len(text):,} characters in all)" if len(text) > limit else ""
    return format_html('<pre style="white-space:pre-wrap">{}{}</pre>', text[:limit], cut)


def recorded_error(last_error: str):
    """A mailbox's last error as recorded (``diagnosis.recorded``): its headline, the raw text under details."""
    shown, raw = split_recorded(last_error)
    if not raw:
        return preformatted(shown)
    return format_html("{}<details><summary>details</summary>{}</details>", preformatted(shown), preformatted(raw))


def report(model_admin, request, done: str, skipped: int, why: str) -> None:
    """Say what changed and what the guarded transition left alone."""
    if skipped:
        model_admin.message_user(request, f"{done}; {skipped} skipped ({why})", messages.WARNING)
    else:
        model_admin.message_user(request, done, messages.SUCCESS)


def token_state(auth: str, grant: OAuthGrant | None) -> str:
    """One of the TOKEN_* states: user-consent mailboxes by their grant, the others by their kind of auth.

    >>> token_state("oauth", None), token_state("password", None), token_state("service", None)
    ('not_connected', 'none', 'service')
    """
    if auth == Auth.PASSWORD:
        return TOKEN_NONE
    if auth == Auth.SERVICE:
        return TOKEN_SERVICE
    if grant is None:
        return TOKEN_NOT_CONNECTED
    return TOKEN_NEEDS_REAUTH if grant.state == GrantState.NEEDS_REAUTH else TOKEN_ACTIVE


def grant_of(mailbox: Mailbox) -> OAuthGrant | None:
    try:
        return mailbox.oauth_grant
    except OAuthGrant.DoesNotExist:
        return None


def token_badge(mailbox: Mailbox, *, detail: bool = False):
    """The token state as a badge; with ``detail``, the provider's reason and when, or since when it is active."""
    grant = grant_of(mailbox)
    state = token_state(mailbox.auth, grant)
    if state == TOKEN_NONE:
        return EMPTY
    reason = grant.failure_reason if state == TOKEN_NEEDS_REAUTH else ""
    shown = badge(TOKEN_COLOURS.get(state, GREY), TOKEN_LABELS[state], reason)
    if not detail:
        return shown
    if state == TOKEN_NEEDS_REAUTH:
        return format_html("{} {} <small>({})</small><br>Not polled until someone reconnects it with Connect.",
                           shown, grant.failure_reason, when(grant.failed_at))
    if state == TOKEN_NOT_CONNECTED:
        return format_html("{} Not polled until someone connects it with Connect.", shown)
    if state == TOKEN_ACTIVE:
        refreshed = format_html(", last refreshed {}", when(grant.last_refreshed_at)) if grant.last_refreshed_at else ""
        failed = (format_html('<br><span style="color:{}">last refresh failed {}: {}</span>', AMBER,
                              when(grant.failed_at), grant.failure_reason) if grant.failure_reason else "")
        return format_html("{} <small>connected {}{}</small>{}", shown, when(grant.authorized_at), refreshed, failed)
    return shown


# Google's testing-app limit, read from the rules rather than restated.
TESTING_APP_LIFETIME = next(c.lifetime for c in CLIFFS if c.testing_apps_only)


def cliff_text(grant: OAuthGrant | None, now=None) -> str:
    """The warning ahead of the active grant's nearest known cliff (``oauth.rules.cliff_warning``), or "".

    Whether a Google app is in Testing status is not stored, so that cliff is shown as a condition, until a
    refresh after its deadline has proved the app is not a testing one.
    """
    if grant is None or grant.state != GrantState.ACTIVE:
        return ""
    now = now or timezone.now()
    args = {"authorized_at": grant.authorized_at, "last_refreshed_at": grant.last_refreshed_at, "now": now}
    lines = []
    warning = cliff_warning(grant.provider, **args)
    if warning:
        lines.append(warning.message)
    testing = cliff_warning(grant.provider, testing_app=True, **args)
    outlived = grant.last_refreshed_at and grant.last_refreshed_at > grant.authorized_at + TESTING_APP_LIFETIME
    if testing and testing != warning and not outlived:
        lines.append(f"if the Google OAuth app's publishing status is Testing, {testing.message}")
    return "; ".join(lines)


def connect_button(mailbox: Mailbox):
    """Connect (or Reconnect) for a user-consent mailbox: the start of ``oauth.connect``'s flow."""
    if mailbox.auth != Auth.OAUTH:
        return "Service accounts and app-only access need no consent: nothing to connect."
    label = "Connect" if grant_of(mailbox) is None else "Reconnect"
    # Submits the page's separate "mailpoll-connect" form (a POST with its CSRF token; see the change form).
    return format_html('<button type="submit" class="button" form="mailpoll-connect">{}</button> <small>Opens {}\'s '
                       "consent screen; {} signs in there and allows read access to mail. Save your edits "
                       "first.</small>", label, mailbox.issuer.capitalize() or "the provider",
                       mailbox.username or "the account's user")


def live_state(mailbox: Mailbox, *, internal: bool = True):
    """A live mailbox's watcher (``mailpoll.live``): since when, its last event, and with ``internal`` which
    process (for superusers only: org staff are not shown the deployment's hosts and processes)."""
    if not mailbox.live:
        return EMPTY
    if mailbox.provider != Provider.IMAP:
        return badge(AMBER, "not watched", "Only IMAP mailboxes are live; this one is polled.")
    try:
        watch = mailbox.live_watch
    except LiveWatch.DoesNotExist:
        return badge(AMBER, "not watched yet", "Taken by a pollmail within MAILPOLL_LIVE_RECONCILE seconds.")
    event = format_html("; last event {} {}", watch.last_event, when(watch.last_event_at)) if watch.last_event else ""
    if internal:
        return format_html("watched by {}/{} since {}{}", watch.host, watch.pid, when(watch.since), event)
    return format_html("watched live since {}{}", when(watch.since), event)


def error_heading(last_error: str, consecutive_failures: int, last_success_at) -> str:
    """How the mailbox's ``last_error`` is to be read: "" while it is the current state (the mailbox is
    failing), else as a previous error: a success resets the failure count but keeps the last error's text.

    >>> from datetime import datetime, timezone as tz
    >>> error_heading("", 0, None), error_heading("refused", 3, None)
    ('', '')
    >>> error_heading("refused", 0, datetime(2026, 12, 3, 7, 0, tzinfo=tz.utc))
    'previous error (before the last success at 2026-12-03 07:00:00 UTC)'
    >>> error_heading("refused", 0, None)
    'previous error'
    """
    if not last_error or consecutive_failures:
        return ""
    if last_success_at is None:
        return "previous error"
    return f"previous error (before the last success at {timezone.localtime(last_success_at):%Y-%m-%d %H:%M:%S %Z})"


def cursor_position(cursor: FolderCursor):
    """IMAP: UIDVALIDITY and the last UID read; an API: its opaque position, shortened (whole on hover)."""
    if cursor.position:
        short = cursor.position if len(cursor.position) <= POSITION_SHOWN else f"{cursor.position[:POSITION_SHOWN]}…"
        return format_html('<code title="{}">{}</code>', cursor.position, short)
    if cursor.uidvalidity is None:
        return "not read yet"
    return f"uidvalidity {cursor.uidvalidity}, last uid {cursor.last_uid}"


def cursor_resyncs(cursor: FolderCursor):
    """Full re-reads after the provider forgot the cursor: how many, the last reason, and one unfinished."""
    if not cursor.resyncs and cursor.resync_started_at is None:
        return EMPTY
    running = (format_html('<span style="color:{}">resyncing since {}</span><br>', AMBER,
                           when(cursor.resync_started_at)) if cursor.resync_started_at else "")
    latest = format_html(", the latest {}", when(cursor.last_resync_at)) if cursor.last_resync_at and not running else ""
    reason = f": {truncatechars(cursor.resync_reason, 200)}" if cursor.resync_reason else ""
    return format_html("{}{}{}{}", running, counted(cursor.resyncs, "resync", "resyncs"), latest, reason)
