"""The downstream outbox's Prometheus families, read at scrape time (``seoinsight.metrics``).

Its depth, its capacity and the age of its oldest document: the gate that stops
mail intake when full (``outbox.capacity``); and the documents overdue, due for
longer than OUTBOX_OVERDUE_SECONDS with no sender taking them (``outbox.watch``).
"""

from __future__ import annotations

from prometheus_client.core import GaugeMetricFamily

from . import capacity, watch


def collect() -> list:
    current = capacity.depth()
    held = GaugeMetricFamily("seoinsight_outbox_depth", "Accepted documents the downstream has not acknowledged.")
    held.add_metric([], current.held)
    limit = GaugeMetricFamily("seoinsight_outbox_capacity",
                              "OUTBOX_CAPACITY: past it, intake stops (0 when the outbox is off).")
    limit.add_metric([], current.capacity if capacity.enabled() else 0)
    oldest = GaugeMetricFamily("seoinsight_outbox_oldest_age_seconds", "Age of the oldest held document (0 if none).")
    oldest.add_metric([], current.oldest_seconds or 0.0)
    late = watch.overdue()
    overdue = GaugeMetricFamily("seoinsight_outbox_overdue",
                                "Held documents due longer than OUTBOX_OVERDUE_SECONDS with no sender taking them.")
    overdue.add_metric([], late.count)
    overdue_age = GaugeMetricFamily("seoinsight_outbox_oldest_overdue_seconds",
                                    "How long the longest-overdue document has been due (0 if none is overdue).")
    overdue_age.add_metric([], late.oldest_seconds)
    return [held, limit, oldest, overdue, overdue_age]
