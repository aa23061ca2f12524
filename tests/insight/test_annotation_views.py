"""Notes from the site page: added and deleted by a member of the site's org only (CSRF, POST), refused in plain
words when bad (nothing saved, the words kept), shown on the chart's data and under it; open alerts marked too."""

import json
import re
from datetime import UTC, date, datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from insight.models import Alert, AlertKind, Annotation
from tests.factories import OrgFactory, SiteFactory, UserFactory
from tests.insight.test_site_page import UrlMetricFactory, custom

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]

MAY = custom(date(2026, 5, 1), date(2026, 5, 31))
CHART = re.compile(r'<script id="(chart-site|chart-page)" type="application/json">(.*?)</script>', re.S)


def seconds(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp())


def add_url(site) -> str:
    return f"/imports/sites/{site.pk}/annotations/"


def charts(response) -> dict:
    return {name: json.loads(text) for name, text in CHART.findall(response.content.decode())}


@pytest.fixture
def site(target):
    UrlMetricFactory(site_target=target, url="https://acme.example/a", period_start=date(2026, 5, 3), clicks=7)
    return target.site


def test_a_member_adds_a_note_and_goes_back_to_the_period_shown(client, member, site):
    response = client.post(add_url(site) + "?period=custom&from=2026-05-01&to=2026-05-31&q=shoes",
                           {"day": "2026-05-10", "text": "  Moved to HTTPS "})

    note = Annotation.objects.get()
    assert (note.site, note.day, note.text, note.created_by) == (site, date(2026, 5, 10), "Moved to HTTPS", member)
    assert response.status_code == 302
    assert response["Location"] == (f"/imports/sites/{site.pk}/?period=custom&from=2026-05-01&to=2026-05-31&q=shoes"
                                     "#notes")
    page = client.get(response["Location"].split("#")[0])
    assert "Note added on 2026-05-10: “Moved to HTTPS”." in page.content.decode()
    chart = charts(page)["chart-site"]
    assert chart["notes"] == [{"id": note.pk, "x": seconds(date(2026, 5, 10)), "day": "2026-05-10",
                               "text": "Moved to HTTPS"}]
    # The note's x is on the chart's own day axis.
    assert chart["notes"][0]["x"] in chart["x"]
    assert re.search(rf'data-note="{note.pk}">.*?2026-05-10.*?Moved to HTTPS', page.content.decode(), re.S)


@pytest.mark.parametrize("shown, said", [
    ({"shown_from": "2026-05-01", "shown_to": "2026-05-31"}, ""),
    ({"shown_from": "2026-06-01", "shown_to": "2026-06-30"},
     " It is outside the period shown (2026-06-01 → 2026-06-30): choose a period that holds it to see it on the chart."),
    ({"shown_from": "nonsense", "shown_to": "2026-06-30"}, ""),
    ({}, ""),
])
def test_a_note_outside_the_period_shown_is_said_so(client, member, site, shown, said):
    response = client.post(add_url(site), {"day": "2026-05-10", "text": "relaunch", **shown}, follow=True)

    assert [str(m) for m in response.context["messages"]] == [f"Note added on 2026-05-10: “relaunch”.{said}"]


def test_only_the_site_pages_own_parameters_go_back(client, member, site):
    response = client.post(add_url(site) + "?period=7d&next=https%3A%2F%2Fevil.example%2F&url=" + "x" * 3000,
                           {"day": "2026-05-10", "text": "note"})

    assert response["Location"] == f"/imports/sites/{site.pk}/?period=7d#notes"


@pytest.mark.parametrize("day, text, reason", [
    ("2026-05-10", "   ", "The note is empty: write what happened on that day."),
    ("2026-05-10", "a\x1bb", "The note holds a control character or a line break: write it on one line."),
    ("2026-05-10", "y" * 201, "The note is 201 characters long; it may be 200 at most."),
    ("1999-12-31", "too early", "The day, 1999-12-31, is before 2000-01-01."),
    ("31/05/2026", "not a date", "The day must be a date written YYYY-MM-DD."),
])
def test_a_bad_note_is_not_saved_and_the_page_says_why_once(client, member, site, day, text, reason):
    response = client.post(add_url(site) + "?period=custom&from=2026-05-01&to=2026-05-31", {"day": day, "text": text})

    assert Annotation.objects.count() == 0
    assert response.status_code == 302
    page = client.get(response["Location"].split("#")[0]).content.decode()
    errors = re.search(r"<div class=\"form-errors\" data-note-errors>(.*?)</div>", page, re.S).group(1)
    assert reason in errors.replace("&#x27;", "'")
    assert "The note was not added." in errors
    form = re.search(r"<form class=\"note-form\".*?</form>", page, re.S).group(0)
    assert f'name="day" value="{day}"' in form
    # Shown once: the next visit starts afresh.
    assert "data-note-errors" not in client.get(f"/imports/sites/{site.pk}/", MAY).content.decode()


def test_a_refused_note_comes_back_on_its_own_sites_page_only(client, member, site):
    other = SiteFactory(org=site.org, domain="other.acme.example")
    client.post(add_url(site), {"day": "2026-05-10", "text": "bad\x00note"})

    assert "data-note-errors" not in client.get(f"/imports/sites/{other.pk}/").content.decode()
    assert "data-note-errors" in client.get(f"/imports/sites/{site.pk}/").content.decode()


def test_a_note_a_year_ahead_is_the_last_one_accepted(client, member, site):
    today = timezone.localdate()
    last = today.replace(year=today.year + 1) if not (today.month == 2 and today.day == 29) else today.replace(
        year=today.year + 1, day=28)
    client.post(add_url(site), {"day": (last + timedelta(days=1)).isoformat(), "text": "too far"})
    client.post(add_url(site), {"day": last.isoformat(), "text": "planned migration"})

    assert list(Annotation.objects.values_list("day", "text")) == [(last, "planned migration")]


def test_a_member_deletes_a_note_of_the_site(client, member, site):
    keep = Annotation.objects.create(site=site, day=date(2026, 5, 2), text="keep")
    gone = Annotation.objects.create(site=site, day=date(2026, 5, 9), text="gone")

    response = client.post(f"/imports/sites/{site.pk}/annotations/{gone.pk}/delete/?period=28d")

    assert response["Location"] == f"/imports/sites/{site.pk}/?period=28d#notes"
    assert list(Annotation.objects.all()) == [keep]


def test_another_orgs_site_or_note_is_a_404_and_nothing_changes(client, member, site):
    other = SiteFactory(org=OrgFactory(id="globex"), domain="globex.example")
    theirs = Annotation.objects.create(site=other, day=date(2026, 5, 2), text="theirs")

    assert client.post(add_url(other), {"day": "2026-05-10", "text": "x"}).status_code == 404
    assert client.post(f"/imports/sites/{other.pk}/annotations/{theirs.pk}/delete/").status_code == 404
    # Their note through our own site's address: still theirs, still a 404.
    assert client.post(f"/imports/sites/{site.pk}/annotations/{theirs.pk}/delete/").status_code == 404
    assert client.post(f"/imports/sites/{site.pk}/annotations/999999/delete/").status_code == 404
    assert list(Annotation.objects.all()) == [theirs]


def test_a_user_in_two_orgs_adds_to_the_org_chosen_only(client, site):
    user = UserFactory(username="both", org=site.org)
    other_org = OrgFactory(id="globex")
    user.memberships.create(org=other_org)
    other = SiteFactory(org=other_org, domain="globex.example")
    client.force_login(user)

    for chosen, left in ((other, site), (site, other)):
        assert client.post("/org/", {"org": chosen.org_id}).status_code == 302  # the header's switcher
        assert client.post(add_url(left), {"day": "2026-05-10", "text": "x"}).status_code == 404
        assert client.post(add_url(chosen), {"day": "2026-05-10", "text": "x"}).status_code == 302
    assert sorted(Annotation.objects.values_list("site", flat=True)) == sorted([other.pk, site.pk])


def test_posts_need_a_login_a_csrf_token_and_post(member, site):
    anonymous = Client()
    response = anonymous.post(add_url(site), {"day": "2026-05-10", "text": "x"})
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(member)
    assert strict.post(add_url(site), {"day": "2026-05-10", "text": "x"}).status_code == 403
    assert strict.get(add_url(site)).status_code == 405
    assert Annotation.objects.count() == 0

    page = strict.get(f"/imports/sites/{site.pk}/", MAY).content.decode()
    token = re.search(r'data-note-form>\s*<input type="hidden" name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    assert strict.post(add_url(site), {"day": "2026-05-10", "text": "x", "csrfmiddlewaretoken": token}).status_code == 302
    assert Annotation.objects.count() == 1


def test_the_chart_marks_the_periods_notes_and_open_alerts_only(client, member, site):
    Annotation.objects.create(site=site, day=date(2026, 4, 30), text="before the period")
    inside = Annotation.objects.create(site=site, day=date(2026, 5, 31), text="<b>last</b> day")
    drop = Alert.objects.create(site=site, kind=AlertKind.CLICKS_DROP, period_start=date(2026, 5, 25),
                                period_end=date(2026, 6, 3), before=1234, after=567)
    Alert.objects.create(site=site, kind=AlertKind.STALE_DATA, period_start=date(2026, 5, 20),
                         period_end=date(2026, 5, 21), acknowledged_at=timezone.now())
    Alert.objects.create(site=site, kind=AlertKind.STALE_DATA, period_start=date(2026, 6, 1),
                         period_end=date(2026, 6, 2))
    page_drop = Alert.objects.create(site=site, kind=AlertKind.PAGE_DROP, page_url="https://acme.example/b",
                                     period_start=date(2026, 5, 4), period_end=date(2026, 5, 10), before=300, after=180)
    other_site = SiteFactory(org=site.org)
    Annotation.objects.create(site=other_site, day=date(2026, 5, 10), text="another site's")

    response = client.get(f"/imports/sites/{site.pk}/", {**MAY, "url": "https://acme.example/a"})

    found = charts(response)
    site_chart, page_chart = found["chart-site"], found["chart-page"]
    assert [n["id"] for n in site_chart["notes"]] == [inside.pk] == [n["id"] for n in page_chart["notes"]]
    assert site_chart["alerts"] == [
        {"id": page_drop.pk, "kind": "page_drop", "x0": seconds(date(2026, 5, 4)), "x1": seconds(date(2026, 5, 10)),
         "when": "2026-05-04 → 2026-05-10", "text": "https://acme.example/b: clicks fell −40.0% (300 → 180 in 7 days)"},
        {"id": drop.pk, "kind": "clicks_drop", "x0": seconds(date(2026, 5, 25)), "x1": seconds(date(2026, 6, 3)),
         "when": "2026-05-25 → 2026-06-03", "text": "Clicks fell −54.1% (1,234 → 567 in 10 days)"}]
    # Page a's history: another page's drop is not marked on it.
    assert [a["id"] for a in page_chart["alerts"]] == [drop.pk]
    html = response.content.decode()
    assert "&lt;b&gt;last&lt;/b&gt; day" in html and "<b>last</b>" not in html.split("<script")[0]
    assert html.count(f'data-alert="{drop.pk}"') == 2  # listed under both charts


def test_the_page_without_data_still_lists_its_notes(client, member, site):
    note = Annotation.objects.create(site=site, day=date(2026, 3, 10), text="site relaunched")

    html = client.get(f"/imports/sites/{site.pk}/", custom(date(2026, 3, 1), date(2026, 3, 31))).content.decode()

    assert "No data in this period." in html
    assert f'data-note="{note.pk}"' in html

