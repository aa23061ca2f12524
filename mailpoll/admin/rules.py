"""Mail rules in the admin: edited per org, checked on save, previewed against the org's last requests.

The form refuses what could not run as written (a pattern RE2 refuses, a route
without a target) and anything of another org (a target or a mailbox: the
choices are scoped to the user's orgs, and a user of two orgs could still pick
across them). *Preview* posts the unsaved form to ``…/preview/``: the same
validation, then what the rule would have done to the documents of the org's
last ``PREVIEW_REQUESTS`` requests, through the same ``Router`` intake uses.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.urls import path

from seoinsight.models import SiteTarget
from seoinsight.orgscope import OrgScopedAdmin, reachable_orgs, scope_queryset

from .. import post_actions
from ..models import Attachment, Mailbox, MailRule, Request, RequestStatus, RuleAction, RuleKind
from ..routing.decide import Document, matches
from ..routing.patterns import BadPattern, compile_subject_pattern
from ..routing.router import Router, org_rules, rule_of
from .display import AMBER, EMPTY, GREEN, GREY, badge

PREVIEW_REQUESTS = 500
ACTION_COLOURS = {RuleAction.ROUTE: GREEN, RuleAction.IGNORE: GREY, RuleAction.TRIAGE: AMBER}
# The fields a request's "Make a rule from this" may prefill (the admin's add view reads them from the URL).
PREFILL = ("org", "name", "sender", "subject_contains", "filename", "mailboxes", "folder", "recipient")


class MailRuleForm(forms.ModelForm):
    kinds = forms.MultipleChoiceField(choices=RuleKind.choices, required=False,
                                      widget=forms.CheckboxSelectMultiple, help_text="None ticked: any kind.")

    class Meta:
        model = MailRule
        fields = ["org", "name", "position", "enabled", "mailboxes", "folder", "sender", "recipient", "plus_tag",
                  "subject_contains", "subject_regex", "filename", "kinds", "sender_auth", "action", "site_target",
                  "post_action", "post_action_folder"]

    def clean_subject_regex(self):
        pattern = self.cleaned_data["subject_regex"]
        if pattern:
            try:
                compile_subject_pattern(pattern)
            except BadPattern as exc:
                raise forms.ValidationError(str(exc)) from None
        return pattern

    def clean_plus_tag(self):
        return self.cleaned_data["plus_tag"].strip().lower()

    def clean(self):
        cleaned = super().clean()
        org, target, action = cleaned.get("org"), cleaned.get("site_target"), cleaned.get("action")
        if action == RuleAction.ROUTE and target is None:
            self.add_error("site_target", "A rule that routes needs the site target to route to.")
        if action and action != RuleAction.ROUTE and target is not None:
            self.add_error("site_target", "Only a rule that routes names a site target: clear it.")
        if org is not None:
            if target is not None and target.site.org_id != org.pk:
                self.add_error("site_target", "This site target belongs to another org.")
            foreign = [m.name for m in cleaned.get("mailboxes") or () if m.org_id != org.pk]
            if foreign:
                self.add_error("mailboxes", f"Of another org: {', '.join(foreign)}.")
            self._clean_post_action(cleaned, org)
        return cleaned

    def _clean_post_action(self, cleaned, org) -> None:
        """Checked against every mailbox the rule may apply to: those named, else all of the org's."""
        cleaned["post_action_folder"] = cleaned.get("post_action_folder", "").strip()
        mailboxes = list(cleaned.get("mailboxes") or ()) or list(Mailbox.objects.filter(org=org))
        field, problem = post_actions.setting_problem(
            cleaned.get("post_action", ""), cleaned["post_action_folder"], {m.provider for m in mailboxes},
            {folder for m in mailboxes for folder in m.folder_list})
        if problem:
            self.add_error(field, problem)


@admin.register(MailRule)
class MailRuleAdmin(OrgScopedAdmin, admin.ModelAdmin):
    form = MailRuleForm
    list_display = ["name", "org", "position", "enabled", "conditions", "action_badge", "site_target"]
    list_display_links = ["name"]
    list_editable = ["position", "enabled"]
    list_filter = ["org", "enabled", "action"]
    list_select_related = ["org", "site_target__site"]
    search_fields = ["name", "sender", "recipient", "plus_tag", "subject_contains", "filename"]
    ordering = ["org", "position", "id"]
    filter_horizontal = ["mailboxes"]
    change_form_template = "admin/mailpoll/mailrule/change_form.html"
    fieldsets = [
        (None, {"fields": ["org", "name", "position", "enabled"]}),
        ("When (every condition given must hold)", {"fields": [
            "mailboxes", "folder", "sender", "recipient", "plus_tag", "subject_contains", "subject_regex",
            "filename", "kinds"]}),
        ("Then", {"fields": ["sender_auth", "action", "site_target"]}),
        ("After storing", {"fields": ["post_action", "post_action_folder"],
                           "description": "What the source mailbox's server is asked to do to the message once its "
                           "documents are stored; the first document a rule decides settles it."}),
    ]

    def get_urls(self):
        preview = self.admin_site.admin_view(self.preview_view)
        return [
            path("add/preview/", preview, name="mailpoll_mailrule_preview_add"),
            path("<path:object_id>/change/preview/", preview, name="mailpoll_mailrule_preview"),
            *super().get_urls(),
        ]

    def get_changeform_initial_data(self, request):
        initial = super().get_changeform_initial_data(request)
        return {key: value for key, value in initial.items() if key in PREFILL}

    @admin.display(description="when")
    def conditions(self, rule):
        said = [f"{label} {value}" for label, value in [
            ("from", rule.sender), ("to", rule.recipient), ("tag", rule.plus_tag), ("folder", rule.folder),
            ("subject has", rule.subject_contains), ("subject ~", rule.subject_regex), ("file", rule.filename),
            ("kind", ", ".join(rule.kinds or ())),
        ] if value]
        return "; ".join(said) or "any mail"

    @admin.display(description="then", ordering="action")
    def action_badge(self, rule):
        return badge(ACTION_COLOURS.get(rule.action, GREY), rule.get_action_display())

    def preview_view(self, request, object_id=None):
        """The unsaved form, validated, and what it would have done to the org's last requests."""
        if request.method != "POST":
            raise PermissionDenied
        rule = self.get_object(request, object_id) if object_id else None  # another org's: a 404
        if not (self.has_change_permission(request, rule) if rule else self.has_add_permission(request)):
            raise PermissionDenied
        form = self.get_form(request, rule)(request.POST, instance=rule)
        rows, total = [], 0
        if form.is_valid():
            candidate = form.save(commit=False)
            rows, total = preview(candidate, [m.pk for m in form.cleaned_data["mailboxes"]], request)
        return TemplateResponse(request, "admin/mailpoll/mailrule/preview.html", {
            **self.admin_site.each_context(request), "title": "Preview of a mail rule", "opts": self.opts,
            "form": form, "rows": rows, "requests": total, "limit": PREVIEW_REQUESTS, "original": rule,
        })


def preview(candidate: MailRule, mailbox_ids: list[int], http_request) -> tuple[list[dict], int]:
    """(one row per document of the org's last requests that ``candidate`` matches, how many requests were read).

    Each row says what the org's rules, the candidate among them at its position, would have done with it:
    the candidate's action, or an earlier rule's when one decides first.
    """
    rule = rule_of(candidate, mailbox_ids)
    ordered = org_rules(candidate.org_id, (candidate, mailbox_ids))
    requests = list(scope_queryset(Request.objects.filter(org_id=candidate.org_id, status=RequestStatus.ACCEPTED),
                                   reachable_orgs(http_request))
                    .select_related("mailbox").order_by("-created_at")[:PREVIEW_REQUESTS])
    documents: dict[int, list[Attachment]] = {}
    for document in Attachment.objects.filter(request__in=[r.pk for r in requests]).exclude(
            document_type="").order_by("pk"):
        documents.setdefault(document.request_id, []).append(document)
    targets = {t.pk: str(t) for t in SiteTarget.objects.filter(site__org_id=candidate.org_id)}
    routers, rows = {}, []
    for request in requests:
        if request.mailbox is None:
            continue
        router = routers.setdefault(request.mailbox_id, Router(request.mailbox, ordered))
        envelope = router.envelope(folder=request.folder, sender=request.sender, recipients=request.recipients,
                                   subject=request.subject, auth_results=request.auth_results)
        for document in documents.get(request.pk, ()):
            name = document.original_filename or document.filename
            if not matches(rule, envelope, Document(name, document.document_type)):
                continue
            decision = router.decide(envelope, name, document.document_type)
            rows.append({"request": request, "document": document, "action": decision.action,
                         "target": targets.get(decision.target_id, EMPTY), "reason": decision.reason,
                         "earlier_rule": decision.rule_name if decision.rule_id != rule.id else ""})
    return rows, len(requests)
