"""*Test connection*: a button on a mailbox's page and an action of the mailbox list (``sync.connection_check``).

Both need the right to change the mailbox (the test uses its secrets and tokens, and reaches out to its
server) and see only the user's orgs' mailboxes: the button's mailbox through the admin's org-scoped
``get_object`` (another org's is a 404), the action's through the list's queryset. The button is a POST
(CSRF), so no link or image on another site can make the server connect somewhere in an editor's name.
The results page shows each mailbox's headline, the details folded under it. Nothing about the mailbox
changes, its health included: the test is not a poll.
"""

from __future__ import annotations

from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseNotAllowed
from django.template.response import TemplateResponse

from .display import counted
from ..sync.connection_check import DEADLINE, check

# Mailboxes one action tests, one after the other, each within DEADLINE: the page waits for them all.
MOST_AT_ONCE = 5


def connection_test_view(model_admin, request, object_id):
    """The change page's button: test this one mailbox."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    mailbox = model_admin.get_object(request, unquote(object_id))
    if not model_admin.has_change_permission(request, mailbox):
        raise PermissionDenied
    return _results(model_admin, request, [mailbox], note="")


def connection_test_action(model_admin, request, queryset):
    """The list's action: test the selected mailboxes (the first ``MOST_AT_ONCE`` by name)."""
    mailboxes = list(queryset.order_by("name", "pk")[: MOST_AT_ONCE + 1])
    note = ""
    if len(mailboxes) > MOST_AT_ONCE:
        mailboxes = mailboxes[:MOST_AT_ONCE]
        note = (f"Only the first {counted(MOST_AT_ONCE, 'mailbox', 'mailboxes')} by name were tested: select fewer "
                "to test the others.")
    return _results(model_admin, request, mailboxes, note=note)


def _results(model_admin, request, mailboxes, *, note: str):
    results = [(mailbox, check(mailbox)) for mailbox in mailboxes]
    return TemplateResponse(request, "admin/mailpoll/mailbox/test_connection.html", {
        **model_admin.admin_site.each_context(request), "title": "Test connection", "opts": model_admin.model._meta,
        "results": results, "note": note, "deadline": DEADLINE,
    })
