"""What the mail admin pages show: badges, times at a glance, long texts, and the message after an action."""

from __future__ import annotations

from django.contrib import messages
from django.utils import timezone
from django.utils.html import format_html

from .models import AttachmentStatus, Mailbox

EMPTY = "—"

GREEN, RED, GREY, BLUE, AMBER = "#2e7d32", "#c62828", "#6c757d", "#1f6fb2", "#b26a00"
ATTACHMENT_COLOURS = {
    AttachmentStatus.PENDING: GREY,
    AttachmentStatus.PROCESSING: BLUE,
    AttachmentStatus.DONE: GREEN,
    AttachmentStatus.FAILED: RED,
    AttachmentStatus.SKIPPED: AMBER,
}



def badge(colour: str, text: str, title: str = ""):
    return format_html(
        '<span title="{}" style="background:{};color:#fff;padding:1px 7px;border-radius:8px;white-space:nowrap">'
        "{}</span>", title, colour, text,
    )


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


def next_try(mailbox: Mailbox):
    """When a poller takes the mailbox next: at its next cycle, after its interval, or after its backoff."""
    if not mailbox.enabled:
        return EMPTY
    due = mailbox.last_polled_at and mailbox.last_polled_at + mailbox.poll_interval
    backing_off = bool(due and mailbox.next_attempt_at and mailbox.next_attempt_at > due)
    if backing_off:
        due = mailbox.next_attempt_at
    seconds = int((due - timezone.now()).total_seconds()) if due else 0
    if seconds <= 0:
        label = "next cycle"
    elif seconds < 60:
        label = f"in {seconds} s"
    elif seconds < 3600:
        label = f"in {seconds // 60} min"
    else:
        label = f"in {seconds / 3600:.1f} h"
    if backing_off:
        label += f" (backing off after {counted(mailbox.consecutive_failures, 'failure', 'failures')})"
    exact = timezone.localtime(due).strftime("%Y-%m-%d %H:%M:%S %Z") if due else "due now"
    return format_html('<span title="{}">{}</span>', exact, label)


def duration_label(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


def counted(n: int, singular: str, plural: str) -> str:
    return f"{n} {singular if n == 1 else plural}"


def preformatted(text: str, limit: int = 20_000):
    if not text:
        return EMPTY
    cut = f"\n… ({len(text):,} characters in all)" if len(text) > limit else ""
    return format_html('<pre style="white-space:pre-wrap">{}{}</pre>', text[:limit], cut)


def report(model_admin, request, done: str, skipped: int, why: str) -> None:
    """Say what changed and what the guarded transition left alone."""
    if skipped:
        model_admin.message_user(request, f"{done}; {skipped} skipped ({why})", messages.WARNING)
    else:
        model_admin.message_user(request, done, messages.SUCCESS)
