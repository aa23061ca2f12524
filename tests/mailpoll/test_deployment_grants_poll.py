"""Every poll asks for the org's grant again before a deployment identity signs or sends anything.

A mailbox row that bypassed the form (saved before its grant was narrowed or removed, or written by a script)
must fail its poll with the refusal recorded and nothing fetched: no JWT signed for Google's token endpoint, no
client-credentials request to Microsoft's, no API call. Real poller, loopback fakes (tests/support).
"""

from __future__ import annotations

import json

import pytest

from mailpoll.models import DeploymentGrant, Mailbox, Request
from mailpoll.sync.poller import Poller
from tests.mailpoll.factories import MailboxFactory, grant_for, mail
from tests.support.fake_graph import TENANT, USER
from tests.support.gmail_mailboxes import decoy_token_uri
from tests.support.google import service_account_key

# The poller's threads and the token machinery commit on connections of their own.
pytestmark = pytest.mark.django_db(transaction=True)


def poll(mailbox: Mailbox) -> Mailbox:
    Poller().poll(mailbox)
    mailbox.refresh_from_db()
    return mailbox


@pytest.fixture
def deployment_key(gmail, settings, tmp_path):
    """MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE: a delegated key (its own token_uri a decoy: the fake is the one)."""
    path = tmp_path / "delegated.json"
    path.write_text(json.dumps(service_account_key(decoy_token_uri())))
    settings.MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE = str(path)
    return gmail


def gmail_service(username: str, **fields) -> Mailbox:
    """A keyless Gmail service mailbox written straight to the database, no grant."""
    return MailboxFactory(gmail_service=True, username=username, granted=False, **fields)


def graph_app_only(username: str, **fields) -> Mailbox:
    return MailboxFactory(provider="graph", auth="service", host="", security="tls", port=993, username=username,
                          initial_mode="full", granted=False, **fields)


def test_an_ungranted_subject_is_never_signed_for_and_the_refusal_is_recorded(deployment_key):
    deployment_key.add(mail("the CEO's mail"))
    mailbox = poll(gmail_service("ceo@operator.example"))

    assert deployment_key.token_requests == 0 and deployment_key.grants == [] and deployment_key.calls == []
    assert not Request.objects.exists()
    assert "the deployment's Google service account (MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE) may not read " \
           "'ceo@operator.example': no superuser granted it to org" in mailbox.last_error
    assert mailbox.consecutive_failures == 1 and mailbox.next_attempt_at is not None


def test_a_subject_outside_the_granted_domains_is_refused_and_a_granted_one_reads(deployment_key):
    deployment_key.add(mail("m"))
    ceo = gmail_service("ceo@operator.example")
    grant_for(ceo, allowed=["client.example"])
    poll(ceo)
    assert deployment_key.token_requests == 0 and not Request.objects.exists()
    assert "is not among the addresses and domains granted to org" in ceo.last_error

    intake = gmail_service("alice@client.example", org=ceo.org)
    poll(intake)
    assert intake.last_error == "" and Request.objects.filter(mailbox=intake).count() == 1
    [claims] = deployment_key.grants
    assert claims["sub"] == "alice@client.example"


def test_a_grant_removed_after_the_mailbox_was_saved_stops_its_next_poll(deployment_key):
    mailbox = gmail_service("alice@client.example")
    grant = grant_for(mailbox)
    deployment_key.add(mail("before"))
    poll(mailbox)
    assert mailbox.last_error == "" and deployment_key.token_requests == 1

    grant.delete()
    deployment_key.add(mail("after"))
    calls = len(deployment_key.calls)
    poll(mailbox)
    assert "no superuser granted it to org" in mailbox.last_error
    assert deployment_key.token_requests == 1 and len(deployment_key.calls) == calls
    assert list(Request.objects.values_list("subject", flat=True)) == ["before"]


def test_the_mailboxs_own_key_needs_no_grant(deployment_key):
    mailbox = gmail_service("ceo@operator.example")
    mailbox.set_app_secret(json.dumps(service_account_key(decoy_token_uri())))
    mailbox.save(update_fields=["app_secret"])
    deployment_key.add(mail("m"))
    poll(mailbox)
    assert mailbox.last_error == "" and deployment_key.token_requests == 1


def test_an_ungranted_app_only_mailbox_sends_nothing_to_microsoft(graph):
    graph.add("inbox", b"From: a@example.com\r\nSubject: hr\r\nMessage-ID: <hr@example.com>\r\n\r\nsalaries\r\n")
    mailbox = poll(graph_app_only("hr-director@contoso.test"))

    assert graph.requests == []  # neither the token endpoint nor Graph
    assert not Request.objects.exists()
    assert "the deployment's Microsoft app (MAILPOLL_MICROSOFT_CLIENT_ID, app-only) may not read " \
           "'hr-director@contoso.test': no superuser granted it to org" in mailbox.last_error


@pytest.mark.parametrize("allowed, tenant, says", [
    (["intake@contoso.test"], TENANT, "is not among the addresses and domains granted to org"),
    (["contoso.test"], "fabrikam.test", f"holds no grant of it for tenant {TENANT}"),
])
def test_an_app_only_mailbox_outside_its_grant_sends_nothing(graph, allowed, tenant, says):
    mailbox = graph_app_only(USER)
    DeploymentGrant.objects.create(org=mailbox.org, identity="microsoft_app", tenant=tenant, allowed=allowed)
    poll(mailbox)
    assert graph.requests == [] and says in mailbox.last_error


def test_a_granted_app_only_mailbox_reads_and_a_narrowed_grant_stops_it(graph):
    graph.add("inbox", b"From: a@example.com\r\nSubject: one\r\nMessage-ID: <one@example.com>\r\n\r\nx\r\n")
    mailbox = graph_app_only(USER)
    grant = grant_for(mailbox, allowed=["contoso.test"])
    poll(mailbox)
    assert mailbox.last_error == "" and Request.objects.count() == 1

    grant.allowed = ["someone-else@contoso.test"]
    grant.save()
    graph.add("inbox", b"From: a@example.com\r\nSubject: two\r\nMessage-ID: <two@example.com>\r\n\r\nx\r\n")
    sent = len(graph.requests)
    poll(mailbox)
    assert "is not among the addresses and domains granted to org" in mailbox.last_error
    assert len(graph.requests) == sent and Request.objects.count() == 1
