"""What is open (not yet acknowledged) per site, for the pages that show alerts beside other figures.

Callers pass site ids already scoped to the user's org; the answer holds every asked id, empty or not.
"""

from __future__ import annotations

from collections.abc import Iterable

from insight.models import Alert


def open_by_site(site_ids: Iterable[int]) -> dict[int, list[Alert]]:
    """Each asked site's unacknowledged alerts, newest first (one query, the ``alert_open`` index)."""
    ids = list(dict.fromkeys(int(i) for i in site_ids))
    found: dict[int, list[Alert]] = {site_id: [] for site_id in ids}
    if not ids:
        return found
    for alert in Alert.objects.filter(site_id__in=ids, acknowledged_at__isnull=True).order_by("-created_at", "-pk"):
        found[alert.site_id].append(alert)
    return found
