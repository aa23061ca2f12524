"""The mailbox's page warns when its receiving server writes no Authentication-Results under its authserv-id
(issue 35 item 11): then only a sender could have written one, and sender authentication would trust it."""

import pytest
from django.urls import reverse

from mailpoll.message.sender_auth import EXCHANGE_ONLINE, carries_own_header
from mailpoll.sync.store import store_message
from tests.mailpoll.factories import MailboxFactory, mail

pytestmark = pytest.mark.django_db

AUTHSERV = "mx.agency.example"
WARNING = "carried an Authentication-Results header from"


def page(admin_client, mailbox) -> str:
    return admin_client.get(reverse("admin:mailpoll_mailbox_change", args=[mailbox.pk])).content.decode()


def test_the_page_warns_until_a_message_carries_the_servers_own_header(admin_client):
    mailbox = MailboxFactory(authserv_id=AUTHSERV)
    assert "no message yet to look at" in page(admin_client, mailbox)

    store_message(mailbox, "INBOX", 1, mail("one"))
    # A header naming another server does not count: anyone can write one.
    store_message(mailbox, "INBOX", 2, mail("two", headers=[("Authentication-Results", "mx.other.example; "
                                                                                      "dmarc=pass")]))
    html = page(admin_client, mailbox)
    assert f"None of the last 2 messages {WARNING} {AUTHSERV}" in html
    assert html.index(WARNING) < html.index("Senders")  # at a glance, not under the fold

    store_message(mailbox, "INBOX", 3, mail("three", headers=[("Authentication-Results", f"{AUTHSERV}; "
                                                                                        "dmarc=pass")]))
    html = page(admin_client, mailbox)
    assert WARNING not in html and f"1 of the last 3 messages carried one from {AUTHSERV}" in html


def test_a_mailbox_without_authserv_id_says_nobody_is_authenticated(admin_client):
    assert "no authserv-id: no sender is ever authenticated" in page(admin_client, MailboxFactory(authserv_id=""))


@pytest.mark.parametrize("headers, authserv_id, carried", [
    ([f"{AUTHSERV}; dmarc=pass"], AUTHSERV, True),
    ([f"{AUTHSERV.upper()}; (unreadable"], AUTHSERV, True),  # written by it, if unreadable: the server does write
    (["mx.other.example; dmarc=pass", f"{AUTHSERV}; none"], AUTHSERV, True),
    (["mx.other.example; dmarc=pass"], AUTHSERV, False),
    ([], AUTHSERV, False),
    ([f"{AUTHSERV}; dmarc=pass"], "", False),
    (["spf=pass smtp.mailfrom=a.example;dmarc=pass action=none header.from=a.example"], EXCHANGE_ONLINE, True),
    (["mx.other.example; dmarc=pass", "spf=pass;dmarc=pass action=none"], EXCHANGE_ONLINE, False),  # not on top
])
def test_carries_own_header(headers, authserv_id, carried):
    assert carries_own_header(headers, authserv_id) is carried
