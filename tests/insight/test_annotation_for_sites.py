"""insight.annotations.for_sites: each asked site's notes of the period, in day order, nothing else."""

import datetime as dt

import pytest

from insight.annotations import for_sites
from insight.models import Annotation
from tests.factories import SiteFactory

pytestmark = pytest.mark.django_db

D = dt.date


def test_notes_of_the_period_by_site_in_day_order():
    a, b, other = SiteFactory(), SiteFactory(), SiteFactory()
    late = Annotation.objects.create(site=a, day=D(2026, 11, 20), text="moved to HTTPS")
    early = Annotation.objects.create(site=a, day=D(2026, 11, 2), text="new theme")
    edge_start = Annotation.objects.create(site=b, day=D(2026, 11, 1), text="first day")
    edge_end = Annotation.objects.create(site=b, day=D(2026, 11, 30), text="last day")
    Annotation.objects.create(site=a, day=D(2026, 10, 31), text="before the period")
    Annotation.objects.create(site=b, day=D(2026, 12, 1), text="after the period")
    Annotation.objects.create(site=other, day=D(2026, 11, 10), text="not asked")

    found = for_sites([a.pk, b.pk], D(2026, 11, 1), D(2026, 11, 30))

    assert found == {a.pk: [early, late], b.pk: [edge_start, edge_end]}


def test_every_asked_site_has_a_key_and_an_empty_or_reversed_period_finds_nothing():
    a, b = SiteFactory(), SiteFactory()
    Annotation.objects.create(site=a, day=D(2026, 11, 5), text="note")

    assert for_sites([a.pk, b.pk], D(2026, 11, 1), D(2026, 11, 30))[b.pk] == []
    assert for_sites([a.pk], D(2026, 11, 30), D(2026, 11, 1)) == {a.pk: []}
    assert for_sites([], D(2026, 11, 1), D(2026, 11, 30)) == {}


def test_two_notes_on_one_day_keep_the_order_they_were_added():
    a = SiteFactory()
    first = Annotation.objects.create(site=a, day=D(2026, 11, 5), text="first")
    second = Annotation.objects.create(site=a, day=D(2026, 11, 5), text="second")

    assert for_sites([a.pk], D(2026, 11, 5), D(2026, 11, 5))[a.pk] == [first, second]
