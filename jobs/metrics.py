"""The job queue's Prometheus families, read from the database at scrape time (``seoinsight.metrics``).

Every replica answers the same, since nothing is counted in memory. Labels
are job types, statuses and process kinds only: never an org. The finished
rows are read over ``FINISHED_WINDOW`` (the partial indexes serve the live
ones; the table of finished jobs only grows).
"""

from __future__ import annotations

from django.db import connection
from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily

from . import registry
from .models import Job, Process, ProcessKind
from .processes import ALIVE_WITHIN

FINISHED_WINDOW = 3600
QUANTILES = (0.5, 0.95, 0.99)

FINISHED = f"""
SELECT type, status, count(*),
       percentile_cont(ARRAY{list(QUANTILES)}::float8[]) WITHIN GROUP (
           ORDER BY EXTRACT(EPOCH FROM finished_at - started_at)),
       max(EXTRACT(EPOCH FROM finished_at - started_at))
FROM jobs
WHERE status IN ('done', 'failed') AND finished_at >= now() - make_interval(secs => %s)
  AND started_at IS NOT NULL
GROUP BY type, status
"""

OLDEST_QUEUED = """
SELECT type, EXTRACT(EPOCH FROM now() - min(created_at)) FROM jobs WHERE status = 'queued' GROUP BY type
"""


def collect() -> list:
    live = GaugeMetricFamily("seoinsight_jobs", "Live jobs (queued, running) by type and status.",
                             labels=["type", "status"])
    for row in Job.objects.live().values("type", "status") \
            .annotate(n=Count("id")).order_by():
        live.add_metric([row["type"], row["status"]], row["n"])

    oldest = GaugeMetricFamily("seoinsight_jobs_oldest_queued_age_seconds",
                               "Age of the oldest queued job, by type.", labels=["type"])
    zombies = GaugeMetricFamily("seoinsight_jobs_zombies",
                                "Running jobs silent past their type's stale_after (the sweep's rule).",
                                labels=["type"])
    finished = GaugeMetricFamily("seoinsight_jobs_finished", f"Jobs finished in the last {FINISHED_WINDOW} s.",
                                 labels=["type", "status"])
    duration = GaugeMetricFamily("seoinsight_job_duration_seconds",
                                 f"Run time of jobs finished in the last {FINISHED_WINDOW} s "
                                 "(quantile 1 is the longest).", labels=["type", "status", "quantile"])
    with connection.cursor() as cursor:
        cursor.execute(OLDEST_QUEUED)
        for job_type, age in cursor.fetchall():
            oldest.add_metric([job_type], float(age))
        cursor.execute(FINISHED, [FINISHED_WINDOW])
        for job_type, status, count, quantiles, longest in cursor.fetchall():
            finished.add_metric([job_type, status], count)
            for q, value in zip(QUANTILES, quantiles, strict=True):
                duration.add_metric([job_type, status, f"{q:g}"], float(value))
            duration.add_metric([job_type, status, "1"], float(longest))
    counted = dict(Job.objects.stale().values_list("type").annotate(n=Count("id")).order_by())
    for job_type in sorted(set(registry.all_types()) | set(counted)):
        zombies.add_metric([job_type], counted.get(job_type, 0))

    processes = GaugeMetricFamily("seoinsight_processes",
                                  f"runjobs and pollmail processes seen in the last {ALIVE_WITHIN:g} s.",
                                  labels=["kind"])
    seen = dict(Process.objects.seen_within(ALIVE_WITHIN).values_list("kind").annotate(n=Count("id")).order_by())
    for kind in ProcessKind.values:
        processes.add_metric([kind], seen.get(kind, 0))
    return [live, oldest, zombies, finished, duration, processes]
