"""A user in several orgs picks the current one (``seoinsight.org_switch``), checked against their memberships.

Ana is a member of alpha and bravo, not of charlie; each org has a site and an import. Through Django's test
client: the header's switcher, the Imports pages and site pages of the org chosen, the admin's links into
another of her orgs (``?org=``, ``seoinsight.auth.org_link``), and what is refused.
"""

import re
from html import unescape

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from mailpoll.admin.display import import_badge
from seoinsight.auth import SESSION_ORG_KEY
from seoinsight.models import Membership
from tests.factories import ImportFactory, OrgFactory, SiteFactory, SiteTargetFactory, UserFactory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]


def build_org(org_id: str) -> dict:
    org = OrgFactory(id=org_id, name=f"{org_id.title()} Corp")
    site = SiteFactory(org=org, domain=f"{org_id}.example")
    target = SiteTargetFactory(site=site)
    imp = ImportFactory(site_target=target, filename=f"{org_id}-report.csv")
    return {"org": org, "site": site, "import": imp}


@pytest.fixture
def alpha():
    return build_org("alpha")


@pytest.fixture
def bravo():
    return build_org("bravo")


@pytest.fixture
def charlie():
    return build_org("charlie")


@pytest.fixture
def ana(client, alpha, bravo, charlie):
    user = UserFactory(username="ana", org=alpha["org"])
    Membership.objects.create(user=user, org=bravo["org"])
    client.force_login(user)
    return user


def shown_org(client) -> str:
    return client.get("/imports/").context["org"].pk


def reaches(client, world: dict) -> dict:
    """Status of the org's import page, its site page and its import's job (JSON) for ``client``."""
    imp = world["import"]
    return {
        "import": client.get(f"/imports/{imp.pk}/").status_code,
        "site": client.get(f"/imports/sites/{world['site'].pk}/").status_code,
        "job": client.get(f"/jobs/{imp.job_id}").status_code,
    }


def switch(client, org_id, next_url="/imports/"):
    return client.post("/org/", {"org": org_id, "next": next_url})


OPEN = {"import": 200, "site": 200, "job": 200}
CLOSED = {"import": 404, "site": 404, "job": 404}


def test_a_user_in_two_orgs_sees_the_first_then_switches_to_the_second(client, ana, alpha, bravo):
    assert shown_org(client) == "alpha"
    assert "alpha-report.csv" in client.get("/imports/").content.decode()
    assert reaches(client, alpha) == OPEN
    assert reaches(client, bravo) == CLOSED

    response = switch(client, "bravo")

    assert response.status_code == 302 and response["Location"] == "/imports/"
    assert client.session[SESSION_ORG_KEY] == "bravo"
    page = client.get("/imports/").content.decode()
    assert "bravo-report.csv" in page and "alpha-report.csv" not in page
    assert reaches(client, bravo) == OPEN
    assert reaches(client, alpha) == CLOSED


def test_the_header_offers_the_users_orgs_in_a_csrf_protected_form(client, ana):
    page = client.get("/imports/").content.decode()

    form = re.search(r'<form method="post" action="/org/" class="org-switch">(.*?)</form>', page, re.S)
    assert form, page
    assert 'name="csrfmiddlewaretoken"' in form[1]
    assert re.findall(r'<option value="(\w+)"', form[1]) == ["alpha", "bravo"]  # not charlie
    assert '<option value="alpha" selected>' in form[1]
    assert 'name="next" value="/imports/"' in form[1]


def test_a_user_in_one_org_gets_no_switcher(client, alpha):
    client.force_login(UserFactory(org=alpha["org"]))
    page = client.get("/imports/").content.decode()
    assert 'class="org-switch"' not in page
    assert "Alpha Corp" in page


def test_the_switch_needs_the_csrf_token(ana):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(ana)

    assert switch(strict, "bravo").status_code == 403
    assert shown_org(strict) == "alpha"

    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', strict.get("/imports/").content.decode())[1]
    assert strict.post("/org/", {"org": "bravo", "next": "/imports/", "csrfmiddlewaretoken": token}).status_code == 302
    assert shown_org(strict) == "bravo"


def test_an_org_the_user_is_not_in_is_refused(client, ana, charlie):
    switch(client, "bravo")

    response = switch(client, "charlie")

    assert response.status_code == 302 and response["Location"] == "/imports/"
    assert client.session[SESSION_ORG_KEY] == "bravo"
    page = client.get("/imports/").content.decode()
    assert "That organisation is not one of yours" in page
    assert reaches(client, charlie) == CLOSED
    for forged in ("", "nonexistent", "alpha' OR 1=1", "x" * 5000):
        assert switch(client, forged).status_code == 302
        assert client.session[SESSION_ORG_KEY] == "bravo"


def test_a_forged_session_value_is_ignored(client, ana, charlie):
    session = client.session
    session[SESSION_ORG_KEY] = "charlie"
    session.save()

    assert shown_org(client) == "alpha"
    assert reaches(client, charlie) == CLOSED
    assert SESSION_ORG_KEY not in client.session


def test_a_removed_membership_falls_back_at_the_next_request(client, ana, alpha, bravo):
    switch(client, "bravo")
    assert reaches(client, bravo) == OPEN

    Membership.objects.filter(user=ana, org_id="bravo").delete()

    assert reaches(client, bravo) == CLOSED
    assert shown_org(client) == "alpha"
    assert reaches(client, alpha) == OPEN
    assert 'class="org-switch"' not in client.get("/imports/").content.decode()  # one org left: nothing to pick


@pytest.mark.parametrize("next_url, landing", [
    ("/imports/?page=2", "/imports/?page=2"),
    ("/imports/?page=2&org=alpha", "/imports/?page=2"),  # the link's org would switch straight back
    ("https://evil.example/imports/", "/imports/"),
    ("//evil.example/imports/", "/imports/"),
    ("/\\evil.example/", "/imports/"),
    ("javascript:alert(1)", "/imports/"),
    ("imports/", "/imports/"),
    ("", "/imports/"),
    ("/no/such/page/", "/imports/"),
    ("http://testserver/imports/", "/imports/"),
])
def test_next_is_followed_only_to_a_page_of_this_site(client, ana, next_url, landing):
    response = switch(client, "bravo", next_url)
    assert response["Location"] == landing
    assert client.session[SESSION_ORG_KEY] == "bravo"


def test_switching_away_from_one_objects_page_lands_on_the_start_page(client, ana, alpha):
    for page in (f"/imports/{alpha['import'].pk}/", f"/imports/sites/{alpha['site'].pk}/?period=28d"):
        switch(client, "alpha")
        assert switch(client, "bravo", page)["Location"] == "/imports/"  # that page is alpha's: a 404 in bravo


def test_a_refused_switch_goes_back_to_the_page_it_came_from(client, ana, alpha):
    page = f"/imports/sites/{alpha['site'].pk}/"
    assert switch(client, "charlie", page)["Location"] == page


def test_the_switch_is_a_post_by_a_logged_in_user(client, alpha):
    assert client.get("/org/").status_code == 405
    response = client.post("/org/", {"org": "alpha"})
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


# -- the admin's links into another of the user's orgs ----------------------------------------------------------


def href(html) -> str:
    return unescape(re.search(r'href="([^"]+)"', str(html))[1])


def test_the_admins_links_open_the_object_in_its_org(client, ana, alpha, bravo):
    ana.is_staff = True
    ana.save()
    ana.user_permissions.set(Permission.objects.filter(codename__in=["view_site", "view_import"]))
    assert shown_org(client) == "alpha"

    admin_page = client.get(reverse("admin:seoinsight_site_changelist")).content.decode()
    site_link = unescape(re.search(rf'href="([^"]*/imports/sites/{bravo["site"].pk}/[^"]*)"', admin_page)[1])
    response = client.get(site_link)

    assert response.status_code == 200
    assert response.context["org"].pk == "bravo"
    assert shown_org(client) == "bravo"  # the org of what she opened stays the current one

    switch(client, "alpha")
    response = client.get(href(import_badge(bravo["import"])))
    assert response.status_code == 200 and response.context["imp"] == bravo["import"]
    assert client.get(f"/jobs/{bravo['import'].job_id}").status_code == 200  # the page's live progress


def test_a_link_into_an_org_the_user_is_not_in_is_still_a_404(client, ana, charlie):
    response = client.get(href(import_badge(charlie["import"])))

    assert response.status_code == 404
    assert shown_org(client) == "alpha"
    assert client.get(f"/imports/sites/{charlie['site'].pk}/?org=charlie").status_code == 404


def test_only_a_read_switches_by_link(client, ana, alpha):
    client.post("/imports/?org=bravo", {"site_target": "", "file": ""})
    assert shown_org(client) == "alpha"
