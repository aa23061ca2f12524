"""Deployment identity grants: the pure rules (tables), the superuser-only admin, and check mailpoll.W005."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.db import IntegrityError
from django.urls import reverse

from mailpoll.oauth import deployment_grants as grants
from mailpoll.grant_checks import check_deployment_identities_are_granted
from mailpoll.oauth.deployment_grants import ALLOWED, NO_GRANT, NOT_AN_ADDRESS, NOT_LISTED, OTHER_TENANT, Rule
from mailpoll.models import DeploymentGrant
from tests.factories import OrgFactory, UserFactory

GRANTS_URL = reverse("admin:mailpoll_deploymentgrant_changelist")
GRANT_ADD_URL = reverse("admin:mailpoll_deploymentgrant_add")

GOOGLE = [Rule("", ("client.example", "boss@operator.example"))]
MICROSOFT = [Rule("contoso.test", ("intake@contoso.test",)), Rule("fabrikam.test", ("fabrikam.test",))]


@pytest.mark.parametrize("rules, address, tenant, decision", [
    ([], "ana@client.example", "", NO_GRANT),
    (GOOGLE, "ana@client.example", "", ALLOWED),
    (GOOGLE, "ANA@Client.Example", "", ALLOWED),
    (GOOGLE, "boss@operator.example", "", ALLOWED),  # one address of a domain, not the domain
    (GOOGLE, "ceo@operator.example", "", NOT_LISTED),
    (GOOGLE, "ana@eu.client.example", "", NOT_LISTED),  # a subdomain is listed on its own
    (GOOGLE, "ana@client.example.attacker.example", "", NOT_LISTED),
    (GOOGLE, "client.example", "", NOT_AN_ADDRESS),
    (GOOGLE, "ceo@operator.example@client.example", "", NOT_AN_ADDRESS),
    (GOOGLE, "ceo%operator.example@client.example", "", NOT_AN_ADDRESS),
    (GOOGLE, "ana@client.example/../../users/ceo@operator.example", "", NOT_AN_ADDRESS),
    (GOOGLE, "ana@client.example?x=1", "", NOT_AN_ADDRESS),
    (GOOGLE, '"ceo"@client.example', "", NOT_AN_ADDRESS),
    (GOOGLE, "ana@clïent.example", "", NOT_AN_ADDRESS),
    (GOOGLE, "9a1c2b3d-0000-4000-8000-000000000000", "", NOT_AN_ADDRESS),  # a Graph object id names nobody's domain
    (GOOGLE, "", "", NOT_AN_ADDRESS),
    (GOOGLE, " ana@client.example", "", NOT_AN_ADDRESS),  # the subject is sent as written
    (MICROSOFT, "intake@contoso.test", "contoso.test", ALLOWED),
    (MICROSOFT, "intake@contoso.test", "Contoso.Test", ALLOWED),
    (MICROSOFT, "hr-director@contoso.test", "contoso.test", NOT_LISTED),
    (MICROSOFT, "intake@contoso.test", "fabrikam.test", NOT_LISTED),  # that tenant's grant lists other mailboxes
    (MICROSOFT, "anyone@fabrikam.test", "fabrikam.test", ALLOWED),
    (MICROSOFT, "intake@contoso.test", "northwind.test", OTHER_TENANT),
    (MICROSOFT, "intake@contoso.test", "", OTHER_TENANT),
])
def test_decide(rules, address, tenant, decision):
    assert grants.decide(rules, address, tenant) == decision


@pytest.mark.parametrize("provider, auth, own_key, own_client_id, identity", [
    ("gmail", "service", False, False, "google_service_account"),
    ("gmail", "service", True, False, ""),
    ("gmail", "oauth", False, False, ""),
    ("graph", "service", False, False, "microsoft_app"),
    ("graph", "service", False, True, ""),
    ("graph", "oauth", False, False, ""),
    ("imap", "password", False, False, ""),
    ("imap", "oauth", False, False, ""),
])
def test_identity_of(provider, auth, own_key, own_client_id, identity):
    assert grants.identity_of(provider, auth, own_key=own_key, own_client_id=own_client_id) == identity


@pytest.mark.parametrize("text, entries", [
    ("client.example", ["client.example"]),
    ("Client.Example,  hr@Contoso.test\nclient.example\n", ["client.example", "hr@contoso.test"]),
    ("", []),
])
def test_parse_allowed(text, entries):
    assert grants.parse_allowed(text) == entries


@pytest.mark.parametrize("text", ["*", "*.client.example", "@client.example", "a@b@c.example", "localhost",
                                  "client.example/", "https://client.example", "clïent.example"])
def test_parse_allowed_refuses_what_names_no_address_or_domain(text):
    with pytest.raises(ValueError, match="is neither a mailbox address"):
        grants.parse_allowed(text)


# -- the database ---------------------------------------------------------------------------------------------------

@pytest.mark.django_db
@pytest.mark.parametrize("identity, tenant", [("google_service_account", "contoso.test"), ("microsoft_app", ""),
                                              ("anyone", "")])
def test_the_database_refuses_a_grant_whose_tenant_does_not_fit_its_identity(identity, tenant):
    with pytest.raises(IntegrityError):
        DeploymentGrant.objects.create(org=OrgFactory(), identity=identity, tenant=tenant, allowed=["client.example"])


# -- the admin: superusers only --------------------------------------------------------------------------------------

@pytest.fixture
def staff_of_a(client):
    """A staff user of org A with every permission on grants Django knows: still no way in."""
    org = OrgFactory(id="org-a")
    user = UserFactory(is_staff=True, org=org)
    user.user_permissions.add(*Permission.objects.filter(content_type__model="deploymentgrant"),
                              Permission.objects.get(codename="view_mailbox"))
    client.force_login(user)
    DeploymentGrant.objects.create(org=org, identity="google_service_account", allowed=["client.example"],
                                   note="contract 7")
    return client


@pytest.mark.django_db
def test_org_staff_see_no_grants_at_all(staff_of_a):
    grant = DeploymentGrant.objects.get()
    pages = [GRANTS_URL, GRANT_ADD_URL, reverse("admin:mailpoll_deploymentgrant_change", args=[grant.pk]),
             reverse("admin:mailpoll_deploymentgrant_delete", args=[grant.pk]),
             reverse("admin:mailpoll_deploymentgrant_history", args=[grant.pk])]

    assert [staff_of_a.get(url).status_code for url in pages] == [403] * len(pages)
    index = staff_of_a.get(reverse("admin:index")).content.decode()
    app = staff_of_a.get(reverse("admin:app_list", args=["mailpoll"])).content.decode()
    assert "Mailboxes" in app and "eployment grant" not in index + app
    posted = staff_of_a.post(GRANT_ADD_URL, {"org": "org-a", "identity": "google_service_account",
                                              "allowed": "operator.example"})
    assert posted.status_code == 403 and DeploymentGrant.objects.count() == 1


@pytest.mark.django_db
def test_a_superuser_grants_an_identity_to_an_org(admin_client):
    org = OrgFactory(id="org-a")

    response = admin_client.post(GRANT_ADD_URL, {"org": org.pk, "identity": "microsoft_app",
                                                 "tenant": " Contoso.Test ", "allowed": "Intake@contoso.test\n"
                                                 "reports.contoso.test", "note": "ticket 12"})

    assert response.status_code == 302, response.context["adminform"].form.errors
    grant = DeploymentGrant.objects.get()
    assert (grant.org_id, grant.tenant, grant.allowed) == ("org-a", "contoso.test",
                                                           ["intake@contoso.test", "reports.contoso.test"])
    listing = admin_client.get(GRANTS_URL).content.decode()
    assert "intake@contoso.test, reports.contoso.test" in listing


@pytest.mark.django_db
@pytest.mark.parametrize("fields, field, message", [
    ({"identity": "microsoft_app", "tenant": ""}, "tenant", "needs the tenant's own id or domain"),
    ({"identity": "microsoft_app", "tenant": "organizations"}, "tenant", "needs the tenant's own id or domain"),
    ({"identity": "google_service_account", "tenant": "contoso.test"}, "tenant", "A tenant is Microsoft's only"),
    ({"allowed": "*"}, "allowed", "is neither a mailbox address"),
    ({"allowed": " \n"}, "allowed", "List at least one address or domain"),
])
def test_the_grant_form_refuses_what_would_mean_more_than_it_says(admin_client, fields, field, message):
    data = {"org": OrgFactory().pk, "identity": "google_service_account", "tenant": "", "allowed": "client.example",
            **fields}

    response = admin_client.post(GRANT_ADD_URL, data)

    assert response.status_code == 200 and not DeploymentGrant.objects.exists()
    assert any(message in error for error in response.context["adminform"].form.errors.get(field, []))


# -- check mailpoll.W005 ---------------------------------------------------------------------------------------------

@pytest.fixture
def microsoft_app(settings):
    settings.MAILPOLL_MICROSOFT_CLIENT_ID, settings.MAILPOLL_MICROSOFT_CLIENT_SECRET = "app", "secret"


@pytest.mark.django_db
def test_a_deployment_identity_no_org_was_granted_is_named_when_several_orgs_exist(settings, tmp_path):
    settings.MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE = str(tmp_path / "key.json")
    OrgFactory(), OrgFactory()

    (warning,) = check_deployment_identities_are_granted(databases=["default"])

    assert warning.id == "mailpoll.W005"
    assert warning.msg.startswith("MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE is set, but no org holds a grant")


@pytest.mark.django_db
def test_w005_names_each_identity_set_and_ungranted(microsoft_app, settings, tmp_path):
    settings.MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE = str(tmp_path / "key.json")
    org, _ = OrgFactory(), OrgFactory()
    DeploymentGrant.objects.create(org=org, identity="google_service_account", allowed=["client.example"])

    (warning,) = check_deployment_identities_are_granted(databases=["default"])

    assert warning.msg.startswith("MAILPOLL_MICROSOFT_CLIENT_ID and MAILPOLL_MICROSOFT_CLIENT_SECRET are set")


@pytest.mark.django_db
@pytest.mark.parametrize("orgs, granted", [(1, False), (2, True)])
def test_w005_is_quiet_with_one_org_or_a_grant(microsoft_app, orgs, granted):
    made = [OrgFactory() for _ in range(orgs)]
    if granted:
        DeploymentGrant.objects.create(org=made[0], identity="microsoft_app", tenant="contoso.test",
                                       allowed=["contoso.test"])
    assert check_deployment_identities_are_granted(databases=["default"]) == []


@pytest.mark.django_db
def test_w005_is_quiet_without_a_deployment_identity():
    OrgFactory(), OrgFactory()
    assert check_deployment_identities_are_granted(databases=["default"]) == []


@pytest.mark.django_db
def test_check_names_a_saved_mailbox_its_grant_no_longer_covers(settings, tmp_path, microsoft_app):
    from mailpoll.checks import check_mailboxes_can_authenticate
    from tests.mailpoll.factories import MailboxFactory

    key = tmp_path / "key.json"
    key.write_text("{}")
    settings.MAILPOLL_GOOGLE_SERVICE_ACCOUNT_FILE = str(key)
    settings.MAILPOLL_MICROSOFT_TENANT = "contoso.test"
    gmail = MailboxFactory(gmail_service=True, username="ceo@operator.example", granted=False)
    graph = MailboxFactory(provider="graph", auth="service", host="", security="tls",
                           username="hr-director@contoso.test", granted=False)

    warnings = check_mailboxes_can_authenticate(databases=["default"])

    assert [(w.id, w.obj) for w in warnings] == [("mailpoll.W004", gmail), ("mailpoll.W004", graph)]
    assert "may not read 'ceo@operator.example': no superuser granted it to org" in warnings[0].msg
    assert "may not read 'hr-director@contoso.test': no superuser granted it to org" in warnings[1].msg
