"""*Poll now* on the mailbox's own page: a button POSTing with its CSRF token, for who may change the mailbox,
in the user's orgs only; it does what the list's action does (the mailbox due now, the pollers woken)."""

import re

import pytest
from django.contrib.auth.models import Group, Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from seoinsight import operator_group
from tests.factories import OrgFactory, UserFactory
from tests.mailpoll.factories import MailboxFactory

pytestmark = pytest.mark.django_db


def operator_of(org) -> Client:
    user = UserFactory(is_staff=True, org=org)
    user.groups.add(Group.objects.get(name=operator_group.NAME))
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def change_url(mailbox):
    return reverse("admin:mailpoll_mailbox_change", args=[mailbox.pk])


def poll_now_url(mailbox):
    return reverse("admin:mailpoll_mailbox_poll_now", args=[mailbox.pk])


def test_an_operator_polls_the_mailbox_now_from_its_page():
    org = OrgFactory()
    mailbox = MailboxFactory(org=org, last_polled_at=timezone.now())
    client = operator_of(org)
    page = client.get(change_url(mailbox)).content.decode()
    form = re.search(r'<form id="mailpoll-poll-now" method="post" action="([^"]+)">'
                     r'<input type="hidden" name="csrfmiddlewaretoken" value="([^"]+)">', page)
    assert form and form.group(1) == poll_now_url(mailbox)
    assert '<button type="submit" class="button" form="mailpoll-poll-now">Poll now</button>' in page

    assert client.post(poll_now_url(mailbox)).status_code == 403  # no CSRF token: refused
    mailbox.refresh_from_db()
    assert mailbox.last_polled_at is not None

    response = client.post(form.group(1), {"csrfmiddlewaretoken": form.group(2)}, follow=True)
    assert response.redirect_chain[-1][0] == change_url(mailbox)
    said = [str(message) for message in response.context["messages"]]
    assert len(said) == 1 and said[0].startswith("1 mailbox marked due: ")
    mailbox.refresh_from_db()
    assert mailbox.last_polled_at is None  # due: the next claim of any pollmail takes it first


def test_a_disabled_mailbox_is_not_polled_and_the_page_says_why():
    org = OrgFactory()
    mailbox = MailboxFactory(org=org, enabled=False, last_polled_at=timezone.now())
    client = operator_of(org)
    client.get(change_url(mailbox))
    response = client.post(poll_now_url(mailbox), {"csrfmiddlewaretoken": client.cookies["csrftoken"].value},
                           follow=True)
    said = [str(message) for message in response.context["messages"]]
    assert len(said) == 1 and said[0].startswith("0 mailboxes marked due: ")
    assert said[0].endswith("; 1 skipped (disabled mailboxes are never polled: enable them first)")


def test_only_who_may_change_the_mailbox_of_their_own_org(client):
    org = OrgFactory()
    own, other = MailboxFactory(org=org, last_polled_at=timezone.now()), MailboxFactory(last_polled_at=timezone.now())
    viewer = UserFactory(is_staff=True, org=org)
    viewer.user_permissions.add(Permission.objects.get(codename="view_mailbox"))
    client.force_login(viewer)
    assert "mailpoll-poll-now" not in client.get(change_url(own)).content.decode()
    assert client.post(poll_now_url(own)).status_code == 403
    assert client.get(poll_now_url(own)).status_code == 405  # only a POST marks anything due

    viewer.user_permissions.add(Permission.objects.get(codename="change_mailbox"))
    assert client.post(poll_now_url(other)).status_code == 404
    other.refresh_from_db()
    assert other.last_polled_at is not None
