"""Which site a mailed document goes to: the mail rules' decision, a pure function.

An org's rules are tried in order; the first enabled rule whose every
condition holds decides. Without one, the mailbox's own site target is the
fallback. A document that nothing routes, or whose sender is not authenticated
where authentication is required, is held for triage (``needs_route``): it
waits for a person and is never imported on a guess.

Nothing here reads the database or the clock (the models give only the
vocabulary of actions, kinds and authentication): ``decide`` sees plain values
(``Envelope``, ``Document``, ``Rule``, ``Fallback``) and returns a
``Decision`` that the caller stores with the document, rule id and name copied
so history still reads right after the rule is edited or deleted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from ..message.headers import plus_tag
from ..models import RULE_AS_MAILBOX, RULE_LEAVE, RuleAction, RuleKind, SenderAuth
from .patterns import compile_subject_pattern

# The vocabulary is the models' (their CHECKs hold the rows to it); these are its short names here.
ROUTE, IGNORE, TRIAGE = RuleAction.ROUTE, RuleAction.IGNORE, RuleAction.TRIAGE

# What a rule's "kind" condition names, from a document's type.
KIND_OF_TYPE = {"csv": RuleKind.CSV, "xlsx": RuleKind.EXCEL, "xls": RuleKind.EXCEL, "pdf": RuleKind.PDF,
                "body": RuleKind.BODY}
IMPORTABLE_KINDS = frozenset({RuleKind.CSV, RuleKind.EXCEL})


@dataclass(frozen=True)
class Envelope:
    """What one message says about itself, as the mailbox that received it reads it."""

    mailbox_id: int | None
    folder: str
    sender: str  # the From address, lower case
    recipients: tuple[str, ...]  # To, Cc and Delivered-To addresses, lower case
    subject: str
    authenticated: bool  # by the mailbox's own receiving server (mailpoll.message.sender_auth)
    auth_reason: str  # why, or why not, in plain words


@dataclass(frozen=True)
class Document:
    filename: str
    document_type: str  # csv | xlsx | xls | pdf | body

    @property
    def kind(self) -> str:
        return KIND_OF_TYPE.get(self.document_type, self.document_type)


@dataclass(frozen=True)
class Rule:
    """One MailRule's conditions and action; an empty condition always holds."""

    id: int | None
    name: str
    action: str  # ROUTE | IGNORE | TRIAGE
    target_id: int | None = None  # with ROUTE
    sender_auth: str = SenderAuth.AS_MAILBOX
    mailbox_ids: frozenset[int] = frozenset()
    folder: str = ""
    sender: str = ""  # glob on the address, or (no "@") on its domain
    recipient: str = ""  # glob on any recipient address
    plus_tag: str = ""  # a recipient's +tag, exactly
    subject_contains: str = ""
    subject_regex: str = ""
    filename: str = ""  # glob on the attachment's name
    kinds: frozenset[str] = frozenset()  # csv, excel, pdf, body
    post_action: str = RULE_AS_MAILBOX  # after storing: the mailbox's, RULE_LEAVE, or a PostActionKind
    post_action_folder: str = ""


@dataclass(frozen=True)
class Fallback:
    """The mailbox's own say: its site target, and whether its senders must be authenticated."""

    target_id: int | None
    require_auth: bool = False
    # The org's "plus tag names a site": a tag (lower case) -> (the site's default target, the site's name).
    tag_targets: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    post_action: str = ""  # after storing, "" to leave the message as it is, or a PostActionKind
    post_action_folder: str = ""


@dataclass(frozen=True)
class Decision:
    action: str  # ROUTE | IGNORE | TRIAGE
    target_id: int | None = None
    rule_id: int | None = None
    rule_name: str = ""
    reason: str = ""


def decide(rules: Sequence[Rule], envelope: Envelope, document: Document, fallback: Fallback) -> Decision:
    """The decision for one document of one message. ``rules`` are the org's enabled rules, in order."""
    for rule in rules:
        if matches(rule, envelope, document):
            return _by_rule(rule, envelope, fallback)
    return _by_plus_tag(envelope, fallback) or _by_mailbox(envelope, document, fallback)


@dataclass(frozen=True)
class AfterStore:
    """What the source mailbox is asked to do to a stored message, and who said so."""

    action: str  # a PostActionKind
    destination: str
    decided_by: str  # "the mailbox", or "rule '<name>'"


def after_store(rules: Sequence[Rule], decisions: Sequence[Decision], fallback: Fallback) -> AfterStore | None:
    """The post-action of a message whose documents were decided so (in document order); None: leave it.

    The first document decided by a rule that names a post-action of its own settles it (RULE_LEAVE
    included); otherwise it is the mailbox's. ``rules``: those ``decide`` was given.
    """
    by_id = {rule.id: rule for rule in rules}
    for decision in decisions:
        rule = by_id.get(decision.rule_id)
        if rule is None or rule.post_action == RULE_AS_MAILBOX:
            continue
        if rule.post_action == RULE_LEAVE:
            return None
        return AfterStore(rule.post_action, rule.post_action_folder, f"rule '{rule.name}'")
    if not fallback.post_action:
        return None
    return AfterStore(fallback.post_action, fallback.post_action_folder, "the mailbox")


def matches(rule: Rule, envelope: Envelope, document: Document) -> bool:
    """Whether every condition of ``rule`` holds (AND); a rule without conditions matches everything."""
    if rule.mailbox_ids and envelope.mailbox_id not in rule.mailbox_ids:
        return False
    if rule.folder and rule.folder != envelope.folder:
        return False
    if rule.sender and not sender_matches(rule.sender, envelope.sender):
        return False
    if rule.recipient and not any(fnmatchcase(r, rule.recipient.lower()) for r in envelope.recipients):
        return False
    if rule.plus_tag and rule.plus_tag.lower() not in {plus_tag(r) for r in envelope.recipients}:
        return False
    if rule.subject_contains and rule.subject_contains.casefold() not in envelope.subject.casefold():
        return False
    if rule.subject_regex and not compile_subject_pattern(rule.subject_regex).search(envelope.subject):
        return False
    if rule.filename and not fnmatchcase(document.filename.lower(), rule.filename.lower()):
        return False
    return not rule.kinds or document.kind in rule.kinds


def sender_matches(pattern: str, sender: str) -> bool:
    """A pattern with "@" is a glob on the whole address; one without, on its domain (``*.client.example``)."""
    pattern, sender = pattern.lower(), sender.lower()
    if "@" in pattern:
        return fnmatchcase(sender, pattern)
    domain = sender.rpartition("@")[2]
    return bool(domain) and fnmatchcase(domain, pattern)


def requires_auth(rule: Rule, fallback: Fallback) -> bool:
    if rule.sender_auth == SenderAuth.AS_MAILBOX:
        return fallback.require_auth
    return rule.sender_auth == SenderAuth.REQUIRED


def _by_rule(rule: Rule, envelope: Envelope, fallback: Fallback) -> Decision:
    named = {"rule_id": rule.id, "rule_name": rule.name}
    if rule.action == IGNORE:
        return Decision(IGNORE, reason=f"ignored by rule '{rule.name}'", **named)
    if rule.action == TRIAGE:
        return Decision(TRIAGE, reason=f"held for triage by rule '{rule.name}'", **named)
    if requires_auth(rule, fallback) and not envelope.authenticated:
        # Routed by its rule, but anyone can write that From: a person decides.
        return Decision(TRIAGE, reason=f"rule '{rule.name}' needs an authenticated sender: {envelope.auth_reason}",
                        **named)
    return Decision(ROUTE, target_id=rule.target_id, reason=f"routed by rule '{rule.name}'", **named)


def _by_plus_tag(envelope: Envelope, fallback: Fallback) -> Decision | None:
    """The org's "plus tag names a site": reports+<slug>@… goes to that site's default target, if one is set."""
    for recipient in envelope.recipients:
        tag = plus_tag(recipient)
        if tag and tag in fallback.tag_targets:
            target_id, site = fallback.tag_targets[tag]
            if fallback.require_auth and not envelope.authenticated:
                return Decision(TRIAGE, reason=f"the mailbox needs an authenticated sender: {envelope.auth_reason}")
            return Decision(ROUTE, target_id=target_id, reason=f"the plus tag '{tag}' names the site {site}")
    return None


def _by_mailbox(envelope: Envelope, document: Document, fallback: Fallback) -> Decision:
    if fallback.require_auth and not envelope.authenticated:
        return Decision(TRIAGE, reason=f"the mailbox needs an authenticated sender: {envelope.auth_reason}")
    if fallback.target_id is not None:
        return Decision(ROUTE, target_id=fallback.target_id, reason="the mailbox's site target")
    if document.kind in IMPORTABLE_KINDS:
        return Decision(TRIAGE, reason="no rule matched and the mailbox has no site target")
    # A PDF or a body is processed without a site (its text goes downstream), as before rules existed.
    return Decision(ROUTE, reason="needs no site target")
