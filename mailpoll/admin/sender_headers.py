"""Whether a mailbox's receiving server writes the Authentication-Results header its authserv-id names.

Sender authentication trusts only that header (``message.sender_auth``); a server that writes none leaves the
field to whoever sends: a sender can write one in its name. The mailbox's page says so, from what its last
messages carried.
"""

from __future__ import annotations

from django.utils.html import format_html

from .display import GREEN, GREY, RED
from ..message.sender_auth import EXCHANGE_ONLINE, carries_own_header
from ..models import Request

LOOKED_AT = 20  # the mailbox's latest messages looked at


def state(mailbox) -> tuple[str, str]:
    """(colour, text) of what the last messages say about the mailbox's authserv-id; RED is the warning."""
    cached = getattr(mailbox, "_sender_headers_state", None)
    if cached is None:
        cached = mailbox._sender_headers_state = _state(mailbox)
    return cached


def _state(mailbox) -> tuple[str, str]:
    authserv_id = mailbox.authserv_id.strip()
    if not authserv_id:
        return GREY, "no authserv-id: no sender is ever authenticated"
    seen = list(Request.objects.filter(mailbox=mailbox).order_by("-created_at")
                .values_list("auth_results", flat=True)[:LOOKED_AT])
    if not seen:
        return GREY, "no message yet to look at"
    carried = sum(1 for headers in seen if carries_own_header(headers or [], authserv_id))
    who = "Exchange Online" if authserv_id.lower() == EXCHANGE_ONLINE else authserv_id
    if not carried:
        return RED, (f"None of the last {len(seen)} messages carried an Authentication-Results header from {who}: "
                     "the receiving server may not write one (or the authserv-id is wrong), and then any sender "
                     "can write one in its name. Check the server (docs/mail.md, Sender authentication).")
    return GREEN, f"{carried} of the last {len(seen)} messages carried one from {who}"


def warns(mailbox) -> bool:
    return state(mailbox)[0] == RED


def shown(mailbox):
    colour, text = state(mailbox)
    return format_html('<span style="color:{}">{}</span>', colour, text)
