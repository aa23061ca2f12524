"""The triage queue in the admin: documents that wait for a site (``needs_route``), routed or ignored by a person.

*Route to…* asks for a site target of the documents' org (one org at a time:
a target of one org is never offered for another's documents), then moves
them through ``attachments.route``: guarded and locked, so two operators
routing the same document import it once. *Make a rule from this* opens a new
mail rule prefilled from the document's message.
"""

from __future__ import annotations

import logging
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.admin import helpers
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from seoinsight import waiting
from seoinsight.models import SiteTarget

from .. import attachments
from ..models import Attachment, AttachmentStatus
from .display import counted, report, scoped_count

log = logging.getLogger(__name__)


waiting.register(
    "documents waiting for a site",
    lambda: reverse("admin:mailpoll_attachment_changelist") + f"?status__exact={AttachmentStatus.NEEDS_ROUTE}",
    lambda request: scoped_count(request, Attachment, status=AttachmentStatus.NEEDS_ROUTE))


def route_to_action(model_admin, request, queryset):
    """Pick a site target for the selected documents waiting for one, then route them."""
    waiting = queryset.filter(status=AttachmentStatus.NEEDS_ROUTE)
    orgs = sorted(set(waiting.values_list("request__org_id", flat=True)))
    if len(orgs) != 1:
        model_admin.message_user(request, "Select documents that wait for a site, all of one org: a site target "
                                 "belongs to one org." if orgs else "None of the selected documents waits for a "
                                 "site.", messages.WARNING)
        return None
    targets = SiteTarget.objects.filter(site__org_id=orgs[0]).select_related("site").order_by("site__domain", "pk")
    if "apply" not in request.POST:
        return TemplateResponse(request, "admin/mailpoll/attachment/route_to.html", {
            **model_admin.admin_site.each_context(request), "title": "Route to a site target",
            "opts": model_admin.model._meta, "documents": waiting.select_related("request"), "targets": targets,
            "selected": list(queryset.values_list("pk", flat=True)),
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        })
    chosen = request.POST.get("target", "")
    # A target of this org only: another's id, forged into the form, is not among them.
    target = targets.filter(pk=chosen).first() if chosen.isdigit() else None
    if target is None:
        model_admin.message_user(request, "Pick one of the org's site targets.", messages.ERROR)
        return None
    # Counted before routing: from the index the list is filtered on "waits for a site", so once routed the
    # documents leave the queryset and a count taken after would say "-1 skipped".
    selected = queryset.count()
    ids = list(waiting.values_list("pk", flat=True))
    who = request.user.get_username()
    routed = attachments.route(ids, target, by=f"{who} in the admin")
    report(model_admin, request, f"{counted(len(routed), 'document', 'documents')} routed to {target} and queued",
           selected - len(routed), "only documents that wait for a site can be routed (another operator may "
           "have routed them first)")
    return None


def ignore_action(model_admin, request, queryset):
    ids = list(queryset.values_list("pk", flat=True))
    ignored = attachments.ignore(ids, by=f"{request.user.get_username()} in the admin")
    report(model_admin, request, f"{counted(len(ignored), 'document', 'documents')} ignored (not imported)",
           len(ids) - len(ignored), "only documents that wait for a site can be ignored")


def make_rule_link(attachment) -> str:
    """A link to a new mail rule prefilled from this document's message: sender, subject, mailbox, file kind."""
    request = attachment.request
    values = {"org": request.org_id, "name": f"From {request.sender}"[:100] if request.sender else "New rule",
              "sender": request.sender, "subject_contains": request.subject[:200]}
    if request.mailbox_id:
        values["mailboxes"] = request.mailbox_id
    url = reverse("admin:mailpoll_mailrule_add") + "?" + urlencode({k: v for k, v in values.items() if v})
    return format_html('<a class="button" href="{}">Make a rule from this</a>', url)
