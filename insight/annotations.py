"""The notes operators put on their sites' timelines: read for a period (chart, portfolio tooltip, CSVs),
and what a note may be (``checked``: a day from 2000-01-01 to a year from today, one line of 1-200 characters).

Callers pass site ids already scoped to the user's org; every asked id gets a key, empty when it has no note.
"""

from __future__ import annotations

import datetime as dt
import unicodedata
from collections.abc import Iterable
from typing import NamedTuple

from seoinsight import query_params

from .models import Annotation

MAX_TEXT = Annotation._meta.get_field("text").max_length
# Control characters (C0, DEL, C1) and line or paragraph separators: a note is one line of plain words.
REFUSED_CATEGORIES = {"Cc", "Zl", "Zp"}


class Checked(NamedTuple):
    """A note as asked: ``day`` and ``text`` when both are good, else ``errors`` in plain words."""

    day: dt.date | None
    text: str
    errors: list[str]


def for_sites(site_ids: Iterable[int], start: dt.date, end: dt.date) -> dict[int, list[Annotation]]:
    """Each site's notes dated start..end (both included), by day then by when they were added."""
    ids = list(dict.fromkeys(int(i) for i in site_ids))
    found: dict[int, list[Annotation]] = {site_id: [] for site_id in ids}
    if not ids or end < start:
        return found
    rows = Annotation.objects.filter(site_id__in=ids, day__gte=start, day__lte=end).order_by("site_id", "day", "pk")
    for note in rows:
        found[note.site_id].append(note)
    return found


def latest_day(today: dt.date) -> dt.date:
    """The last day a note may be dated: the same day a year on (Feb 29 becomes Feb 28).

    >>> latest_day(dt.date(2026, 12, 8)), latest_day(dt.date(2028, 2, 29))
    (datetime.date(2027, 12, 8), datetime.date(2029, 2, 28))
    """
    try:
        return today.replace(year=today.year + 1)
    except ValueError:
        return today.replace(year=today.year + 1, day=28)


def checked(day: str, text: str, today: dt.date) -> Checked:
    """``day`` (YYYY-MM-DD) and ``text`` as typed, judged: every reason they cannot be saved, or none."""
    errors = []
    try:
        when = query_params.day(day, latest=latest_day(today), latest_name="a year from today", what="The day")
    except query_params.BadParameter as problem:
        when, errors = None, [str(problem)]
    text = text.strip()
    if not text:
        errors.append("The note is empty: write what happened on that day.")
    elif len(text) > MAX_TEXT:
        errors.append(f"The note is {len(text):,} characters long; it may be {MAX_TEXT} at most.")
    elif any(unicodedata.category(c) in REFUSED_CATEGORIES for c in text):
        errors.append("The note holds a control character or a line break: write it on one line.")
    return Checked(None if errors else when, text, errors)
