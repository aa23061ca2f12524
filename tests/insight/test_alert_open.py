"""insight.alerts.open: each asked site's unacknowledged alerts, newest first; nothing of the sites not asked."""

from datetime import date

from django.utils import timezone

from insight.alerts.open import open_by_site
from insight.models import Alert, AlertKind
from tests.factories import SiteFactory


def _alert(site, start, **extra):
    return Alert.objects.create(site=site, kind=AlertKind.CLICKS_DROP, period_start=start,
                                period_end=date(2026, 12, 7), before=100, after=40, **extra)


def test_open_alerts_per_asked_site_newest_first(acme):
    mine, quiet, other = SiteFactory(org=acme), SiteFactory(org=acme), SiteFactory()
    older = _alert(mine, date(2026, 11, 1))
    newer = _alert(mine, date(2026, 11, 8))
    _alert(mine, date(2026, 11, 15), acknowledged_at=timezone.now())
    _alert(other, date(2026, 11, 1))

    found = open_by_site([mine.pk, quiet.pk])

    assert found == {mine.pk: [newer, older], quiet.pk: []}


def test_no_site_asked_no_query(django_assert_num_queries, db):
    with django_assert_num_queries(0):
        assert open_by_site([]) == {}
