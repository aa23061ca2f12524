"""detectdrops on the real PostgreSQL: drops and late data recorded once, with figures equal to the rows' own sums.

Each figure an alert holds is checked against a SUM() over the metric rows of its days (daily rows only: an export
covering several days never counts in a week's clicks).
"""

from datetime import date, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.db.models import F, Sum
from django.utils import timezone

from imports.models import Import, UrlMetric
from insight.alerts.detect import detect
from insight.models import Alert, AlertKind, AlertThresholds
from seoinsight.models import PullSchedule, SiteTarget
from tests.factories import ImportFactory, OrgFactory, SiteFactory, SiteTargetFactory
from tests.insight.test_site_page import UrlMetricFactory
from tests.support.processes import ManagedProcess, wait_for

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]

TODAY = date(2026, 12, 8)
NEWEST = date(2026, 12, 6)  # the 7th has no data yet: the weeks end on the 6th
WEEK = (date(2026, 11, 30), NEWEST)
PREVIOUS = (date(2026, 11, 23), date(2026, 11, 29))


def daily(target, url: str, before: int, after: int, *, newest: date = NEWEST, skip: tuple[date, ...] = ()):
    """A page's daily rows over the 14 days up to ``newest``: ``before`` clicks a day the first week, ``after`` then."""
    rows = []
    for back in range(14):
        day = newest - timedelta(days=back)
        if day not in skip:
            rows.append(UrlMetricFactory.build(site_target=target, url=url, period_start=day,
                                               clicks=after if back < 7 else before, impressions=1000))
    UrlMetric.objects.bulk_create(rows)


def clicks_of(target_ids, start: date, end: date, url: str | None = None) -> float:
    """The rows' own sum: the daily rows of ``start``..``end``."""
    rows = UrlMetric.objects.filter(site_target_id__in=target_ids, period_start__gte=start, period_end__lte=end,
                                    period_start=F("period_end"))
    if url:
        rows = rows.filter(url_normalized=url)
    return float(rows.aggregate(total=Sum("clicks"))["total"] or 0)


@pytest.fixture
def site(target):
    return target.site


def test_a_site_whose_clicks_fell_gets_one_clicks_drop_with_the_rows_figures(acme, target, site):
    other_target = SiteTargetFactory(site=site, url_prefix="https://acme.example/blog/")
    daily(target, "https://acme.example/a", 40, 20)
    daily(other_target, "https://acme.example/blog/b", 20, 10)
    # A 28-day export of the same pages, overlapping both weeks: not a day's figure, never counted in a week.
    UrlMetricFactory(site_target=target, url="https://acme.example/a", period_start=date(2026, 11, 9),
                     period_end=NEWEST, clicks=5000)

    alerts = detect(acme, TODAY)

    (alert,) = [a for a in alerts if a.kind == AlertKind.CLICKS_DROP]
    ids = [target.pk, other_target.pk]
    assert (alert.site, alert.page_url, alert.period_start, alert.period_end) == (site, "", *WEEK)
    assert alert.before == clicks_of(ids, *PREVIOUS) == 420
    assert alert.after == clicks_of(ids, *WEEK) == 210


def test_a_top_page_that_fell_gets_a_page_drop_while_the_site_holds(acme, target, site):
    daily(target, "https://acme.example/steady", 200, 200)
    daily(target, "https://acme.example/fell", 20, 5)  # -105 clicks, -75 %: the site falls 6 % only

    alerts = detect(acme, TODAY)

    assert [(a.kind, a.page_url) for a in alerts] == [(AlertKind.PAGE_DROP, "https://acme.example/fell")]
    (alert,) = alerts
    assert alert.before == clicks_of([target.pk], *PREVIOUS, url="https://acme.example/fell") == 140
    assert alert.after == clicks_of([target.pk], *WEEK, url="https://acme.example/fell") == 35


def test_steady_figures_too_little_data_and_small_falls_make_no_alert(acme, target):
    steady = SiteTargetFactory(site=SiteFactory(org=acme, domain="steady.example"))
    daily(steady, "https://steady.example/", 100, 98)
    gap = SiteTargetFactory(site=SiteFactory(org=acme, domain="gap.example"))
    daily(gap, "https://gap.example/", 100, 10, skip=(date(2026, 12, 2),))  # a day without data: not judged
    small = SiteTargetFactory(site=SiteFactory(org=acme, domain="small.example"))
    daily(small, "https://small.example/", 5, 1)  # -80 % but 28 clicks
    young = SiteTargetFactory(site=SiteFactory(org=acme, domain="young.example"))
    UrlMetric.objects.bulk_create([UrlMetricFactory.build(site_target=young, url="https://young.example/",
                                                          period_start=NEWEST - timedelta(days=n), clicks=100)
                                   for n in range(6)])

    assert detect(acme, TODAY) == []
    assert not Alert.objects.exists()


def test_the_org_thresholds_decide(acme, target):
    daily(target, "https://acme.example/a", 100, 85)  # -15 %, -105 clicks
    assert detect(acme, TODAY) == []

    AlertThresholds.objects.create(org=acme, drop_percent=10, drop_clicks=100)
    assert [a.kind for a in detect(acme, TODAY)] == [AlertKind.CLICKS_DROP, AlertKind.PAGE_DROP]


def test_a_second_run_records_nothing_and_another_org_is_left_alone(acme, target):
    daily(target, "https://acme.example/a", 100, 10)
    globex = OrgFactory(id="globex")
    theirs = SiteTargetFactory(site=SiteFactory(org=globex, domain="globex.example"))
    daily(theirs, "https://globex.example/a", 100, 10)

    assert len(detect(acme, TODAY)) == 2
    assert detect(acme, TODAY) == []
    assert Alert.objects.filter(site__org=acme).count() == 2
    assert not Alert.objects.filter(site__org=globex).exists()


def late_site(acme, domain, newest: date, **target):
    site_target = SiteTargetFactory(site=SiteFactory(org=acme, domain=domain), **target)
    UrlMetricFactory(site_target=site_target, url=f"https://{domain}/", period_start=newest)
    return site_target


def test_late_data_against_the_schedule_or_the_upload_habit(acme):
    daily_pull = late_site(acme, "pulled.example", date(2026, 12, 3), search_console_property="sc-domain:pulled.example")
    SiteTarget.objects.filter(pk=daily_pull.pk).update(pull_schedule=PullSchedule.DAILY)  # 5 days: a daily pull allows 4
    late_site(acme, "fresh.example", date(2026, 12, 3))  # 5 days: the floor (7) allows it
    old = late_site(acme, "old.example", date(2026, 11, 27))  # 11 days
    monthly = late_site(acme, "monthly.example", date(2026, 11, 20))  # 18 days, but it uploads monthly
    for day in (date(2026, 9, 2), date(2026, 10, 2), date(2026, 11, 2)):
        imp = ImportFactory(site_target=monthly, done=True)
        Import.objects.filter(pk=imp.pk).update(created_at=timezone.make_aware(
            timezone.datetime.combine(day, timezone.datetime.min.time())))
    SiteTargetFactory(site=SiteFactory(org=acme, domain="empty.example"))  # no data: nothing to judge

    alerts = detect(acme, TODAY)

    found = {(a.site.domain, a.before, a.after, a.period_start, a.period_end) for a in alerts}
    assert found == {("pulled.example", 4, 5, date(2026, 12, 4), date(2026, 12, 7)),
                     ("old.example", 7, 11, date(2026, 11, 28), date(2026, 12, 7))}
    assert {a.kind for a in alerts} == {AlertKind.STALE_DATA}
    assert old.site.alerts.count() == 1


def test_late_data_is_one_alert_however_many_days_it_stays_late(acme):
    site_target = late_site(acme, "old.example", date(2026, 11, 27))
    assert len(detect(acme, TODAY)) == 1
    assert detect(acme, TODAY + timedelta(days=1)) == []
    assert detect(acme, TODAY + timedelta(days=5)) == []
    # New data, then late again: a new episode, a new alert.
    UrlMetricFactory(site_target=site_target, url="https://old.example/", period_start=date(2026, 12, 10))
    assert detect(acme, date(2026, 12, 20))[0].period_start == date(2026, 12, 11)
    assert site_target.site.alerts.count() == 2


def test_the_command_prints_what_it_recorded(acme, target):
    daily(target, "https://acme.example/a", 100, 10)
    out = StringIO()

    call_command("detectdrops", "--org", "acme", "--today", "2026-12-08", stdout=out)

    lines = out.getvalue().splitlines()
    assert lines[0] == ("acme · acme.example · clicks_drop · 2026-11-30 → 2026-12-06 · "
                        "Clicks fell −90.0% (700 → 70 in 7 days)")
    assert lines[1].startswith("acme · acme.example · page_drop · 2026-11-30 → 2026-12-06 · https://acme.example/a:")
    assert lines[-1] == "2 alert(s) recorded as of 2026-12-08."

    again = StringIO()
    call_command("detectdrops", "--today", "2026-12-08", stdout=again)
    assert again.getvalue() == "0 alert(s) recorded as of 2026-12-08.\n"


def test_the_command_refuses_an_unknown_org_and_a_bad_day(db):
    with pytest.raises(CommandError, match="no org 'nobody'"):
        call_command("detectdrops", "--org", "nobody")
    with pytest.raises(CommandError, match="expected a date as YYYY-MM-DD"):
        call_command("detectdrops", "--today", "8/12/2026")


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_two_detectdrops_at_once_record_each_alert_once(acme, target):
    daily(target, "https://acme.example/a", 100, 10)
    late_site(acme, "old.example", date(2026, 11, 27))
    with transaction.atomic(), connection.cursor() as cursor:
        # Both processes read, judge, then wait here at their first INSERT: they record at the same moment.
        cursor.execute("LOCK TABLE insight_alert IN SHARE MODE")
        runs = [ManagedProcess("detectdrops", "--today", "2026-12-08") for _ in range(2)]

        def waiting():
            cursor.execute("SELECT count(*) FROM pg_locks WHERE relation = 'insight_alert'::regclass AND NOT granted")
            return cursor.fetchone()[0] == 2

        wait_for(waiting, timeout=60, message="both detectdrops waiting to insert")
    for run in runs:
        assert run.wait(timeout=60) == 0, run.output()

    assert Alert.objects.count() == 3  # clicks_drop, page_drop, stale_data
    # Each alert printed by the one process that recorded it.
    printed = [int(line.split()[0]) for run in runs for line in run.output().splitlines()
               if line.endswith("recorded as of 2026-12-08.")]
    assert len(printed) == 2 and sum(printed) == 3, [run.output() for run in runs]
