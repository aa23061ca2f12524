"""The mailbox form refuses a deployment identity its org holds no grant of, before anything is saved.

Issue 19 item S: as a staff user of org A only, a keyless service mailbox for anybody's address (the operator's
CEO through the Workspace key, an HR director through the app-only app) was saved and then read. Driven through
the admin's add and change pages, logged in as that staff user.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from mailpoll.models import Mailbox
from tests.factories import OrgFactory, UserFactory
from tests.mailpoll.factories import MailboxFactory, grant_for

pytestmark = pytest.mark.django_db

ADD_URL = reverse("admin:mailpoll_mailbox_add")
TENANT = "contoso.test"


@pytest.fixture
def identities(settings, tmp_path):
    """Both deployment identities set, as on the attacked deployment."""
    key = tmp_path / "delegated.json"
    key.write_text("{}")  # the form only asks whether the setting is there
    settings.MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE = str(key)
    settings.MAILPOLL_MICROSOFT_CLIENT_ID = "deployment-app"
    settings.MAILPOLL_MICROSOFT_CLIENT_SECRET = "deployment-secret"
    settings.MAILPOLL_MICROSOFT_TENANT = TENANT


@pytest.fixture
def org_a():
    return OrgFactory(id="org-a")


@pytest.fixture
def staff(client, org_a):
    """A staff user of org A only, who may add and change mailboxes."""
    user = UserFactory(is_staff=True, org=org_a)
    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_mailbox", "add_mailbox",
                                                                       "change_mailbox"]))
    client.force_login(user)
    return client


def service_mailbox(org, provider="gmail", **overrides) -> dict:
    return {"org": org.pk, "name": "ceo", "enabled": "on", "provider": provider, "auth": "service",
            "username": "ceo@operator.example", "host": "", "port": "993", "security": "tls", "client_id": "", "tenant": "", "new_app_secret": "",
            "folders": "INBOX", "poll_interval": "120", "initial_mode": "full", "initial_since": "",
            "site_target": "", **overrides}


def refusal(response) -> str:
    """The username field's error on a page that was not saved."""
    assert response.status_code == 200, "the form was accepted"
    errors = response.context["adminform"].form.errors
    return " ".join(errors.get("username", [])) or f"no username error: {errors}"


def grant(org, provider, allowed, tenant=""):
    return grant_for(MailboxFactory.build(org=org, provider=provider, tenant=tenant, site_target=None), allowed=allowed)


@pytest.mark.parametrize("provider, remedy", [
    ("gmail", "bring the mailbox's own key"),
    ("graph", "bring the mailbox's own app (its client id and secret), or use OAuth (user consent) and Connect"),
])
def test_without_a_grant_org_staff_cannot_point_a_deployment_identity_at_any_address(staff, identities, org_a,
                                                                                      provider, remedy):
    response = staff.post(ADD_URL, service_mailbox(org_a, provider))

    error = refusal(response)
    assert "may not read 'ceo@operator.example': no superuser granted it to org org-a" in error
    assert remedy in error
    assert not Mailbox.objects.exists()


@pytest.mark.parametrize("provider, fields", [
    ("gmail", {}),
    ("graph", {"username": "hr-director@contoso.test"}),
])
def test_a_grant_for_other_addresses_refuses_this_one(staff, identities, org_a, provider, fields):
    grant(org_a, provider, ["client.example", "intake@contoso.test"], tenant=TENANT)

    response = staff.post(ADD_URL, service_mailbox(org_a, provider, **fields))

    error = refusal(response)
    assert "is not among the addresses and domains granted to org org-a" in error
    assert "ask a superuser to extend the grant" in error
    assert not Mailbox.objects.exists()


def test_a_microsoft_grant_covers_its_own_tenant_only(staff, identities, org_a):
    grant(org_a, "graph", ["fabrikam.test"], tenant="fabrikam.test")

    response = staff.post(ADD_URL, service_mailbox(org_a, "graph", username="hr-director@contoso.test"))

    assert "org org-a holds no grant of it for tenant contoso.test" in refusal(response)
    assert not Mailbox.objects.exists()


def test_another_orgs_grant_is_no_grant(staff, identities, org_a):
    grant(OrgFactory(id="org-b"), "gmail", ["operator.example"])

    response = staff.post(ADD_URL, service_mailbox(org_a))

    assert "no superuser granted it to org org-a" in refusal(response)


@pytest.mark.parametrize("username", ["ceo", "ceo@operator.example@client.example", "a%b@client.example",
                                      "ceo@client.example/../x"])
def test_a_username_that_is_no_plain_address_is_refused_whatever_the_grant(staff, identities, org_a, username):
    grant(org_a, "gmail", ["client.example"])

    response = staff.post(ADD_URL, service_mailbox(org_a, username=username))

    assert "a grant names mailboxes by address (name@domain) or domain" in refusal(response)


@pytest.mark.parametrize("provider, fields", [
    ("gmail", {"username": "Ana@Client.Example"}),  # a domain, any case
    ("graph", {"username": "intake@contoso.test"}),  # an address, in the grant's tenant
    ("graph", {"username": "intake@contoso.test", "tenant": "Contoso.Test"}),
])
def test_a_granted_address_is_saved(staff, identities, org_a, provider, fields):
    grant(org_a, provider, ["client.example", "intake@contoso.test"], tenant=TENANT)

    response = staff.post(ADD_URL, service_mailbox(org_a, provider, **fields))

    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Mailbox.objects.get().org_id == "org-a"


@pytest.mark.parametrize("provider, own", [
    ("gmail", {"new_app_secret": '{"client_email": "r@p.iam.gserviceaccount.com", "private_key": "k"}'}),
    ("graph", {"client_id": "orgs-own-app", "new_app_secret": "its-secret"}),
])
def test_an_org_that_brings_its_own_key_or_app_needs_no_grant(staff, identities, org_a, provider, own):
    response = staff.post(ADD_URL, service_mailbox(org_a, provider, **own))

    assert response.status_code == 302, response.context["adminform"].form.errors


def test_user_consent_needs_no_grant(staff, identities, org_a):
    response = staff.post(ADD_URL, service_mailbox(org_a, "graph", auth="oauth"))

    assert response.status_code == 302, response.context["adminform"].form.errors


def test_editing_a_mailbox_whose_grant_was_narrowed_asks_again(staff, identities, org_a):
    box = MailboxFactory(org=org_a, gmail_service=True, username="ana@client.example", granted=False,
                         initial_mode="full", site_target=None)
    grant(org_a, "gmail", ["other.example"])
    data = {**service_mailbox(org_a, username="ana@client.example", name="renamed"),
            "cursors-TOTAL_FORMS": "0", "cursors-INITIAL_FORMS": "0", "cursors-MIN_NUM_FORMS": "0",
            "cursors-MAX_NUM_FORMS": "0"}
    del data["org"]  # read-only on the change page

    response = staff.post(reverse("admin:mailpoll_mailbox_change", args=[box.pk]), data)

    assert "is not among the addresses and domains granted to org org-a" in refusal(response)
    box.refresh_from_db()
    assert box.name != "renamed"
