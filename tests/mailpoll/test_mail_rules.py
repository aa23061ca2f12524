"""Mail rules at intake: one mailbox, many sites. Stored through the real store, processed by a real worker loop.

What the decision is, case by case, is tests/mailpoll/test_routing_decide.py; here, that intake records it on
each document, imports into the chosen site, holds the rest for triage, and that a person's routing is done once.
"""

from __future__ import annotations

import pytest

from imports.models import Import
from jobs.models import Job
from mailpoll import attachments
from mailpoll.models import Attachment, AttachmentStatus, MailRule
from mailpoll.sync.store import store_message
from tests.factories import OrgFactory, SiteTargetFactory
from tests.mailpoll.corpus import tiny_pdf
from tests.mailpoll.factories import CSV, MailboxFactory, MailRuleFactory, mail
from tests.support.processes import run_burst

pytestmark = pytest.mark.django_db

AUTHSERV = "mx.agency.example"
PASS = f"{AUTHSERV}; dkim=pass header.d=acme.example header.s=sel; dmarc=pass header.from=acme.example"
FORGED = "mx.evil.example; dmarc=pass header.from=acme.example"


def csv_mail(sender="ana@acme.example", **kwargs) -> bytes:
    return mail("Weekly SEO report", sender=sender, attachments=[("Pages.csv", CSV, "text/csv")], **kwargs)


def jobs_for(document: Attachment) -> int:
    return Job.objects.filter(type="process_attachment", payload__attachment_id=document.pk).count()


@pytest.fixture
def intake():
    """One shared intake mailbox, no site target of its own."""
    return MailboxFactory(site_target=None, authserv_id=AUTHSERV)


def test_a_rule_routes_a_document_into_its_site_and_the_decision_is_recorded(intake):
    rule = MailRuleFactory(org=intake.org, name="Acme staff", sender="acme.example")
    MailRuleFactory(org=intake.org, name="anyone", position=200)  # later: never reached for acme's mail

    store_message(intake, "INBOX", 1, csv_mail())
    document = Attachment.objects.get()
    assert (document.status, document.site_target_id, document.rule_id, document.rule_name, document.route_reason) == (
        AttachmentStatus.PENDING, rule.site_target_id, rule.pk, "Acme staff", "routed by rule 'Acme staff'")

    run_burst()
    document.refresh_from_db()
    assert document.status == AttachmentStatus.DONE
    assert Import.objects.get(pk=document.source_import_id).site_target_id == rule.site_target_id


def test_the_history_reads_right_after_the_rule_is_renamed_or_deleted(intake):
    rule = MailRuleFactory(org=intake.org, name="Acme staff")
    store_message(intake, "INBOX", 1, csv_mail())
    MailRule.objects.filter(pk=rule.pk).update(name="renamed")
    assert Attachment.objects.get().rule_name == "Acme staff"
    MailRule.objects.filter(pk=rule.pk).delete()
    document = Attachment.objects.get()
    assert (document.rule_id, document.rule_name, document.site_target_id) == (None, "Acme staff", rule.site_target_id)


def test_nothing_routes_it_so_it_waits_for_a_person_without_a_job_never_failed(intake):
    MailRuleFactory(org=intake.org, sender="globex.example")
    store_message(intake, "INBOX", 1, csv_mail())
    run_burst()
    document = Attachment.objects.get()
    assert (document.status, document.route_reason) == (
        AttachmentStatus.NEEDS_ROUTE, "no rule matched and the mailbox has no site target")
    assert jobs_for(document) == 0 and not Import.objects.exists()


def test_an_ignore_rule_records_the_document_as_skipped(intake):
    MailRuleFactory(org=intake.org, name="newsletters", action="ignore", subject_contains="weekly")
    store_message(intake, "INBOX", 1, csv_mail())
    document = Attachment.objects.get()
    assert (document.status, document.skip_reason, document.rule_name) == (
        AttachmentStatus.SKIPPED, "ignored by rule 'newsletters'", "newsletters")
    assert jobs_for(document) == 0


@pytest.mark.parametrize(("headers", "routed"), [
    ([("Authentication-Results", PASS)], True),
    ([("Authentication-Results", FORGED)], False),  # another server's header: anyone can write it
    ([], False),
])
def test_a_rule_that_needs_an_authenticated_sender(intake, headers, routed):
    MailRuleFactory(org=intake.org, name="Acme staff", sender="acme.example", sender_auth="required")
    store_message(intake, "INBOX", 1, csv_mail(headers=headers))
    document = Attachment.objects.get()
    if routed:
        assert document.status == AttachmentStatus.PENDING
    else:
        assert document.status == AttachmentStatus.NEEDS_ROUTE
        assert document.route_reason.startswith("rule 'Acme staff' needs an authenticated sender: ")


def test_a_stranger_cannot_put_data_into_the_mailbox_target_once_it_requires_authentication():
    mailbox = MailboxFactory(authserv_id=AUTHSERV, require_authenticated_sender=True)
    store_message(mailbox, "INBOX", 1, csv_mail(sender="mallory@acme.example",
                                                headers=[("Authentication-Results", FORGED)]))
    run_burst()
    document = Attachment.objects.get()
    assert document.status == AttachmentStatus.NEEDS_ROUTE and not Import.objects.exists()


def test_a_plus_address_tag_routes_to_its_site(intake):
    acme = MailRuleFactory(org=intake.org, plus_tag="acme")
    globex = MailRuleFactory(org=intake.org, plus_tag="globex")
    store_message(intake, "INBOX", 1, csv_mail(to="reports+globex@agency.example"))
    assert Attachment.objects.get().site_target_id == globex.site_target_id != acme.site_target_id


def test_recipients_and_authentication_results_are_kept_on_the_request(intake):
    store_message(intake, "INBOX", 1, csv_mail(to="reports+acme@agency.example",
                                               headers=[("Authentication-Results", PASS)]))
    request = Attachment.objects.get().request
    assert request.recipients == ["reports+acme@agency.example"]
    assert request.auth_results == [PASS]


def test_another_orgs_rules_never_decide(intake):
    MailRuleFactory(org=OrgFactory(), sender="acme.example")
    store_message(intake, "INBOX", 1, csv_mail())
    assert Attachment.objects.get().status == AttachmentStatus.NEEDS_ROUTE


def test_routed_by_a_person_it_is_imported_once(intake):
    store_message(intake, "INBOX", 1, csv_mail())
    document = Attachment.objects.get()
    target = SiteTargetFactory(site__org=intake.org, url_prefix="https://shop.example/")

    assert attachments.route([document.pk], target, by="ana") == [document.pk]
    assert attachments.route([document.pk], target, by="bob") == []  # no longer waiting
    run_burst()
    document.refresh_from_db()
    assert (document.status, document.route_reason, document.site_target_id) == (
        AttachmentStatus.DONE, "routed by ana", target.pk)
    assert Import.objects.get().site_target_id == target.pk
    assert jobs_for(document) == 1


def test_a_target_of_another_org_routes_nothing(intake):
    store_message(intake, "INBOX", 1, csv_mail())
    document = Attachment.objects.get()
    assert attachments.route([document.pk], SiteTargetFactory(), by="ana") == []
    document.refresh_from_db()
    assert document.status == AttachmentStatus.NEEDS_ROUTE


def test_ignored_by_a_person(intake):
    store_message(intake, "INBOX", 1, csv_mail())
    document = Attachment.objects.get()
    assert attachments.ignore([document.pk], by="ana") == [document.pk]
    document.refresh_from_db()
    assert (document.status, document.skip_reason) == (AttachmentStatus.SKIPPED, "ignored by ana")


def test_a_routed_document_whose_target_was_deleted_fails_instead_of_going_elsewhere():
    mailbox = MailboxFactory()  # it has a target of its own: the legacy fallback must not be taken
    rule = MailRuleFactory(org=mailbox.org)
    store_message(mailbox, "INBOX", 1, csv_mail())
    MailRule.objects.filter(pk=rule.pk).delete()
    rule.site_target.delete()
    run_burst()
    document = Attachment.objects.get()
    assert document.status == AttachmentStatus.FAILED and "no site target" in document.error
    assert not Import.objects.exists()


def test_a_pdf_needs_no_site_and_is_processed_as_before(intake):
    store_message(intake, "INBOX", 1, mail(attachments=[("notes.pdf", tiny_pdf("hello"), "application/pdf")]))
    run_burst()
    assert Attachment.objects.get(document_type="pdf").status == AttachmentStatus.DONE
