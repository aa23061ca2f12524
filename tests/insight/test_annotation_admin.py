"""The notes in the admin: an Operator lists, adds, corrects and deletes their org's notes only, judged by the
same rule as the site page's form; the group holds those permissions (migration 0004)."""

from datetime import date

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from insight.models import Annotation
from seoinsight import operator_group
from tests.factories import OrgFactory, SiteFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def sites():
    return SiteFactory(org=OrgFactory(id="acme"), domain="acme.example"), \
        SiteFactory(org=OrgFactory(id="rival"), domain="rival.example")


@pytest.fixture
def operator(client, sites):
    user = UserFactory(username="olga", is_staff=True, org=sites[0].org)
    user.groups.add(Group.objects.get(name=operator_group.NAME))
    client.force_login(user)
    return user


def test_the_operator_group_may_view_add_change_and_delete_notes():
    granted = set(Group.objects.get(name=operator_group.NAME).permissions
                  .filter(content_type__app_label="insight", content_type__model="annotation")
                  .values_list("codename", flat=True))
    assert granted == {"view_annotation", "add_annotation", "change_annotation", "delete_annotation"}


def test_an_operator_sees_only_their_orgs_notes(client, operator, sites):
    ours, theirs = sites
    Annotation.objects.create(site=ours, day=date(2026, 5, 2), text="ours: moved to HTTPS")
    foreign = Annotation.objects.create(site=theirs, day=date(2026, 5, 3), text="theirs: secret relaunch")

    listing = client.get(reverse("admin:insight_annotation_changelist")).content.decode()

    assert "ours: moved to HTTPS" in listing and "secret relaunch" not in listing
    assert client.get(reverse("admin:insight_annotation_change", args=[foreign.pk])).status_code == 404
    assert client.post(reverse("admin:insight_annotation_delete", args=[foreign.pk]), {"post": "yes"}).status_code == 404
    assert Annotation.objects.filter(pk=foreign.pk).exists()


def test_an_operator_adds_corrects_and_deletes_a_note(client, operator, sites):
    ours, _ = sites
    added = client.post(reverse("admin:insight_annotation_add"),
                        {"site": ours.pk, "day": "2026-05-10", "text": "  new theme  "})
    assert added.status_code == 302
    note = Annotation.objects.get()
    assert (note.site, note.day, note.text, note.created_by) == (ours, date(2026, 5, 10), "new theme", operator)

    changed = client.post(reverse("admin:insight_annotation_change", args=[note.pk]),
                          {"site": ours.pk, "day": "2026-05-11", "text": "new theme live"})
    assert changed.status_code == 302
    note.refresh_from_db()
    assert (note.day, note.text, note.created_by) == (date(2026, 5, 11), "new theme live", operator)

    deleted = client.post(reverse("admin:insight_annotation_delete", args=[note.pk]), {"post": "yes"})
    assert deleted.status_code == 302
    assert not Annotation.objects.exists()


@pytest.mark.parametrize("site_index, day, text, message", [
    (1, "2026-05-10", "planted", "Select a valid choice"),  # another org's site: not a choice
    (0, "1999-12-31", "too early", "The day, 1999-12-31, is before 2000-01-01."),
    (0, "2026-05-10", "two\nlines", "The note holds a control character or a line break: write it on one line."),
    (0, "2026-05-10", "   ", "This field is required."),
])
def test_the_admin_refuses_what_the_site_page_refuses(client, operator, sites, site_index, day, text, message):
    response = client.post(reverse("admin:insight_annotation_add"),
                           {"site": sites[site_index].pk, "day": day, "text": text})

    assert response.status_code == 200
    assert message in response.content.decode()
    assert not Annotation.objects.exists()
