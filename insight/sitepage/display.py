"""How the site page writes its figures, and which way a change points. Pure.

Clicks and impressions change in percent; CTR in percentage points and position
in places, as Search Console shows them. A lower position is better, so its
fall is good news (``tone``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time

from seoinsight.figure_text import DASH, number, percent, position, signed, signed_percent  # noqa: F401  (the page writes them as display.*)

from ..alerts import describe
from .listing import change


@dataclass(frozen=True)
class Sums:
    """Figures of a set of rows: CTR over the rows with clicks and impressions, position weighted by impressions."""

    clicks: int | None = None
    impressions: int | None = None
    ctr: float | None = None
    position: float | None = None
    rows: int = 0


@dataclass(frozen=True)
class Metric:
    """One figure of the totals: its name, how it is written and how its change is measured."""

    name: str
    label: str
    higher_is_better: bool = True

    def value(self, sums) -> float | None:
        return getattr(sums, self.name)

    def text(self, value: float | None) -> str:
        return {"ctr": percent, "position": position}.get(self.name, number)(value)

    def raw(self, value: float | None):
        """The figure in a CSV cell: CTR in percent with 2 decimals, position with 1, counts as they are.

        >>> METRICS[2].raw(0.0349999), METRICS[3].raw(4.26), METRICS[0].raw(12), METRICS[0].raw(None)
        (3.5, 4.3, 12, '')
        """
        if value is None:
            return ""
        if self.name == "ctr":
            return round(value * 100, 2)
        return round(value, 1) if self.name == "position" else value

    @property
    def change_unit(self) -> str:
        return {"ctr": "points", "position": "places"}.get(self.name, "%")

    def raw_change(self, current: float | None, previous: float | None):
        """The change in a CSV cell, a number in ``change_unit`` (as ``change`` writes it); blank when unknown.

        >>> METRICS[0].raw_change(60, 100), METRICS[2].raw_change(0.031, 0.025), METRICS[3].raw_change(4.2, 5.0)
        (-40.0, 0.6, -0.8)
        >>> METRICS[0].raw_change(5, 0), METRICS[3].raw_change(None, 5.0)
        ('', '')
        """
        if self.name in ("ctr", "position"):
            if current is None or previous is None:
                return ""
            return round((current - previous) * 100, 2) if self.name == "ctr" else round(current - previous, 1)
        delta = change(current, previous)
        return "" if delta is None else round(delta * 100, 1)

    def change(self, current: float | None, previous: float | None) -> tuple[str, str]:
        """(the change written out, its tone: ``better``, ``worse`` or empty when unchanged or unknown).

        >>> METRICS[0].change(120, 100), METRICS[2].change(0.031, 0.025), METRICS[3].change(4.2, 5.0)
        (('+20.0%', 'better'), ('+0.60 pts', 'better'), ('−0.8', 'better'))
        >>> METRICS[0].change(5, 0), METRICS[3].change(None, 5.0), METRICS[1].change(90, 100)
        (('—', ''), ('—', ''), ('−10.0%', 'worse'))
        """
        if self.name in ("ctr", "position"):
            if current is None or previous is None:
                return DASH, ""
            delta = current - previous
            text = signed(delta * 100, ".2f") + " pts" if self.name == "ctr" else signed(delta, ".1f")
        else:
            delta = change(current, previous)
            if delta is None:
                return DASH, ""
            text = signed_percent(delta)
        if not text.startswith(("+", "−")):
            return text, ""
        return text, "better" if (delta > 0) == self.higher_is_better else "worse"


METRICS = (
    Metric("clicks", "Clicks"),
    Metric("impressions", "Impressions"),
    Metric("ctr", "CTR"),
    Metric("position", "Average position", higher_is_better=False),
)
CLICKS, IMPRESSIONS, CTR, POSITION = METRICS


def chart(points, period=None, marks: dict | None = None) -> dict:
    """The chart's data for site_page.js: one x per row period (its first day, UTC seconds), a series per figure.

    ``points`` are (Period, Sums) in order. Daily data gets an x for every day of ``period``,
    None on a day without data, so the lines break there instead of bridging the gap.
    ``labels`` name each x's day or period. Every figure is a number (int or float) or None, never text.
    ``marks`` (``marks()``) are the notes and open alerts drawn over it; none by default.

    >>> from seoinsight.periods import Period
    >>> from datetime import date
    >>> data = chart([(Period(date(2026, 5, 1), date(2026, 5, 1)), Sums(3, 30, 0.1, 2.0)),
    ...               (Period(date(2026, 5, 3), date(2026, 5, 3)), Sums(4, 40, 0.1, 2.5))],
    ...              Period(date(2026, 5, 1), date(2026, 5, 3)))
    >>> data["labels"], data["clicks"], data["position"], data["x"][1] - data["x"][0]
    (['2026-05-01', '2026-05-02', '2026-05-03'], [3, None, 4], [2.0, None, 2.5], 86400)
    """
    daily = all(p.start == p.end for p, _ in points)
    if daily and period is not None:
        by_day = dict((p.start, sums) for p, sums in points)
        points = [(day, by_day.get(day.start)) for day in period.each_day()]
    return {
        "x": [int(datetime.combine(p.start, time(), tzinfo=UTC).timestamp()) for p, _ in points],
        "labels": [str(p) for p, _ in points],
        "clicks": [_count(s and s.clicks) for _, s in points],
        "impressions": [_count(s and s.impressions) for _, s in points],
        "position": [None if s is None or s.position is None else round(float(s.position), 2) for _, s in points],
        "daily": daily,
        **(marks or {"notes": [], "alerts": []}),
    }


def marks(notes, alerts) -> dict:
    """The chart's markers, x in UTC seconds as its points': each note at its day, each alert over its days,
    said as everywhere else (``alerts.describe``).

    >>> from insight.models import Alert, Annotation
    >>> found = marks([Annotation(pk=4, day=date(2026, 5, 2), text="moved to HTTPS")],
    ...               [Alert(pk=9, kind="stale_data", period_start=date(2026, 5, 2), period_end=date(2026, 5, 3),
    ...                      before=2, after=5)])
    >>> found["notes"][0]["x"], found["notes"][0]["text"], found["alerts"][0]["x1"] - found["alerts"][0]["x0"]
    (1777680000, 'moved to HTTPS', 86400)
    >>> found["alerts"][0]["when"], found["alerts"][0]["text"]
    ('no data after 2026-05-01', 'No new data for 5 days (expected within 2)')
    """
    return {
        "notes": [{"id": note.pk, "x": _seconds(note.day), "day": str(note.day), "text": note.text} for note in notes],
        "alerts": [{"id": alert.pk, "kind": alert.kind, "x0": _seconds(alert.period_start),
                    "x1": _seconds(alert.period_end), "when": describe.period(alert),
                    "text": describe.headline(alert)} for alert in alerts],
    }


def _seconds(day: date) -> int:
    return int(datetime.combine(day, time(), tzinfo=UTC).timestamp())


def _count(value) -> int | None:
    """A count as a JSON number: PostgreSQL's sums of bigints are Decimals, which JSON writes as text
    (and the chart's scale would then compare "9" > "378")."""
    return None if value is None else int(value)
