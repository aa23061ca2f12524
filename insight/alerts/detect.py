"""Detecting an org's drops and late data, and recording each alert once (``decide`` judges, this reads and writes).

Every alert is one INSERT … ON CONFLICT DO NOTHING on its own: any number of detectors at once record it once, and a
detector that fails half-way keeps what it recorded.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import date

from django.db import connection

from imports import conf as imports_conf
from imports.stale_sites import newest_per_site
from seoinsight.models import Org, PullSchedule

from ..models import Alert, AlertKind, AlertThresholds
from . import decide, sql

log = logging.getLogger(__name__)

LOOKBACK_DAYS = 90  # a site whose newest daily data is older than this is judged late, not for a drop


def thresholds_for(org_id: str) -> decide.Thresholds:
    row = AlertThresholds.objects.filter(org_id=org_id).first()
    return decide.Thresholds(row.drop_percent, row.drop_clicks) if row else decide.DEFAULT_THRESHOLDS


def detect(org: Org, today: date) -> list[Alert]:
    """Judge every site of ``org`` as of ``today`` (not a complete day); returns the alerts recorded by this run."""
    thresholds = thresholds_for(org.pk)
    recorded = []
    for site_id, daily in daily_clicks(org.pk, today).items():
        weeks = decide.judged_weeks(daily, today)
        if weeks is None:
            continue
        drops = [decide.site_drop(daily, today, thresholds)]
        drops += decide.page_drops(weeks, page_weeks(site_id, weeks), thresholds)
        recorded += [alert_id for drop in drops if drop for alert_id in record_drop(site_id, drop)]
    for site_id, lateness in late_sites(org.pk, today):
        recorded += record_late(site_id, lateness)
    alerts = list(Alert.objects.filter(pk__in=recorded).select_related("site").order_by("site__domain", "kind", "pk"))
    log.info("org %s: detected drops as of %s: %s alert(s) recorded", org.pk, today, len(alerts))
    return alerts


def daily_clicks(org_id: str, today: date) -> dict[int, dict[date, float]]:
    found: dict[int, dict[date, float]] = defaultdict(dict)
    with connection.cursor() as cursor:
        cursor.execute(sql.DAILY_CLICKS, {"org": org_id, "today": today, "lookback": LOOKBACK_DAYS})
        for site_id, day, clicks in cursor.fetchall():
            found[site_id][day] = clicks
    return found


def page_weeks(site_id: int, weeks: decide.Weeks) -> list[tuple[str, float, float]]:
    with connection.cursor() as cursor:
        cursor.execute(sql.PAGE_WEEKS, {"site": site_id, "previous_start": weeks.previous_start,
                                        "previous_end": weeks.previous_end, "end": weeks.end,
                                        "top": decide.TOP_PAGES})
        return cursor.fetchall()


def late_sites(org_id: str, today: date) -> list[tuple[int, decide.Late]]:
    """Each site of the org whose newest data (the admin index's rule, ``imports.stale_sites``) is later than allowed."""
    floor = imports_conf.get("IMPORT_STALE_AFTER_DAYS")
    with connection.cursor() as cursor:
        cursor.execute(sql.HABITS, {"org": org_id, "today": today, "habit": decide.HABIT_IMPORTS})
        habits = {site_id: (schedules, days) for site_id, schedules, days in cursor.fetchall()}
    orgs = Org.objects.filter(pk=org_id).values("pk")
    rows, _, _ = newest_per_site(orgs, floor, limit=max(len(habits), 1))
    found = []
    for site_id, _domain, _org, newest, _age in rows:
        schedules, import_days = habits.get(site_id, ([], []))
        allowed = decide.allowed_delay([PullSchedule(s).days for s in schedules], import_days, floor)
        lateness = decide.late(newest, today, allowed)
        if lateness is not None:
            found.append((site_id, lateness))
    return found


def record_drop(site_id: int, drop: decide.Drop) -> list[int]:
    kind = AlertKind.PAGE_DROP if drop.page_url else AlertKind.CLICKS_DROP
    return _insert(sql.RECORD, {"site": site_id, "kind": kind, "page_url": drop.page_url, "start": drop.weeks.start,
                                "end": drop.weeks.end, "before": drop.before, "after": drop.after})


def record_late(site_id: int, lateness: decide.Late) -> list[int]:
    return _insert(sql.RECORD_LATE, {"site": site_id, "start": lateness.first_missing, "end": lateness.last_missing,
                                     "before": lateness.allowed, "after": lateness.age})


def _insert(statement: str, params: dict) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return [row[0] for row in cursor.fetchall()]
