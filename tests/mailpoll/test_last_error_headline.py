"""A mailbox's last error reads as *Test connection* does: its headline first, the raw text under details.

A real poll (``Poller().cycle()``) of a closed port on loopback, then the mailbox's admin page and list as a
staff member of its org, then *Test connection* on the same mailbox: one wording.
"""

import re

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from tests.factories import OrgFactory, UserFactory
from tests.mailpoll.factories import MailboxFactory
from tests.mailpoll.test_hostile_servers import cycle
from tests.support.loopback import free_port

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_refused_poll_reads_connection_refused_with_the_raw_text_under_details(client):
    org = OrgFactory()
    user = UserFactory(is_staff=True, org=org)
    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_mailbox", "change_mailbox"]))
    client.force_login(user)
    mailbox = MailboxFactory(org=org, host="127.0.0.1", port=free_port(), security="none")  # nothing listens

    cycle(mailbox)

    headline, raw = mailbox.last_error.split("\n", 1)
    assert headline == "connection refused"
    assert raw.startswith(f"127.0.0.1:{mailbox.port}: ConnectionRefusedError")
    page = client.get(reverse("admin:mailpoll_mailbox_change", args=[mailbox.pk])).content.decode()
    shown = re.search(r"<pre[^>]*>connection refused</pre><details><summary>details</summary><pre[^>]*>(.*?)</pre>"
                      r"</details>", page, re.S)
    assert shown and "ConnectionRefusedError" in shown.group(1)
    listing = client.get(reverse("admin:mailpoll_mailbox_changelist")).content.decode()
    assert re.search(r'<span title="[^"]*ConnectionRefusedError[^"]*" style="">connection refused</span>', listing)

    tested = client.post(reverse("admin:mailpoll_mailbox_test_connection", args=[mailbox.pk])).content.decode()
    assert "connection refused" in tested
