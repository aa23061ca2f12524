"""The rules of one mailbox's org, read once per stored batch, deciding for each document.

``Router`` turns MailRule rows and a mailbox into the plain values of
``decide`` and judges each message's sender against the mailbox's
authserv-id. Intake (``mailpoll.sync.store``) and a rule's preview use it
alike, so the preview shows exactly what intake would do.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..message.sender_auth import judge
from seoinsight.models import Site

from ..models import MailRule
from .decide import AfterStore, Decision, Document, Envelope, Fallback, Rule, after_store, decide


def rule_of(row: MailRule, mailbox_ids: Iterable[int]) -> Rule:
    return Rule(
        id=row.pk, name=row.name, action=row.action, target_id=row.site_target_id, sender_auth=row.sender_auth,
        mailbox_ids=frozenset(mailbox_ids), folder=row.folder, sender=row.sender, recipient=row.recipient,
        plus_tag=row.plus_tag, subject_contains=row.subject_contains, subject_regex=row.subject_regex,
        filename=row.filename, kinds=frozenset(row.kinds or ()), post_action=row.post_action,
        post_action_folder=row.post_action_folder,
    )


def tag_targets(org_id: str) -> dict[str, tuple[int, str]]:
    """The org's site slugs that route mail, if the org lets a plus tag name a site: slug -> (target, site)."""
    # One statement per batch: the org's switch is a condition of the same query.
    sites = Site.objects.filter(org_id=org_id, org__plus_tag_routes_to_site=True,
                                default_target__isnull=False).exclude(slug="")
    return {site.slug.lower(): (site.default_target_id, site.domain) for site in sites}


def org_rules(org_id: str, candidate: tuple[MailRule, Iterable[int]] | None = None) -> list[Rule]:
    """The org's enabled rules in the order they are tried: by position, then by age.

    ``candidate`` is a rule as typed in a form and its mailbox ids (a rule's preview): it takes the
    place of its saved self, at its position, after the rules of that position if it is new.
    """
    rows = MailRule.objects.filter(org_id=org_id, enabled=True).prefetch_related("mailboxes")
    if candidate is not None and candidate[0].pk is not None:
        rows = rows.exclude(pk=candidate[0].pk)
    ranked = [((row.position, row.pk), rule_of(row, (m.pk for m in row.mailboxes.all()))) for row in rows]
    if candidate is not None:
        row, mailbox_ids = candidate
        ranked.append(((row.position, row.pk if row.pk is not None else math.inf), rule_of(row, mailbox_ids)))
    return [rule for _, rule in sorted(ranked, key=lambda item: item[0])]


class Router:
    """Decides for the documents of one mailbox's messages."""

    def __init__(self, mailbox, rules: list[Rule], tags: dict[str, tuple[int, str]] | None = None):
        self.mailbox = mailbox
        self.rules = rules
        self.fallback = Fallback(target_id=mailbox.site_target_id, require_auth=mailbox.require_authenticated_sender,
                                 tag_targets=tags or {}, post_action=mailbox.post_action,
                                 post_action_folder=mailbox.post_action_folder)

    @classmethod
    def for_mailbox(cls, mailbox) -> Router:
        return cls(mailbox, org_rules(mailbox.org_id), tag_targets(mailbox.org_id))

    def envelope(self, *, folder: str, sender: str, recipients: Iterable[str], subject: str,
                 auth_results: Iterable[str]) -> Envelope:
        verdict = judge(list(auth_results), self.mailbox.authserv_id, sender)
        return Envelope(mailbox_id=self.mailbox.pk, folder=folder, sender=sender.lower(),
                        recipients=tuple(r.lower() for r in recipients), subject=subject,
                        authenticated=verdict.authenticated, auth_reason=verdict.reason)

    def decide(self, envelope: Envelope, filename: str, document_type: str) -> Decision:
        return decide(self.rules, envelope, Document(filename=filename, document_type=document_type), self.fallback)

    def after_store(self, decisions: list[Decision]) -> AfterStore | None:
        return after_store(self.rules, decisions, self.fallback)
