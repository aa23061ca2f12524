"""The site target admin: the service-account key is write-only and encrypted."""

import json

import pytest

from imports.models import Import, ImportKind
from jobs.models import Job
from seoinsight.models import SiteTarget
from tests.factories import SiteFactory, SiteTargetFactory

pytestmark = pytest.mark.django_db

KEY = {"type": "service_account", "client_email": "bot@proj.iam.gserviceaccount.com",
       "private_key": "-----BEGIN PRIVATE KEY-----\\nMIIB\\n-----END PRIVATE KEY-----\\n",
       "token_uri": "https://oauth2.googleapis.com/token"}


def change(admin_client, target, **data):
    form = {"site": target.site_id, "url_prefix": target.url_prefix,
            "search_console_property": "sc-domain:shop.example", "service_account_key": "", **data}
    return admin_client.post(f"/admin/seoinsight/sitetarget/{target.pk}/change/", form)


def test_a_pasted_key_is_stored_encrypted_and_never_shown_back(admin_client):
    target = SiteTargetFactory()
    response = change(admin_client, target, service_account_key=json.dumps(KEY))
    assert response.status_code == 302
    target.refresh_from_db()
    assert target.service_account_info()["client_email"] == KEY["client_email"]
    assert "bot@proj" not in target.search_console_credentials

    page = admin_client.get(f"/admin/seoinsight/sitetarget/{target.pk}/change/").content.decode()
    assert "bot@proj" not in page and target.search_console_credentials not in page


def test_saving_without_a_key_keeps_the_stored_one_and_clearing_removes_it(admin_client):
    target = SiteTargetFactory()
    target.set_service_account(json.dumps(KEY))
    target.save()
    change(admin_client, target)
    assert SiteTarget.objects.get(pk=target.pk).has_search_console_credentials
    change(admin_client, target, clear_service_account_key="on")
    assert not SiteTarget.objects.get(pk=target.pk).has_search_console_credentials


def test_a_key_that_is_not_a_service_account_key_is_refused_with_its_reason(admin_client):
    target = SiteTargetFactory()
    response = change(admin_client, target, service_account_key='{"client_email": "x"}')
    assert response.status_code == 200
    assert "missing private_key, token_uri" in response.content.decode()
    assert not SiteTarget.objects.get(pk=target.pk).has_search_console_credentials


def test_the_pull_action_queues_an_api_import_only_for_ready_targets(admin_client):
    ready = SiteTargetFactory(search_console_property="sc-domain:shop.example")
    ready.set_service_account(json.dumps(KEY))
    ready.save()
    bare = SiteTargetFactory()
    response = admin_client.post("/admin/seoinsight/sitetarget/",
                                 {"action": "pull_search_console", "_selected_action": [ready.pk, bare.pk]},
                                 follow=True)
    assert "Needs a property and a service-account key first" in response.content.decode()
    imp = Import.objects.get()
    assert (imp.site_target_id, imp.kind) == (ready.pk, ImportKind.API)
    assert Job.objects.get(pk=imp.job_id).type == "import_api"


def test_a_refused_form_never_renders_the_pasted_key_back(admin_client):
    target = SiteTargetFactory()
    pasted = {"private_key": "-----BEGIN PRIVATE KEY-----\\nTOPSECRETKEYMATERIAL\\n-----END PRIVATE KEY-----\\n",
              "token_uri": KEY["token_uri"]}

    response = change(admin_client, target, service_account_key=json.dumps(pasted))

    html = response.content.decode()
    assert response.status_code == 200
    assert "missing client_email" in html
    assert "TOPSECRETKEYMATERIAL" not in html


def test_a_key_whose_token_uri_is_not_googles_is_refused_by_the_form(admin_client):
    target = SiteTargetFactory()

    response = change(admin_client, target, service_account_key=json.dumps({**KEY, "token_uri": "http://10.0.0.5/"}))

    assert response.status_code == 200
    assert "token_uri must be Google&#x27;s token endpoint" in response.content.decode()
    assert not SiteTarget.objects.get(pk=target.pk).has_search_console_credentials


def test_moving_a_target_to_another_site_needs_the_key_again(admin_client):
    target = SiteTargetFactory()
    target.set_service_account(json.dumps(KEY))
    target.save()
    other_site = SiteFactory(org=target.site.org)

    refused = change(admin_client, target, site=other_site.pk)
    assert refused.status_code == 200
    assert "paste the service-account key again" in refused.context["adminform"].form.errors["service_account_key"][0]
    assert SiteTarget.objects.get(pk=target.pk).site_id == target.site_id

    moved = change(admin_client, target, site=other_site.pk, url_prefix=f"https://{other_site.domain}/",
                   service_account_key=json.dumps(KEY))
    assert moved.status_code == 302
    assert SiteTarget.objects.get(pk=target.pk).site_id == other_site.pk

    dropped = change(admin_client, target, site=target.site_id, clear_service_account_key="on")
    assert dropped.status_code == 302
    assert not SiteTarget.objects.get(pk=target.pk).has_search_console_credentials
