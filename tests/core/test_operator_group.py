"""The "Operator" group (seoinsight.operator_group): seeded as declared, kept in step with the admin's pages, and
enough for an org's staff member to run intake in the admin — for their own org only."""

import json

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import Group, Permission
from django.urls import reverse

from seoinsight import operator_group
from seoinsight.models import Site, SiteTarget
from seoinsight.orgscope import SuperuserOnlyAdmin
from tests.core.test_admin import KEY
from tests.factories import OrgFactory, SiteFactory, SiteTargetFactory, UserFactory
from tests.mailpoll.factories import MailboxFactory, MailRuleFactory

pytestmark = pytest.mark.django_db


def group_permissions() -> set[tuple[str, str]]:
    return set(Group.objects.get(name=operator_group.NAME).permissions
               .values_list("content_type__app_label", "codename"))


def test_the_migrations_seed_the_group_with_the_declared_permissions():
    assert group_permissions() == set(operator_group.codenames())


def test_every_declared_permission_exists():
    assert operator_group.sync(apps) == [], "GRANTED names a model or an action that does not exist"


def test_every_admin_page_is_granted_or_left_out_with_a_reason():
    with_admin = {model._meta.label_lower for model in admin.site._registry}
    granted, left_out = set(operator_group.GRANTED), set(operator_group.LEFT_OUT)

    assert with_admin - granted - left_out == set(), "decide: add it to GRANTED or to LEFT_OUT with the reason"
    assert granted & left_out == set()
    known = {model._meta.label_lower for model in apps.get_models()}
    assert (granted | left_out) - known == set(), "a label names no model"
    assert all(operator_group.LEFT_OUT.values())


def test_what_the_group_leaves_out_is_superuser_only_in_the_admin():
    """LEFT_OUT is a superuser's decision: its admins say so (not only the group), and nothing else is."""
    superuser_only = {model._meta.label_lower for model, model_admin in admin.site._registry.items()
                      if isinstance(model_admin, SuperuserOnlyAdmin)}

    assert set(operator_group.LEFT_OUT) - superuser_only == set(), "mix in seoinsight.orgscope.SuperuserOnlyAdmin"
    assert superuser_only - set(operator_group.LEFT_OUT) == set(), "add it to LEFT_OUT with the reason"


def test_sync_puts_the_group_back_as_declared_and_is_safe_to_run_again():
    group = Group.objects.get(name=operator_group.NAME)
    member = UserFactory()
    member.groups.add(group)
    group.permissions.add(Permission.objects.get(codename="delete_site"))
    group.permissions.remove(Permission.objects.get(codename="view_job"))

    assert operator_group.sync(apps) == []
    assert operator_group.sync(apps) == []

    assert group_permissions() == set(operator_group.codenames())
    assert list(member.groups.all()) == [group]
    assert Group.objects.filter(name=operator_group.NAME).count() == 1


def test_sync_creates_the_group_where_it_is_missing():
    Group.objects.filter(name=operator_group.NAME).delete()
    operator_group.sync(apps)
    assert group_permissions() == set(operator_group.codenames())


# -- an operator in the admin ------------------------------------------------------------------------------------


@pytest.fixture
def acme():
    org = OrgFactory(id="acme", name="Acme")
    target = SiteTargetFactory(site=SiteFactory(org=org, domain="acme.example"), search_console_property="sc-domain:acme.example")
    target.set_service_account(json.dumps(KEY))
    target.save()
    MailRuleFactory(org=org, name="acme-rule", site_target=target)
    MailboxFactory(org=org, name="acme-inbox", site_target=target)
    return org


@pytest.fixture
def rival():
    org = OrgFactory(id="rival", name="Rival")
    target = SiteTargetFactory(site=SiteFactory(org=org, domain="rival.example"))
    MailboxFactory(org=org, name="rival-inbox", site_target=target)
    return org


@pytest.fixture
def operator(client, acme):
    user = UserFactory(username="olga", is_staff=True, org=acme)
    user.groups.add(Group.objects.get(name=operator_group.NAME))
    client.force_login(user)
    return user


DAILY_LISTS = ["mailpoll_mailbox", "mailpoll_mailrule", "seoinsight_site", "seoinsight_sitetarget", "imports_import",
               "mailpoll_attachment", "mailpoll_postaction", "mailpoll_request", "jobs_job", "jobs_zombiejob",
               "imports_urlmetric", "outbox_entry"]


@pytest.mark.parametrize("name", DAILY_LISTS)
def test_an_operator_opens_every_list_of_the_day_and_sees_only_their_org(client, operator, rival, name):
    response = client.get(reverse(f"admin:{name}_changelist"))

    assert response.status_code == 200
    assert "rival" not in response.content.decode()


@pytest.mark.parametrize("name", ["mailpoll_mailbox", "mailpoll_mailrule", "seoinsight_site", "seoinsight_sitetarget"])
def test_an_operator_may_add_what_intake_needs(client, operator, name):
    assert client.get(reverse(f"admin:{name}_add")).status_code == 200


def test_an_operator_adds_a_site_and_schedules_a_target_of_their_org(client, operator, acme):
    added = client.post(reverse("admin:seoinsight_site_add"), {
        "org": acme.pk, "domain": "shop.acme.example", "aliases": "", "slug": "", "default_target": "",
        "targets-TOTAL_FORMS": "0", "targets-INITIAL_FORMS": "0"})
    assert added.status_code == 302
    assert Site.objects.filter(org=acme, domain="shop.acme.example").exists()

    target = SiteTarget.objects.get(site__domain="acme.example")
    changed = client.post(reverse("admin:seoinsight_sitetarget_change", args=[target.pk]), {
        "site": target.site_id, "url_prefix": target.url_prefix, "search_console_property": "sc-domain:acme.example",
        "service_account_key": "", "pull_schedule": "daily", "pull_days": "5"})
    assert changed.status_code == 302
    assert SiteTarget.objects.get(pk=target.pk).pull_schedule == "daily"


def test_another_orgs_rows_are_a_404_and_its_org_no_choice(client, operator, rival):
    foreign = SiteTarget.objects.get(site__org=rival)
    assert client.get(reverse("admin:seoinsight_site_change", args=[foreign.site_id])).status_code == 404
    assert client.get(reverse("admin:seoinsight_sitetarget_change", args=[foreign.pk])).status_code == 404

    refused = client.post(reverse("admin:seoinsight_site_add"), {
        "org": rival.pk, "domain": "planted.example", "aliases": "", "slug": "", "default_target": "",
        "targets-TOTAL_FORMS": "0", "targets-INITIAL_FORMS": "0"})
    assert refused.status_code == 200
    assert not Site.objects.filter(domain="planted.example").exists()


@pytest.mark.parametrize("url", [
    reverse("admin:auth_user_changelist"), reverse("admin:auth_group_changelist"),
    reverse("admin:seoinsight_org_changelist"), reverse("admin:seoinsight_membership_changelist"),
    reverse("admin:mailpoll_deploymentgrant_changelist"), reverse("admin:seoinsight_apitoken_changelist"),
])
def test_an_operator_does_not_reach_users_orgs_memberships_or_grants(client, operator, url):
    assert client.get(url).status_code == 403


def test_an_operator_deletes_nothing(client, operator):
    site = Site.objects.get(domain="acme.example")
    assert client.get(reverse("admin:seoinsight_site_delete", args=[site.pk])).status_code == 403


# -- the index ---------------------------------------------------------------------------------------------------


NO_PERMISSION_SENTENCE = "Ask a superuser to add you to the <strong>Operator</strong> group"


def test_a_staff_user_without_permissions_is_told_whom_to_ask(client, acme):
    client.force_login(UserFactory(is_staff=True, org=acme))

    index = client.get(reverse("admin:index")).content.decode()

    assert NO_PERMISSION_SENTENCE in index
    assert "have permission to view or edit anything" not in index


def test_an_operator_sees_their_apps_not_the_sentence(client, operator):
    index = client.get(reverse("admin:index")).content.decode()

    assert NO_PERMISSION_SENTENCE not in index
    assert reverse("admin:mailpoll_mailbox_changelist") in index
