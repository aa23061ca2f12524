"""A site's daily clicks as a small inline SVG, drawn on the server (no script). Pure.

One x per day of the period; a day without daily rows breaks the line instead of bridging it. Every
day with data has a ``<title>`` (its clicks, and the notes of that day), shown as the browser's
tooltip; a day with a note has a marker. The y axis runs from 0 to the period's highest day, so
every point lies inside the drawing.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date, timedelta
from functools import lru_cache
from html import escape

from django.utils.safestring import SafeString, mark_safe

from seoinsight.periods import Period

WIDTH, HEIGHT, PAD = 110, 28, 2


@lru_cache(maxsize=8)
def axis(period: Period) -> tuple[tuple[date, float, str], ...]:
    """Each day of ``period`` with its x and the start of its tooltip's rectangle: the same for every site."""
    step = (WIDTH - 2 * PAD) / max(period.days - 1, 1)
    found = []
    for n in range(period.days):
        day, x = period.start + timedelta(days=n), round(PAD + n * step, 1)
        found.append((day, x, f'<rect x="{round(x - step / 2, 1)}" width="{round(step, 1)}" height="{HEIGHT}">'
                               f'<title>{day:%Y-%m-%d}: '))
    return tuple(found)


def points(period: Period, days: dict[date, int | None]) -> list[list[tuple[float, float]]]:
    """The line's runs of (x, y), one run per stretch of consecutive days with clicks.

    >>> from datetime import date, timedelta
    >>> p = Period(date(2026, 5, 1), date(2026, 5, 5))
    >>> points(p, {date(2026, 5, 1): 0, date(2026, 5, 2): 10, date(2026, 5, 4): 5})
    [[(2.0, 26.0), (28.5, 2.0)], [(81.5, 14.0)]]
    """
    top = max([v for v in days.values() if v is not None], default=0) or 1
    scale = (HEIGHT - 2 * PAD) / top
    runs, run = [], []
    for day, x, _ in axis(period):
        clicks = days.get(day)
        if clicks is None:
            if run:
                runs.append(run)
            run = []
            continue
        run.append((x, round(HEIGHT - PAD - clicks * scale, 1)))
    if run:
        runs.append(run)
    return runs


def svg(period: Period, days: dict[date, int | None], notes: list[tuple[date, str]] = ()) -> SafeString:
    """The sparkline of ``days`` (day -> clicks) over ``period``, with ``notes`` (day, text) in its tooltips."""
    noted = defaultdict(list)
    for day, text in notes:
        noted[day].append(escape(text))
    parts = []
    for run in points(period, days):
        if len(run) == 1:
            x, y = run[0]
            parts.append(f'<circle cx="{x}" cy="{y}" r="1.5" class="spark-dot"/>')
        else:
            parts.append(f'<polyline points="{" ".join(f"{x},{y}" for x, y in run)}" class="spark-line"/>')
    for day, x, rect in axis(period):
        clicks = days.get(day, False)
        if day in noted:
            parts.append(f'<line x1="{x}" x2="{x}" y1="0" y2="{HEIGHT}" class="spark-note"/>')
            says = [f"{clicks:,} clicks" if clicks not in (None, False) else "no data"]
            parts.append(rect + " · ".join(says + [f"note: {text}" for text in noted[day]]) + "</title></rect>")
        elif clicks is not False:
            parts.append(rect + (f"{clicks:,} clicks" if clicks is not None else "no data") + "</title></rect>")
    label = f"Daily clicks, {period}" + (f", {len(noted)} day{'s' * (len(noted) > 1)} with notes" if noted else "")
    return mark_safe(f'<svg class="sparkline" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
                     f'role="img" aria-label="{escape(label)}">{"".join(parts)}</svg>')
