"""The id ``importfile --target`` needs is where an operator looks: the admin's target list, the targets on a
site's page, the target's own page; ``--help`` says so, and so does the error for an id that is no target."""

import io
import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from imports.cli import EXIT_NOT_QUEUED
from tests.factories import OrgFactory, SiteFactory, SiteTargetFactory

pytestmark = pytest.mark.django_db

WHERE = "the id column of the admin's Site targets list (/admin/seoinsight/sitetarget/) or of the targets on a site's page"


def test_the_target_list_shows_each_id_first(admin_client, target):
    response = admin_client.get(reverse("admin:seoinsight_sitetarget_changelist"))

    assert response.context["cl"].list_display[:3] == ["action_checkbox", "target_id", "__str__"]
    url = reverse("admin:seoinsight_sitetarget_change", args=[target.pk])
    assert f'<th class="field-target_id"><a href="{url}">{target.pk}</a></th>' in response.content.decode()


def test_the_sites_page_shows_its_targets_ids(admin_client, target):
    page = admin_client.get(reverse("admin:seoinsight_site_change", args=[target.site_id])).content.decode()

    assert re.search(rf'<td class="field-target_id">\s*<p>{target.pk}</p>', page)


def test_the_targets_page_says_how_to_import_into_it(admin_client, target):
    page = admin_client.get(reverse("admin:seoinsight_sitetarget_change", args=[target.pk])).content.decode()

    assert f"manage.py importfile FILE --target {target.pk}" in page


def test_importfile_help_says_where_the_ids_are(capsys):
    with pytest.raises(SystemExit):
        call_command("importfile", "--help")

    assert " ".join(WHERE.split()) in " ".join(capsys.readouterr().out.split())


def importfile_error(*args) -> CommandError:
    with pytest.raises(CommandError) as caught:
        call_command("importfile", *[str(a) for a in args], stdout=io.StringIO(), stderr=io.StringIO())
    assert caught.value.returncode == EXIT_NOT_QUEUED
    return caught.value


def test_an_unknown_id_says_where_ids_are_found(tmp_path):
    (tmp_path / "pages.csv").write_text("Page,Clicks\n")

    error = importfile_error(tmp_path / "pages.csv", "--target", 999999)

    assert str(error) == f"no site target 999999. A target's id is {WHERE}."


def test_another_orgs_id_lists_the_named_orgs_own_targets(tmp_path, target):
    (tmp_path / "pages.csv").write_text("Page,Clicks\n")
    rival = OrgFactory(id="rival")
    own = SiteTargetFactory(site=SiteFactory(org=rival, domain="rival.example"), url_prefix="https://rival.example/")

    error = importfile_error(tmp_path / "pages.csv", "--target", target.pk, "--org", "rival")

    assert str(error) == (f"no site target {target.pk} in org 'rival'. A target's id is {WHERE}; org 'rival''s "
                          f"targets: {own.pk} (https://rival.example/, site rival.example).")
    empty = importfile_error(tmp_path / "pages.csv", "--target", target.pk, "--org", OrgFactory(id="empty").pk)
    assert str(empty).endswith("; org 'empty' has no site targets.")
