"""Whose data is stale (imports.stale_sites): each site of the user's orgs with its newest data on the admin's
index, stale ones first, in one statement, scoped by org."""

from datetime import date, timedelta

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.urls import reverse

from imports import stale_sites
from imports.models import UrlMetric
from seoinsight.models import Membership
from tests.factories import OrgFactory, SiteFactory, SiteTargetFactory, UserFactory

pytestmark = pytest.mark.django_db


def today() -> date:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_date")
        return cursor.fetchone()[0]


def site_with_data(org, domain, *ages):
    """A site of ``org`` with one target per age: a metric whose period ends ``age`` days ago (None: no metric)."""
    site = SiteFactory(org=org, domain=domain)
    for age in ages:
        target = SiteTargetFactory(site=site)
        if age is not None:
            end = today() - timedelta(days=age)
            UrlMetric.objects.create(site_target=target, url=f"https://{domain}/", url_normalized=f"{domain}/",
                                     period_start=end - timedelta(days=6), period_end=end)
    return site


@pytest.fixture
def acme():
    org = OrgFactory(id="acme")
    site_with_data(org, "fresh.example", 2, 40)  # its newest target counts
    site_with_data(org, "late.example", 9)
    site_with_data(org, "older.example", 30)
    site_with_data(org, "empty.example", None)
    SiteFactory(org=org, domain="bare.example")  # no target at all
    return org


@pytest.fixture
def rival():
    org = OrgFactory(id="rival")
    site_with_data(org, "rival.example", 100)
    return org


def staff_of(org, *codenames):
    user = UserFactory(is_staff=True, org=org)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return user


def orgs_of(user):
    return Membership.objects.filter(user_id=user.pk).values("org_id")


def test_stale_sites_come_first_the_oldest_first_in_one_statement(acme, rival, django_assert_num_queries):
    orgs = orgs_of(staff_of(acme))
    with django_assert_num_queries(1):
        rows, sites, stale = stale_sites.newest_per_site(orgs, stale_after=7)

    assert [(domain, age) for _, domain, _, _, age in rows] == [
        ("bare.example", None), ("empty.example", None), ("older.example", 30), ("late.example", 9),
        ("fresh.example", 2)]
    assert (sites, stale) == (5, 4)


@pytest.mark.parametrize("stale_after, stale", [(1, 5), (9, 3), (29, 3), (30, 2), (1000, 2)])
def test_a_site_is_stale_when_its_newest_data_is_older_than_the_setting(acme, stale_after, stale):
    assert stale_sites.newest_per_site(None, stale_after)[2] == stale


def test_the_lines_past_the_limit_are_counted(acme):
    rows, sites, stale = stale_sites.newest_per_site(None, 7, limit=2)
    assert ([row[1] for row in rows], sites, stale) == (["bare.example", "empty.example"], 5, 4)


def test_the_index_lists_the_members_sites_stale_first_and_nothing_of_another_org(client, acme, rival, settings):
    settings.IMPORT_STALE_AFTER_DAYS = 7
    client.force_login(staff_of(acme, "view_site"))

    index = client.get(reverse("admin:index")).content.decode()

    assert 'data-queue="sites whose data is stale"' in index
    assert "<strong>4</strong>" in index  # the Waiting-for-you count: the stale sites
    listing = index.split('data-listing="sites whose data is stale"', 1)[1].split("</table>", 1)[0]
    assert "Newest data per site (stale: older than 7 days)" in listing
    lines = [line for line in listing.splitlines() if line.startswith("<tr")]
    assert [('class="late"' in line, domain) for line in lines
            for domain in ["bare", "empty", "older", "late", "fresh"] if f">{domain}.example<" in line] == [
        (True, "bare"), (True, "empty"), (True, "older"), (True, "late"), (False, "fresh")]
    assert f"acme · newest data {(today() - timedelta(days=9)).isoformat()}, 9 days ago" in listing
    assert "acme · no data yet" in listing
    assert "rival" not in index


def test_the_threshold_is_the_setting(client, acme, settings):
    settings.IMPORT_STALE_AFTER_DAYS = 30
    client.force_login(staff_of(acme, "view_site"))

    index = client.get(reverse("admin:index")).content.decode()

    assert "(stale: older than 30 days)" in index and "<strong>2</strong>" in index


def test_a_superuser_sees_every_org_and_a_user_who_may_not_view_sites_sees_nothing(client, admin_client, acme,
                                                                                     rival):
    assert "rival.example" in admin_client.get(reverse("admin:index")).content.decode()

    client.force_login(staff_of(acme, "view_mailbox"))
    assert "sites whose data is stale" not in client.get(reverse("admin:index")).content.decode()


def test_a_line_links_to_its_site(client, acme):
    client.force_login(staff_of(acme, "view_site"))
    site = acme.sites.get(domain="late.example")
    assert f'<a href="{reverse("admin:seoinsight_site_change", args=[site.pk])}">late.example</a>' in client.get(
        reverse("admin:index")).content.decode()
