"""A superuser's admin page (an org's settings, its members, its API tokens) tells an operator why not, and whom to ask.

Still refused (403) and still nothing of the org shown; a superuser opens it as before.
"""

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from seoinsight import operator_group
from tests.factories import OrgFactory, UserFactory, api_token

pytestmark = pytest.mark.django_db


@pytest.fixture
def org():
    return OrgFactory(id="agency", name="Agency")


@pytest.fixture
def operator(client, org):
    user = UserFactory(is_staff=True, org=org, username="olga")
    user.groups.add(Group.objects.get(name=operator_group.NAME))
    client.force_login(user)
    return user


@pytest.mark.parametrize("page", ["changelist", "change", "add", "delete", "history"])
def test_the_org_page_says_whose_it_is_to_an_operator(client, org, operator, page):
    url = reverse(f"admin:seoinsight_org_{page}", args=[] if page in ("changelist", "add") else [org.pk])
    response = client.get(url)
    assert response.status_code == 403
    text = response.content.decode()
    assert "An org&#x27;s settings (its name, whether a plus tag names a site) and who belongs to it are decided " \
           "by a superuser" in text
    assert "Your account (olga) may not open this page: ask a superuser of this\ndeployment" in text


def test_the_members_and_tokens_pages_say_so_too(client, org, operator):
    token, _ = api_token(org, name="nightly-export")
    members = client.get(reverse("admin:seoinsight_membership_changelist"))
    tokens = client.get(reverse("admin:seoinsight_apitoken_changelist"))
    assert (members.status_code, tokens.status_code) == (403, 403)
    assert "Who belongs to which org is decided by a superuser." in members.content.decode()
    assert "An org&#x27;s API tokens are created and revoked by a superuser." in tokens.content.decode()
    assert token.name not in tokens.content.decode()


def test_a_superuser_still_opens_the_org_page(admin_client, org):
    response = admin_client.get(reverse("admin:seoinsight_org_change", args=[org.pk]))
    assert response.status_code == 200 and "Agency" in response.content.decode()
