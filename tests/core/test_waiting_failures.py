"""The admin index's "Waiting for you" counts what failed: imports not yet retried, failing mailboxes, zombie jobs.

Each is a count of the user's orgs (a superuser's: all), linked to the admin list filtered to exactly those rows.
"""

import pytest
from django.contrib.auth.models import Group
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone

from imports.models import ImportStatus
from seoinsight import operator_group
from seoinsight import waiting as queues
from tests.factories import ImportFactory, JobFactory, OrgFactory, SiteFactory, SiteTargetFactory, UserFactory
from tests.mailpoll.factories import MailboxFactory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media", "zombies_possible")]

QUEUES = ("failed imports not yet retried", "failing mailboxes", "zombie jobs: no sign of life from their worker")


def failures_of(org, imports: int, mailboxes: int, zombies: int) -> None:
    target = SiteTargetFactory(site=SiteFactory(org=org), url_prefix=f"https://{org.pk}.example/")
    for _ in range(imports):
        ImportFactory(site_target=target, failed=True)
    ImportFactory(site_target=target, done=True)
    for _ in range(mailboxes):
        MailboxFactory(org=org, consecutive_failures=3)
    MailboxFactory(org=org, last_success_at=timezone.now())
    MailboxFactory(org=org, enabled=False, consecutive_failures=5)  # disabled: nothing to fix by polling
    for _ in range(zombies):
        JobFactory(org_id=org.pk, stale=True)
    JobFactory(org_id=org.pk, running=True)


def waiting(client) -> dict[str, tuple[int, str]]:
    """label -> (count, link) as the index shows them."""
    response = client.get(reverse("admin:index"))
    return {shown.label: (shown.count, shown.url) for shown in response.context["queues"]}


def listed(client, url: str) -> int:
    response = client.get(url)
    assert response.status_code == 200, url
    return response.context["cl"].result_count


@pytest.fixture
def orgs():
    acme, globex = OrgFactory(id="acme"), OrgFactory(id="globex")
    failures_of(acme, imports=2, mailboxes=1, zombies=3)
    failures_of(globex, imports=1, mailboxes=2, zombies=1)
    return acme, globex


def test_an_operator_sees_their_orgs_failures_each_linked_to_exactly_those_rows(client, orgs):
    acme, _ = orgs
    user = UserFactory(is_staff=True, org=acme)
    user.groups.add(Group.objects.get(name=operator_group.NAME))
    client.force_login(user)

    shown = waiting(client)

    assert {label: count for label, (count, _) in shown.items() if label in QUEUES} == dict(zip(QUEUES, (2, 1, 3), strict=True))
    for label in QUEUES:
        count, url = shown[label]
        assert listed(client, url) == count, label
    html = client.get(reverse("admin:index")).content.decode()
    assert "Failed imports not yet retried" in html and "Failing mailboxes" in html


def test_a_superuser_sees_every_orgs_failures(client, orgs):
    root = UserFactory(is_staff=True, is_superuser=True)
    client.force_login(root)
    shown = waiting(client)
    assert {label: count for label, (count, _) in shown.items() if label in QUEUES} == dict(zip(QUEUES, (3, 3, 4), strict=True))
    for label in QUEUES:
        assert listed(client, shown[label][1]) == shown[label][0], label


def test_a_retried_import_no_longer_waits(client, orgs):
    acme, _ = orgs
    user = UserFactory(is_staff=True, org=acme)
    user.groups.add(Group.objects.get(name=operator_group.NAME))
    client.force_login(user)
    failed = acme.imports.filter(status=ImportStatus.FAILED).first()
    assert client.post(f"/imports/{failed.pk}/retry/").status_code == 302
    assert waiting(client)[QUEUES[0]][0] == 1


def test_the_counts_are_one_query_each(client, orgs, django_assert_max_num_queries):
    root = UserFactory(is_staff=True, is_superuser=True)
    client.force_login(root)
    client.get(reverse("admin:index"))  # sessions, content types warmed
    request = RequestFactory().get("/admin/")
    request.user = root
    shown = [queue for queue in queues._queues if queue.label in QUEUES]
    with django_assert_max_num_queries(len(shown)):
        for queue in shown:
            queue.show(request)


def test_a_staff_user_without_the_lists_sees_none_of_them(client, orgs):
    acme, _ = orgs
    client.force_login(UserFactory(is_staff=True, org=acme))
    html = client.get(reverse("admin:index")).content.decode().lower()
    assert not [label for label in QUEUES if label in html]
