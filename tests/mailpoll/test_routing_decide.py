"""The mail rules' decision (mailpoll.routing.decide), table-driven: no database, no clock."""

from __future__ import annotations

import pytest

from mailpoll.models import SenderAuth
from mailpoll.routing.decide import (IGNORE, ROUTE, TRIAGE, AfterStore, Decision, Document, Envelope, Fallback,
                                     Rule, after_store, decide, matches, sender_matches)
from mailpoll.routing.patterns import BadPattern, compile_subject_pattern

MAILBOX = 7


def envelope(**changes) -> Envelope:
    values = {"mailbox_id": MAILBOX, "folder": "INBOX", "sender": "ana@acme.example",
              "recipients": ("reports+acme@agency.example",), "subject": "Weekly SEO report",
              "authenticated": True, "auth_reason": "dmarc=pass for acme.example"}
    values.update(changes)
    return Envelope(**values)


CSV = Document("Pages.csv", "csv")
XLSX = Document("Queries.xlsx", "xlsx")
PDF = Document("invoice.pdf", "pdf")
BODY = Document("", "body")


TAGS = {"acme": (40, "acme.example")}


def rule(**fields) -> Rule:
    values = {"id": 1, "name": "acme", "action": ROUTE, "target_id": 10}
    values.update(fields)
    return Rule(**values)


@pytest.mark.parametrize(("condition", "env", "document", "expected"), [
    ({}, envelope(), CSV, True),  # no condition: everything
    ({"mailbox_ids": frozenset({MAILBOX})}, envelope(), CSV, True),
    ({"mailbox_ids": frozenset({8})}, envelope(), CSV, False),
    ({"folder": "INBOX"}, envelope(), CSV, True),
    ({"folder": "Reports"}, envelope(), CSV, False),
    ({"sender": "acme.example"}, envelope(), CSV, True),  # a domain
    ({"sender": "*.acme.example"}, envelope(), CSV, False),  # a subdomain glob is not the apex
    ({"sender": "*.acme.example"}, envelope(sender="bot@mail.acme.example"), CSV, True),
    ({"sender": "*@ACME.example"}, envelope(), CSV, True),  # an address glob, any case
    ({"sender": "bob@acme.example"}, envelope(), CSV, False),
    ({"sender": "acme.example"}, envelope(sender="ana@acme.example.evil"), CSV, False),
    ({"sender": "acme.example"}, envelope(sender=""), CSV, False),
    ({"recipient": "reports+*@agency.example"}, envelope(), CSV, True),
    ({"recipient": "seo@agency.example"}, envelope(), CSV, False),
    ({"plus_tag": "acme"}, envelope(), CSV, True),
    ({"plus_tag": "ACME"}, envelope(), CSV, True),
    ({"plus_tag": "globex"}, envelope(), CSV, False),
    ({"plus_tag": "acme"}, envelope(recipients=("reports@agency.example",)), CSV, False),
    ({"subject_contains": "seo REPORT"}, envelope(), CSV, True),
    ({"subject_contains": "invoice"}, envelope(), CSV, False),
    ({"subject_regex": r"^weekly\s+seo"}, envelope(), CSV, True),
    ({"subject_regex": r"monthly"}, envelope(), CSV, False),
    ({"filename": "pages*.csv"}, envelope(), CSV, True),
    ({"filename": "*.xlsx"}, envelope(), CSV, False),
    ({"kinds": frozenset({"excel"})}, envelope(), XLSX, True),
    ({"kinds": frozenset({"excel"})}, envelope(), Document("old.xls", "xls"), True),
    ({"kinds": frozenset({"csv", "excel"})}, envelope(), PDF, False),
    ({"kinds": frozenset({"body"})}, envelope(), BODY, True),
    # AND: one condition failing is enough.
    ({"sender": "acme.example", "subject_contains": "invoice"}, envelope(), CSV, False),
    ({"sender": "acme.example", "plus_tag": "acme", "kinds": frozenset({"csv"})}, envelope(), CSV, True),
])
def test_each_condition_and_their_conjunction(condition, env, document, expected):
    assert matches(rule(**condition), env, document) is expected


@pytest.mark.parametrize(("rules", "env", "document", "fallback", "expected"), [
    # The first matching rule decides, in the order given.
    ([rule(id=1, name="first", sender="acme.example", target_id=10), rule(id=2, name="second", target_id=20)],
     envelope(), CSV, Fallback(30), Decision(ROUTE, 10, 1, "first", "routed by rule 'first'")),
    ([rule(id=1, name="other", sender="globex.example", target_id=10), rule(id=2, name="second", target_id=20)],
     envelope(), CSV, Fallback(30), Decision(ROUTE, 20, 2, "second", "routed by rule 'second'")),
    # No rule matches: the mailbox's target.
    ([rule(sender="globex.example")], envelope(), CSV, Fallback(30),
     Decision(ROUTE, 30, reason="the mailbox's site target")),
    # No rule and no target: a CSV waits for a person; a PDF needs no site.
    ([], envelope(), CSV, Fallback(None),
     Decision(TRIAGE, reason="no rule matched and the mailbox has no site target")),
    ([], envelope(), PDF, Fallback(None), Decision(ROUTE, reason="needs no site target")),
    # Ignore and hold, whatever the sender's authentication.
    ([rule(name="spam", action=IGNORE, target_id=None)], envelope(authenticated=False), CSV, Fallback(30),
     Decision(IGNORE, None, 1, "spam", "ignored by rule 'spam'")),
    ([rule(name="check", action=TRIAGE, target_id=None)], envelope(), CSV, Fallback(30),
     Decision(TRIAGE, None, 1, "check", "held for triage by rule 'check'")),
    # Authentication: as the mailbox says, unless the rule says.
    ([rule(name="acme")], envelope(authenticated=False, auth_reason="dmarc=fail"), CSV, Fallback(30, True),
     Decision(TRIAGE, None, 1, "acme", "rule 'acme' needs an authenticated sender: dmarc=fail")),
    ([rule(name="acme")], envelope(authenticated=False), CSV, Fallback(30, False),
     Decision(ROUTE, 10, 1, "acme", "routed by rule 'acme'")),
    ([rule(name="acme", sender_auth=SenderAuth.REQUIRED)], envelope(authenticated=False, auth_reason="no header"), CSV,
     Fallback(30, False), Decision(TRIAGE, None, 1, "acme", "rule 'acme' needs an authenticated sender: no header")),
    ([rule(name="acme", sender_auth=SenderAuth.NOT_REQUIRED)], envelope(authenticated=False), CSV, Fallback(30, True),
     Decision(ROUTE, 10, 1, "acme", "routed by rule 'acme'")),
    ([rule(name="acme", sender_auth=SenderAuth.REQUIRED)], envelope(authenticated=True), CSV, Fallback(30, False),
     Decision(ROUTE, 10, 1, "acme", "routed by rule 'acme'")),
    # The mailbox's own requirement holds for its fallback too, PDFs included.
    ([], envelope(authenticated=False, auth_reason="dkim=fail"), CSV, Fallback(30, True),
     Decision(TRIAGE, reason="the mailbox needs an authenticated sender: dkim=fail")),
    ([], envelope(authenticated=False, auth_reason="dkim=fail"), PDF, Fallback(None, True),
     Decision(TRIAGE, reason="the mailbox needs an authenticated sender: dkim=fail")),
    # The org's "plus tag names a site": after the rules, before the mailbox's target.
    ([], envelope(), CSV, Fallback(30, tag_targets=TAGS),
     Decision(ROUTE, 40, reason="the plus tag 'acme' names the site acme.example")),
    ([], envelope(recipients=("seo@agency.example", "reports+ACME@agency.example")), PDF,
     Fallback(None, tag_targets=TAGS), Decision(ROUTE, 40, reason="the plus tag 'acme' names the site acme.example")),
    ([rule(name="first")], envelope(), CSV, Fallback(30, tag_targets=TAGS),
     Decision(ROUTE, 10, 1, "first", "routed by rule 'first'")),
    ([], envelope(recipients=("reports+globex@agency.example",)), CSV, Fallback(30, tag_targets=TAGS),
     Decision(ROUTE, 30, reason="the mailbox's site target")),
    ([], envelope(authenticated=False, auth_reason="no header"), CSV, Fallback(30, True, tag_targets=TAGS),
     Decision(TRIAGE, reason="the mailbox needs an authenticated sender: no header")),
])
def test_decide(rules, env, document, fallback, expected):
    assert decide(rules, env, document, fallback) == expected


@pytest.mark.parametrize(("pattern", "sender", "expected"), [
    ("acme.example", "ana@acme.example", True),
    ("acme.example", "ana@sub.acme.example", False),
    ("*acme.example", "ana@evilacme.example", True),  # a glob means what it says: *.acme.example is safer
    ("ana@*", "ana@anything.example", True),
])
def test_sender_matches(pattern, sender, expected):
    assert sender_matches(pattern, sender) is expected


def test_a_hostile_subject_against_a_nested_pattern_is_answered_at_once():
    # (a+)+$ takes exponential time in a backtracking engine on "aaa…b"; RE2's is linear.
    pattern = compile_subject_pattern("(a+)+$")
    assert pattern.search("a" * 1000 + "b") is None


@pytest.mark.parametrize(("pattern", "message"), [
    (r"(report)\1", "backreferences and lookaround are not supported"),
    (r"(?=report)", "backreferences and lookaround are not supported"),
    ("(", r"missing \)"),
    ("x" * 501, "at most 500 characters"),
])
def test_patterns_refused(pattern, message):
    with pytest.raises(BadPattern, match=message):
        compile_subject_pattern(pattern)


FIRST = rule(id=1, name="first")
MOVES = rule(id=2, name="moves", post_action="move", post_action_folder="Done")
LEAVES = rule(id=3, name="leaves", post_action="leave")
READS = Fallback(30, post_action="mark_read")


@pytest.mark.parametrize(("decisions", "fallback", "expected"), [
    ([], Fallback(30), None),  # the mailbox leaves its messages alone
    ([], READS, AfterStore("mark_read", "", "the mailbox")),  # a message without documents: the mailbox's
    ([Decision(ROUTE, 30)], READS, AfterStore("mark_read", "", "the mailbox")),
    ([Decision(ROUTE, 10, 1, "first")], READS, AfterStore("mark_read", "", "the mailbox")),  # the rule defers
    ([Decision(ROUTE, 10, 1, "first"), Decision(ROUTE, 10, 2, "moves")], READS,
     AfterStore("move", "Done", "rule 'moves'")),  # the first rule with a post-action of its own
    ([Decision(ROUTE, 10, 3, "leaves"), Decision(ROUTE, 10, 2, "moves")], READS, None),
    ([Decision(ROUTE, 10, 2, "moves"), Decision(ROUTE, 10, 3, "leaves")], Fallback(30),
     AfterStore("move", "Done", "rule 'moves'")),
    ([Decision(ROUTE, 10, 9, "deleted since")], READS, AfterStore("mark_read", "", "the mailbox")),
])
def test_after_store(decisions, fallback, expected):
    assert after_store([FIRST, MOVES, LEAVES], decisions, fallback) == expected
