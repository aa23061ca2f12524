"""Sites and their hosts: domains normalised or refused, aliases, one site per host in an org, URL prefixes on
the site's hosts, what a form says when a constraint refuses, and the migration that tidies stored domains."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.db import IntegrityError, transaction
from django.urls import reverse

from seoinsight.admin import SiteTargetForm
from seoinsight.models import Site, SiteHost, SiteTarget
from seoinsight.sites import (
    normalise_domain,
    prefix_problem,
    site_for_host,
    site_for_urls,
    site_hosts,
)
from tests.factories import OrgFactory, SiteFactory, SiteTargetFactory, UserFactory

db = pytest.mark.django_db


# -- normalise_domain, pure ---------------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("example.com", ("example.com", None)),
    ("  Example.COM  ", ("example.com", None)),
    ("example.com.", ("example.com", None)),
    ("https://example.com/", ("example.com", None)),
    ("http://example.com:8080/shop/?q=1#top", ("example.com", None)),
    ("example.com:443", ("example.com", None)),
    ("//example.com/a", ("example.com", None)),
    ("https://www.X.co.uk/", ("x.co.uk", "www.x.co.uk")),
    ("WWW.example.com.", ("example.com", "www.example.com")),
    ("shop.x.co.uk", ("shop.x.co.uk", None)),       # only www. is taken off
    ("x.co.uk", ("x.co.uk", None)),                 # no public-suffix list: nothing else is touched
    ("www.com", ("www.com", None)),                 # www. stays when what remains has no dot
    ("www2.example.com", ("www2.example.com", None)),
    ("bücher.de", ("xn--bcher-kva.de", None)),      # IDNA to its ASCII form
    ("https://www.BÜCHER.de/", ("xn--bcher-kva.de", "www.xn--bcher-kva.de")),
    ("faß.de", ("fass.de", None)),                  # IDNA 2003, as imports.urlnorm spells URLs' hosts
    ("xn--bcher-kva.de", ("xn--bcher-kva.de", None)),
    ("sc-domain:Example.com", ("example.com", None)),  # a Search Console domain property names the domain
    ("my-shop.example", ("my-shop.example", None)),
])
def test_normalise_domain(text, expected):
    assert normalise_domain(text) == expected


@pytest.mark.parametrize("text, message", [
    ("", "Enter a domain"),
    ("https://", "Enter a domain"),
    ("exa mple.com", "has a space"),
    ("localhost", '"localhost" is a single name, not a domain'),
    ("http://localhost:8000/", '"localhost" is a single name'),
    ("intranet", "single name"),
    ("127.0.0.1", "127.0.0.1 is an IP address"),
    ("http://10.0.0.5:8080/", "10.0.0.5 is an IP address"),
    ("[::1]", "is an IP address"),
    ("2001:db8::1", "is an IP address"),
    ("ftp://example.com", "Not a web address (ftp:)"),
    ("mailto:seo@example.com", "Not a web address (mailto:)"),
    ("https:example.com", "Write https:// with its two slashes"),
    ("https://user:pw@example.com/", "Leave out the user name"),
    ("example.com:http", '"http" is not a port number'),
    ("*.example.com", '"*" cannot be part of a domain'),
    ("my_site.example.com", '"my_site" cannot be part of a domain'),
    ("-shop.example.com", '"-shop" cannot be part of a domain'),
    ("example..com", "has an empty part between dots"),
    ("a" * 64 + ".com", "at most 63 characters"),
    (".".join(["a" * 60] * 5), "at most 253 characters"),
    ("example.123", "ends in a number"),
])
def test_what_is_not_a_host_name_is_refused_with_a_plain_message(text, message):
    with pytest.raises(ValueError) as refused:
        normalise_domain(text)
    assert message in str(refused.value)


# -- the URL-prefix rule, pure ------------------------------------------------------------------------------

HOSTS = {"x.co.uk", "www.x.co.uk"}


@pytest.mark.parametrize("prefix, confirmed, message", [
    ("", False, None),                                  # no prefix: the target goes by its property
    ("https://x.co.uk/", False, None),
    ("http://WWW.X.co.uk:8080/blog/", False, None),     # any spelling of an alias, any port
    ("https://shop.x.co.uk/", False, "shop.x.co.uk is not one of this site's hosts (www.x.co.uk, x.co.uk)"),
    ("https://other.example/", False, "tick “Use this prefix anyway”"),
    ("https://other.example/", True, None),             # the operator confirmed another host
    ("x.co.uk/blog/", False, "with https:// or http://, e.g. https://x.co.uk/"),
    ("x.co.uk/blog/", True, "with https:// or http://"),  # not a URL: no confirming that
    ("ftp://x.co.uk/", True, "with https:// or http://"),
    ("https://user@x.co.uk/", True, "no usable host. Leave out the user name"),
    ("https:///blog/", True, "no usable host"),
])
def test_prefix_problem(prefix, confirmed, message):
    problem = prefix_problem(prefix, HOSTS, confirmed=confirmed)
    if message is None:
        assert problem is None
    else:
        assert message in problem


# -- hosts in the database ----------------------------------------------------------------------------------


@db
def test_every_host_of_a_site_is_a_row_that_follows_its_domain_aliases_and_org():
    site = SiteFactory(domain="x.co.uk", aliases=["www.x.co.uk"])
    assert set(site.hosts.values_list("host", flat=True)) == site_hosts(site) == {"x.co.uk", "www.x.co.uk"}

    site.domain, site.aliases, site.org = "y.co.uk", ["shop.y.co.uk"], OrgFactory()
    site.save()

    assert set(SiteHost.objects.values_list("org_id", "host")) == {(site.org_id, "y.co.uk"),
                                                                   (site.org_id, "shop.y.co.uk")}


@db
def test_the_database_refuses_a_host_of_two_sites_of_one_org_whichever_field_holds_it():
    first = SiteFactory(domain="x.co.uk", aliases=["www.x.co.uk"])
    for clash in ({"domain": "www.x.co.uk"}, {"domain": "y.co.uk", "aliases": ["x.co.uk"]}):
        with pytest.raises(IntegrityError, match="sitehost_org_host_unique"), transaction.atomic():
            SiteFactory(org=first.org, **clash)

    other_org = SiteFactory(domain="x.co.uk", aliases=["www.x.co.uk"])  # another org may have the same hosts
    assert other_org.hosts.count() == 2


@db
def test_site_for_host_finds_the_site_by_domain_or_alias_within_the_org_only():
    site = SiteFactory(domain="x.co.uk", aliases=["www.x.co.uk"])
    SiteFactory(domain="y.example")
    org = site.org_id

    assert site_for_host(org, "x.co.uk") == site
    assert site_for_host(org, "https://WWW.X.co.uk:443/a") == site
    assert site_for_host(org, "shop.x.co.uk") is None
    assert site_for_host(org, "y.example") is None        # another org's site
    assert site_for_host(org, "not a host") is None
    assert site_for_host("no-such-org", "x.co.uk") is None


@db
def test_site_for_urls_is_the_site_most_urls_are_on():
    shop = SiteFactory(domain="shop.example", aliases=["www.shop.example"])
    blog = SiteFactory(org=shop.org, domain="blog.example")
    SiteFactory(domain="elsewhere.example")  # another org's: its URLs count for nothing here
    urls = ["https://blog.example/a", "https://blog.example/b", "https://shop.example/a",
            "https://www.shop.example/b", "https://WWW.shop.example/c?x=1", "https://elsewhere.example/a",
            "https://elsewhere.example/b", "https://elsewhere.example/c", "not a url", ""]

    assert site_for_urls(shop.org_id, urls) == shop
    assert site_for_urls(shop.org_id, urls[:2]) == blog
    assert site_for_urls(shop.org_id, ["https://blog.example/", "https://shop.example/"]) == shop  # tie: older
    assert site_for_urls(shop.org_id, ["https://elsewhere.example/", "nothing"]) is None
    assert site_for_urls(shop.org_id, []) is None


# -- the site form ------------------------------------------------------------------------------------------


def site_form(org, domain, aliases="", targets=(), **extra) -> dict:
    """The site admin's POST: the site and new inline targets, each (url_prefix, property, confirmed)."""
    data = {"org": org.pk, "domain": domain, "aliases": aliases, "slug": "", "default_target": "",
            "targets-TOTAL_FORMS": str(len(targets)), "targets-INITIAL_FORMS": "0", **extra}
    for index, (prefix, prop, confirmed) in enumerate(targets):
        data.update({f"targets-{index}-url_prefix": prefix, f"targets-{index}-search_console_property": prop})
        if confirmed:
            data[f"targets-{index}-use_prefix_anyway"] = "on"
    return data


def add_site(client, data):
    return client.post(reverse("admin:seoinsight_site_add"), data)


def form_errors(response) -> dict:
    return response.context["adminform"].form.errors


def inline_errors(response) -> list:
    return [form.errors for formset in response.context["inline_admin_formsets"] for form in formset.formset]


@db
def test_the_site_form_stores_a_domain_normalised_with_its_www_alias(admin_client):
    org = OrgFactory()

    response = add_site(admin_client, site_form(org, "https://www.X.co.uk/shop", "Shop.X.co.uk, www.x.co.uk"))

    assert response.status_code == 302
    site = Site.objects.get(org=org)
    assert (site.domain, site.aliases) == ("x.co.uk", ["www.x.co.uk", "shop.x.co.uk"])
    page = admin_client.get(reverse("admin:seoinsight_site_change", args=[site.pk])).content.decode()
    assert "shop.x.co.uk, www.x.co.uk, x.co.uk" in page  # the site's hosts
    found = admin_client.get(reverse("admin:seoinsight_site_changelist"), {"q": "shop.x.co.uk"})
    assert list(found.context["cl"].queryset) == [site]


@db
@pytest.mark.parametrize("domain, aliases, field, message", [
    ("localhost", "", "domain", '"localhost" is a single name, not a domain'),
    ("192.168.1.10", "", "domain", "is an IP address"),
    ("example.com", "shop example.com", "aliases", '"shop" is a single name'),
    ("example.com", "ftp://files.example.com", "aliases", 'Alias "ftp://files.example.com": Not a web address'),
])
def test_the_site_form_refuses_what_is_not_a_host_name(admin_client, domain, aliases, field, message):
    response = add_site(admin_client, site_form(OrgFactory(), domain, aliases))

    assert response.status_code == 200
    assert message in " ".join(form_errors(response)[field])
    assert not Site.objects.exists()


@db
def test_the_site_form_names_the_site_that_has_a_host_already(admin_client):
    taken = SiteFactory(domain="x.co.uk", aliases=["shop.x.co.uk"])

    by_domain = add_site(admin_client, site_form(taken.org, "https://x.co.uk/"))
    by_alias = add_site(admin_client, site_form(taken.org, "y.co.uk", "SHOP.x.co.uk"))
    other_org = add_site(admin_client, site_form(OrgFactory(), "x.co.uk", "shop.x.co.uk"))

    assert form_errors(by_domain)["domain"] == ["x.co.uk is already a host of the site x.co.uk."]
    assert form_errors(by_alias)["aliases"] == ["shop.x.co.uk is already a host of the site x.co.uk."]
    assert other_org.status_code == 302


@db
def test_an_inline_target_on_another_host_needs_the_confirmation(admin_client):
    org = OrgFactory()
    off_host = [("https://staging.example/", "", False)]

    refused = add_site(admin_client, site_form(org, "x.co.uk", targets=off_host))
    assert refused.status_code == 200
    assert "staging.example is not one of this site's hosts (x.co.uk)" in str(inline_errors(refused))

    confirmed = add_site(admin_client, site_form(org, "x.co.uk", targets=[("https://staging.example/", "", True)]))
    assert confirmed.status_code == 302
    assert SiteTarget.objects.get().url_prefix == "https://staging.example/"


@db
def test_an_inline_target_may_use_an_alias_typed_in_the_same_save(admin_client):
    org = OrgFactory()

    response = add_site(admin_client, site_form(org, "https://www.x.co.uk/", "shop.x.co.uk",
                                                targets=[("https://www.x.co.uk/", "", False),
                                                         ("https://shop.x.co.uk/", "", False)]))

    assert response.status_code == 302
    assert set(SiteTarget.objects.values_list("url_prefix", flat=True)) == {"https://www.x.co.uk/",
                                                                            "https://shop.x.co.uk/"}


def change_site(client, site, target, **inline):
    """The site's page saved with its one stored target, that target's fields as in ``inline``."""
    row = {"url_prefix": target.url_prefix, "search_console_property": target.search_console_property, **inline}
    data = site_form(site.org, site.domain, slug="xco", **{
        "targets-TOTAL_FORMS": "1", "targets-INITIAL_FORMS": "1", "targets-0-id": str(target.pk),
        "targets-0-site": str(site.pk), **{f"targets-0-{name}": value for name, value in row.items()}})
    return client.post(reverse("admin:seoinsight_site_change", args=[site.pk]), data)


@db
def test_a_stored_target_on_another_host_does_not_stop_the_sites_page_from_saving(admin_client):
    target = SiteTargetFactory(site__domain="x.co.uk", url_prefix="https://legacy.example/")

    response = change_site(admin_client, target.site, target)

    assert response.status_code == 302
    assert Site.objects.get(pk=target.site_id).slug == "xco"


@db
def test_an_inline_target_with_neither_prefix_nor_property_gets_a_human_message(admin_client):
    target = SiteTargetFactory(site__domain="x.co.uk")

    response = change_site(admin_client, target.site, target, url_prefix="", search_console_property="")

    assert response.status_code == 200
    assert inline_errors(response)[0]["__all__"] == ["Give a URL prefix or a Search Console property (or both)."]
    assert SiteTarget.objects.get(pk=target.pk).url_prefix == "https://x.co.uk/"


# -- the site-target form -----------------------------------------------------------------------------------


def target_form(site, url_prefix, confirmed=False, **data) -> SiteTargetForm:
    fields = {"site": site.pk, "url_prefix": url_prefix, "search_console_property": "", "service_account_key": "",
              **data}
    if confirmed:
        fields["use_prefix_anyway"] = "on"
    return SiteTargetForm(fields)


@db
def test_the_target_form_wants_a_prefix_on_the_sites_hosts_or_a_confirmation():
    site = SiteFactory(domain="x.co.uk", aliases=["www.x.co.uk"])

    assert target_form(site, "https://www.x.co.uk/blog/").is_valid()
    refused = target_form(site, "https://y.co.uk/")
    assert not refused.is_valid()
    assert refused.errors["url_prefix"] == [
        "y.co.uk is not one of this site's hosts (www.x.co.uk, x.co.uk): correct the prefix, add y.co.uk to the "
        "site's aliases, or tick “Use this prefix anyway”."]
    confirmed = target_form(site, "https://y.co.uk/", confirmed=True)
    assert confirmed.is_valid()
    assert confirmed.save().url_prefix == "https://y.co.uk/"
    no_scheme = target_form(site, "x.co.uk/blog/", confirmed=True)
    assert not no_scheme.is_valid()
    assert "with https:// or http://" in no_scheme.errors["url_prefix"][0]


@db
def test_moving_a_target_to_another_site_checks_its_prefix_against_that_site():
    target = SiteTargetFactory(site__domain="x.co.uk")
    elsewhere = SiteFactory(org=target.site.org, domain="y.co.uk")

    form = SiteTargetForm({"site": elsewhere.pk, "url_prefix": target.url_prefix, "search_console_property": "",
                           "service_account_key": ""}, instance=target)

    assert not form.is_valid()
    assert "x.co.uk is not one of this site's hosts (y.co.uk)" in form.errors["url_prefix"][0]


@db
def test_a_check_constraint_speaks_plainly_through_the_target_form():
    form = target_form(SiteFactory(), "")

    assert not form.is_valid()
    assert form.non_field_errors() == ["Give a URL prefix or a Search Console property (or both)."]
    assert "is violated" not in str(form.errors)


@db
def test_a_unique_constraint_of_the_core_speaks_plainly_through_the_admin(admin_client):
    site = SiteFactory()
    member = UserFactory(org=site.org)

    response = admin_client.post(reverse("admin:seoinsight_membership_add"), {"user": member.pk, "org": site.org_id})

    assert response.context["adminform"].form.non_field_errors() == ["This user is already a member of this org."]


# -- the migration: stored domains normalised where safe ----------------------------------------------------


@db
def test_the_migration_normalises_stored_domains_where_safe_and_reports_the_rest(capsys):
    org, other_org = OrgFactory(id="acme"), OrgFactory(id="rival")
    # Rows as the admin stored them before the rule (the ORM does not clean; the trigger files their hosts).
    odd = {name: Site.objects.create(org=org, domain=domain) for name, domain in [
        ("url", "https://www.Shop.example/products/"),
        ("taken", "HTTP://Blog.example:8080"),      # normalises to another site's domain: stays
        ("holder", "blog.example"),
        ("www_taken", "https://www.news.example/"),  # its apex is free, its www. host another site's alias
        ("www_holder", "news-old.example"),
        ("bad", "localhost"),
        ("idn", "Bücher.example."),
    ]}
    Site.objects.filter(pk=odd["www_holder"].pk).update(aliases=["www.news.example"])
    twin = Site.objects.create(org=other_org, domain="shop.example")  # another org's: no clash

    migration = importlib.import_module("seoinsight.migrations.0005_site_hosts")
    migration.normalise_site_domains(apps, None)

    stored = {name: Site.objects.values_list("domain", "aliases").get(pk=site.pk) for name, site in odd.items()}
    assert stored == {
        "url": ("shop.example", ["www.shop.example"]),
        "taken": ("HTTP://Blog.example:8080", []),
        "holder": ("blog.example", []),
        "www_taken": ("news.example", []),
        "www_holder": ("news-old.example", ["www.news.example"]),
        "bad": ("localhost", []),
        "idn": ("xn--bcher-kva.example", []),
    }
    assert set(twin.hosts.values_list("host", flat=True)) == {"shop.example"}
    assert set(odd["url"].hosts.values_list("host", flat=True)) == {"shop.example", "www.shop.example"}
    report = capsys.readouterr().out
    taken, www_taken, bad = odd["taken"].pk, odd["www_taken"].pk, odd["bad"].pk
    assert (f"site {taken} 'HTTP://Blog.example:8080' of org 'acme': left as is: blog.example is already a host "
            "of the site 'blog.example'") in report
    assert (f"site {www_taken} 'https://www.news.example/' of org 'acme': domain made news.example, without the alias "
            "www.news.example: that is a host of the site 'news-old.example'") in report
    assert f"site {bad} 'localhost' of org 'acme': left as is: \"localhost\" is a single name" in report
    assert report.count("seoinsight.0005") == 3
