"""Mail intake's Prometheus families, read from the database at scrape time (``seoinsight.metrics``).

Per mailbox, labelled by its id only (never its address, its org or its
error text): seconds since its last successful poll and its failures in a
row. Mailboxes counted by health (``mailpoll.health``, the admin's own rule),
and folders whose last sync failed.
"""

from __future__ import annotations

from django.db import connection
from prometheus_client.core import GaugeMetricFamily

from . import health
from .models import Mailbox

PER_MAILBOX = """
SELECT id, EXTRACT(EPOCH FROM now() - last_success_at), consecutive_failures
FROM mailpoll_mailbox WHERE enabled ORDER BY id
"""

FOLDER_ERRORS = """
SELECT mailbox_id, count(*) FROM mailpoll_foldercursor WHERE last_error <> '' GROUP BY mailbox_id ORDER BY mailbox_id
"""


def collect() -> list:
    since = GaugeMetricFamily("seoinsight_mailbox_last_success_age_seconds",
                              "Seconds since the mailbox's last successful poll (enabled mailboxes that had one).",
                              labels=["mailbox"])
    failures = GaugeMetricFamily("seoinsight_mailbox_consecutive_failures",
                                 "Failed polls in a row (0 once a poll succeeds).", labels=["mailbox"])
    by_health = GaugeMetricFamily("seoinsight_mailboxes", "Mailboxes by health.", labels=["health"])
    folder_errors = GaugeMetricFamily("seoinsight_mailbox_folders_failing",
                                      "Folders whose last sync recorded an error, by mailbox.", labels=["mailbox"])
    with connection.cursor() as cursor:
        cursor.execute(PER_MAILBOX)
        for pk, age, failed in cursor.fetchall():
            if age is not None:
                since.add_metric([str(pk)], float(age))
            failures.add_metric([str(pk)], failed)
        cursor.execute(FOLDER_ERRORS)
        for pk, count in cursor.fetchall():
            folder_errors.add_metric([str(pk)], count)
    for state, rule in health.FILTERS.items():
        by_health.add_metric([state], Mailbox.objects.filter(rule).count())
    return [since, failures, by_health, folder_errors]
