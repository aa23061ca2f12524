"""The downstream outbox's Prometheus families, read at scrape time (``seoinsight.metrics``).

Its depth, its capacity and the age of its oldest document: the gate that stops
mail intake when full (``outbox.capacity``).
"""

from __future__ import annotations

from prometheus_client.core import GaugeMetricFamily

from . import capacity


def collect() -> list:
    current = capacity.depth()
    held = GaugeMetricFamily("seoinsight_outbox_depth", "Accepted documents the downstream has not acknowledged.")
    held.add_metric([], current.held)
    limit = GaugeMetricFamily("seoinsight_outbox_capacity",
                              "OUTBOX_CAPACITY: past it, intake stops (0 when the outbox is off).")
    limit.add_metric([], current.capacity if capacity.enabled() else 0)
    oldest = GaugeMetricFamily("seoinsight_outbox_oldest_age_seconds", "Age of the oldest held document (0 if none).")
    oldest.add_metric([], current.oldest_seconds or 0.0)
    return [held, limit, oldest]
