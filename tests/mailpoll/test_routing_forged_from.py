"""A forged From does not pass for an authenticated sender (issue 35 item 11), at intake and in a rule's preview.

The mailbox's own server authenticated the message (``dmarc=pass``, with no ``header.from``, as some servers
write it): for the domain *it* read as From. A From with a display name that reads as an address, several
mailboxes or a group cannot say which one that was, so a rule that needs an authenticated sender holds it.
"""

from __future__ import annotations

import pytest

from mailpoll.models import Attachment, AttachmentStatus, Request
from mailpoll.routing.router import Router
from mailpoll.sync.store import store_message
from tests.mailpoll.factories import CSV, MailboxFactory, MailRuleFactory, mail

pytestmark = pytest.mark.django_db

AUTHSERV = "mx.agency.example"
OURS = f"{AUTHSERV}; spf=pass smtp.mailfrom=evil.example; dmarc=pass"
PLACEHOLDER = b"placeholder@sender.example"


def csv_mail(from_header: bytes) -> bytes:
    raw = mail("Weekly SEO report", sender=PLACEHOLDER.decode(), attachments=[("Pages.csv", CSV, "text/csv")],
               headers=[("Authentication-Results", OURS)])
    assert raw.count(PLACEHOLDER) == 1
    return raw.replace(PLACEHOLDER, from_header)  # as the sender wrote it, not as a serializer would


@pytest.fixture
def intake():
    mailbox = MailboxFactory(site_target=None, authserv_id=AUTHSERV)
    MailRuleFactory(org=mailbox.org, name="Acme staff", sender="acme.example", sender_auth="required")
    # No condition on the sender: only the authentication can hold a message back here.
    MailRuleFactory(org=mailbox.org, name="Authenticated", sender_auth="required", position=200)
    return mailbox


@pytest.mark.parametrize("from_header, problem", [
    (b"ceo@acme.example <mallory@evil.example>", "From does not read as one address (invalid address in address-list)"),
    (b"ceo@acme.example<mallory@evil.example>", "From does not read as one address (invalid address in address-list)"),
    (b'"ceo@acme.example" <mallory@evil.example>', "the From display name reads as another address"),
    (b"ceo@acme.example, mallory@evil.example", "2 addresses in From"),
    (b"Staff: ceo@acme.example;", "group syntax in From"),
])
def test_a_rule_requiring_an_authenticated_sender_does_not_match_a_forged_from(intake, from_header, problem):
    store_message(intake, "INBOX", 1, csv_mail(from_header))

    document = Attachment.objects.get()
    assert document.status == AttachmentStatus.NEEDS_ROUTE
    assert document.route_reason == f"rule 'Authenticated' needs an authenticated sender: {problem}"
    # The preview reads the stored request and comes to the same verdict.
    request = Request.objects.get()
    envelope = Router.for_mailbox(intake).envelope(folder="INBOX", sender=request.sender,
                                                  recipients=request.recipients, subject=request.subject,
                                                  auth_results=request.auth_results)
    assert (envelope.authenticated, envelope.auth_reason) == (False, problem)


def test_the_same_authentication_routes_a_plain_from(intake):
    store_message(intake, "INBOX", 1, csv_mail(b"CEO <ceo@acme.example>"))

    document = Attachment.objects.get()
    assert (document.status, document.route_reason) == (AttachmentStatus.PENDING, "routed by rule 'Acme staff'")
    assert Request.objects.get().sender == "ceo@acme.example"
