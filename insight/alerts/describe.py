"""What an alert says, in the admin, on the alerts page and in the digest: one wording everywhere. Pure."""

from __future__ import annotations

from datetime import timedelta

from seoinsight.figure_text import number, signed_percent

from ..models import Alert, AlertKind


def headline(alert: Alert) -> str:
    """One line: what fell and by how much, or how late the data is.

    >>> from datetime import date
    >>> headline(Alert(kind="clicks_drop", before=1200, after=696,
    ...                period_start=date(2026, 11, 30), period_end=date(2026, 12, 6)))
    'Clicks fell −42.0% (1,200 → 696 in 7 days)'
    >>> headline(Alert(kind="page_drop", page_url="https://a.example/x", before=300, after=120,
    ...                period_start=date(2026, 11, 30), period_end=date(2026, 12, 6)))
    'https://a.example/x: clicks fell −60.0% (300 → 120 in 7 days)'
    >>> headline(Alert(kind="stale_data", before=4, after=9))
    'No new data for 9 days (expected within 4)'
    """
    if alert.kind == AlertKind.STALE_DATA:
        return f"No new data for {alert.after:.0f} days (expected within {alert.before:.0f})"
    change = (alert.after - alert.before) / alert.before if alert.before else None
    days = (alert.period_end - alert.period_start).days + 1
    fell = f"clicks fell {signed_percent(change)} ({number(alert.before)} → {number(alert.after)} in {days} days)"
    return f"{alert.page_url}: {fell}" if alert.kind == AlertKind.PAGE_DROP else fell[0].upper() + fell[1:]


def period(alert: Alert) -> str:
    """The days judged; for late data, its newest day.

    >>> from datetime import date
    >>> period(Alert(kind="clicks_drop", period_start=date(2026, 11, 30), period_end=date(2026, 12, 6)))
    '2026-11-30 → 2026-12-06'
    >>> period(Alert(kind="stale_data", period_start=date(2026, 11, 28), period_end=date(2026, 12, 6)))
    'no data after 2026-11-27'
    """
    if alert.kind == AlertKind.STALE_DATA:
        return f"no data after {alert.period_start - timedelta(days=1):%Y-%m-%d}"
    return f"{alert.period_start.isoformat()} → {alert.period_end.isoformat()}"


def acknowledged(alert: Alert) -> str:
    """Who acknowledged it and when, or empty while it is open."""
    if alert.acknowledged_at is None:
        return ""
    who = alert.acknowledged_by.get_username() if alert.acknowledged_by_id else "a removed user"
    return f"by {who}, {alert.acknowledged_at:%Y-%m-%d %H:%M} UTC"
