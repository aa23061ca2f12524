"""Where alerts show and are acknowledged: the admin (org-scoped, the Operator group's action and button), the
admin index's "Waiting for you", and the site's own /imports/alerts/ page with its acknowledge endpoint and the
member's digest choice. Another org's alert is a 404 everywhere."""

from datetime import date

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils import timezone

from insight.models import Alert, AlertKind, AlertThresholds, DigestOptIn
from seoinsight import operator_group
from tests.factories import OrgFactory, SiteFactory, UserFactory

pytestmark = pytest.mark.django_db


def alert(site, start=date(2026, 11, 30), kind=AlertKind.CLICKS_DROP, **extra):
    if kind == AlertKind.PAGE_DROP:
        extra.setdefault("page_url", f"https://{site.domain}/pricing")
    return Alert.objects.create(site=site, kind=kind, period_start=start, period_end=date(2026, 12, 6), before=700,
                                after=70, **extra)


@pytest.fixture
def alerts(acme):
    site = SiteFactory(org=acme, domain="acme.example")
    rival = SiteFactory(org=OrgFactory(id="rival"), domain="rival.example")
    return {"open": [alert(site), alert(site, kind=AlertKind.PAGE_DROP)],
            "done": alert(site, start=date(2026, 11, 1), acknowledged_at=timezone.now()),
            "rival": alert(rival)}


@pytest.fixture
def operator(client, acme):
    user = UserFactory(username="olga", is_staff=True, org=acme)
    user.groups.add(Group.objects.get(name=operator_group.NAME))
    client.force_login(user)
    return user


# -- the admin -----------------------------------------------------------------------------------------------------


def test_the_index_counts_unacknowledged_alerts_linked_to_exactly_those(client, operator, alerts):
    response = client.get(reverse("admin:index"))
    shown = {s.label: (s.count, s.url) for s in response.context["queues"]}

    count, url = shown["unacknowledged alerts"]
    assert count == 2
    listed = client.get(url)
    assert listed.status_code == 200
    assert {a.pk for a in listed.context["cl"].result_list} == {a.pk for a in alerts["open"]}
    assert "Unacknowledged alerts" in response.content.decode()


def test_an_operator_lists_their_orgs_alerts_only_and_another_orgs_is_a_404(client, operator, alerts):
    response = client.get(reverse("admin:insight_alert_changelist"))
    assert response.status_code == 200
    assert {a.pk for a in response.context["cl"].result_list} == {a.pk for a in [*alerts["open"], alerts["done"]]}
    assert "rival.example" not in response.content.decode()
    assert client.get(reverse("admin:insight_alert_change", args=[alerts["rival"].pk])).status_code == 404
    refused = client.post(reverse("admin:insight_alert_acknowledge", args=[alerts["rival"].pk]))
    assert refused.status_code == 404
    assert Alert.objects.get(pk=alerts["rival"].pk).acknowledged_at is None


def test_an_operator_acknowledges_with_the_action_who_and_when_kept(client, operator, alerts):
    first, second = alerts["open"]
    done_before = Alert.objects.get(pk=alerts["done"].pk).acknowledged_at
    response = client.post(reverse("admin:insight_alert_changelist"), {
        "action": "acknowledge_selected", "_selected_action": [first.pk, alerts["done"].pk, alerts["rival"].pk]},
        follow=True)

    assert "Acknowledged 1 alert(s); 1 already were." in response.content.decode()
    first.refresh_from_db()
    assert first.acknowledged_by == operator and first.acknowledged_at is not None
    assert Alert.objects.get(pk=alerts["done"].pk).acknowledged_at == done_before  # the first answer kept
    assert Alert.objects.get(pk=alerts["rival"].pk).acknowledged_at is None  # not in the list's rows
    assert Alert.objects.get(pk=second.pk).acknowledged_at is None


def test_an_operator_acknowledges_with_the_button_on_the_alerts_page(client, operator, alerts):
    first = alerts["open"][0]
    page = client.get(reverse("admin:insight_alert_change", args=[first.pk])).content.decode()
    assert 'form="insight-acknowledge">Acknowledge</button>' in page
    assert reverse("admin:insight_alert_acknowledge", args=[first.pk]) in page
    assert 'name="_save"' not in page  # nothing to edit

    assert client.get(reverse("admin:insight_alert_acknowledge", args=[first.pk])).status_code == 405
    response = client.post(reverse("admin:insight_alert_acknowledge", args=[first.pk]))
    assert response.status_code == 302
    first.refresh_from_db()
    assert first.acknowledged_by == operator
    after = client.get(reverse("admin:insight_alert_change", args=[first.pk])).content.decode()
    assert "by olga, " in after and 'form="insight-acknowledge"' not in after


def test_thresholds_are_a_superusers_setting(client, operator, acme):
    refused = client.get(reverse("admin:insight_alertthresholds_changelist"))
    assert refused.status_code == 403
    assert "decided by a superuser" in refused.content.decode()

    root = UserFactory(username="root", is_staff=True, is_superuser=True)
    client.force_login(root)
    added = client.post(reverse("admin:insight_alertthresholds_add"),
                        {"org": acme.pk, "drop_percent": "20", "drop_clicks": "100"})
    assert added.status_code == 302
    assert AlertThresholds.objects.get(org=acme).drop_percent == 20
    bad = client.post(reverse("admin:insight_alertthresholds_change", args=[acme.pk]),
                      {"org": acme.pk, "drop_percent": "150", "drop_clicks": "0"})
    assert bad.status_code == 200 and bad.context["adminform"].form.errors.keys() == {"drop_percent", "drop_clicks"}


# -- the site's own page -------------------------------------------------------------------------------------------


def test_the_alerts_page_lists_the_orgs_open_alerts_with_a_button_each(client, member, alerts):
    response = client.get(reverse("insight:alerts"))

    assert response.status_code == 200
    html = response.content.decode()
    assert [row["id"] for row in response.context["open"]] == [a.pk for a in reversed(alerts["open"])]  # newest first
    for each in alerts["open"]:
        assert reverse("insight:alert-acknowledge", args=[each.pk]) in html
    assert "https://acme.example/pricing: clicks fell −90.0% (700 → 70 in 7 days)" in html
    assert [row["id"] for row in response.context["acknowledged"]] == [alerts["done"].pk]
    assert "rival.example" not in html


def test_acknowledge_endpoint_keeps_who_and_goes_back_to_a_safe_next(client, member, alerts):
    first, second = alerts["open"]
    site_page = reverse("insight:site", args=[first.site_id]) + "?period=7d"
    url = reverse("insight:alert-acknowledge", args=[first.pk])

    response = client.post(url, {"next": site_page})
    assert response.status_code == 302 and response["Location"] == site_page
    first.refresh_from_db()
    assert first.acknowledged_by == member and first.acknowledged_at is not None

    outside = client.post(reverse("insight:alert-acknowledge", args=[second.pk]), {"next": "https://evil.example/"})
    assert outside["Location"] == reverse("insight:alerts")
    again = client.post(url, follow=True)
    assert "Already acknowledged by ana" in again.content.decode()


def test_acknowledge_endpoint_another_orgs_alert_is_a_404_and_get_is_refused(client, member, alerts):
    rival = alerts["rival"]
    assert client.post(reverse("insight:alert-acknowledge", args=[rival.pk])).status_code == 404
    assert client.post(reverse("insight:alert-acknowledge", args=[999999])).status_code == 404
    assert Alert.objects.get(pk=rival.pk).acknowledged_at is None
    assert client.get(reverse("insight:alert-acknowledge", args=[alerts["open"][0].pk])).status_code == 405


def test_anonymous_callers_go_to_the_login_page(client, alerts):
    assert client.get(reverse("insight:alerts")).status_code == 302
    response = client.post(reverse("insight:alert-acknowledge", args=[alerts["open"][0].pk]))
    assert response.status_code == 302 and "/login" in response["Location"]
    assert Alert.objects.get(pk=alerts["open"][0].pk).acknowledged_at is None


def test_a_member_asks_for_the_digest_and_stops_it(client, member, acme):
    member.email = "ana@agency.test"
    member.save()

    response = client.post(reverse("insight:alert-digest"), {"digest": "on"}, follow=True)
    assert "You will get a daily digest of Acme Corp&#x27;s new alerts at ana@agency.test." in response.content.decode()
    assert DigestOptIn.objects.filter(membership__user=member, membership__org=acme).count() == 1
    assert response.context["digest"] is True
    client.post(reverse("insight:alert-digest"), {"digest": "on"})  # twice: still one choice
    assert DigestOptIn.objects.count() == 1

    response = client.post(reverse("insight:alert-digest"), {}, follow=True)
    assert not DigestOptIn.objects.exists() and response.context["digest"] is False


def test_without_an_email_address_the_digest_is_refused_in_plain_words(client, member):
    response = client.post(reverse("insight:alert-digest"), {"digest": "on"}, follow=True)
    assert "Your account has no email address" in response.content.decode()
    assert not DigestOptIn.objects.exists()
