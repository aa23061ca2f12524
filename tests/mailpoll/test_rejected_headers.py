"""A message too large to fetch is a rejected Request that reads like an accepted one: decoded headers, same name."""

import pytest

from mailpoll.models import Request, RequestStatus
from mailpoll.message.parse import message_ref
from tests.mailpoll.corpus import attachment, headers, mixed, text
from tests.mailpoll.factories import poll_now

pytestmark = pytest.mark.django_db

ENCODED = [
    "Subject: =?UTF-8?Q?Donn=C3=A9es_d=E2=80=99octobre_=E2=80=94_export_complet?=",
    "From: =?ISO-8859-1?Q?Ren=E9e_Lef=E8vre?= <renee@client.example>",
]


def oversized(message_id: str) -> bytes:
    head = [line for line in headers(message_id=message_id) if not line.startswith(("Subject:", "From:"))]
    return mixed(head + ENCODED, [text(), attachment("big.csv", b"Page,Clicks\n" * 20_000)])


def test_an_oversized_message_shows_its_decoded_subject_and_sender(dovecot, imap_mailbox, settings):
    settings.MAILPOLL_MAX_MESSAGE_BYTES = 100_000
    mailbox = imap_mailbox()
    dovecot.append(mailbox.username, "INBOX", oversized("big@client.example"))

    poll_now(mailbox)

    request = Request.objects.get()
    assert request.status == RequestStatus.REJECTED and "over the 100,000-byte limit" in request.reject_reason
    assert request.subject == "Données d’octobre — export complet"
    assert request.sender == "renee@client.example"
    assert request.source_ref == "big@client.example"


def test_an_oversized_message_with_a_long_message_id_is_named_as_if_accepted(dovecot, imap_mailbox, settings):
    settings.MAILPOLL_MAX_MESSAGE_BYTES = 100_000
    long_id = "y" * 400 + "@lists.client.example"
    mailbox = imap_mailbox(folders=["INBOX", "Archive"])
    dovecot.create_folder(mailbox.username, "Archive")
    dovecot.append(mailbox.username, "INBOX", oversized(long_id))
    dovecot.append(mailbox.username, "Archive", b"Received: from relay.example; Mon, 06 Jan 2025 10:16:00 +0100\r\n"
                   + oversized(long_id))

    poll_now(mailbox)

    assert list(Request.objects.values_list("source_ref", flat=True)) == [message_ref(long_id)]
