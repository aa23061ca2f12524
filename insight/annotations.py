"""The notes operators put on their sites' timelines, read for a period (chart, portfolio tooltip, CSVs).

Callers pass site ids already scoped to the user's org; every asked id gets a key, empty when it has no note.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from .models import Annotation


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
