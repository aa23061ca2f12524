"""Mail intake's Prometheus families, read from the database at scrape time (``seoinsight.metrics``).

Per mailbox, labelled by its id only (never its address, its org or its
error text): seconds since its last successful poll and its failures in a
row. Mailboxes counted by health (``mailpoll.health``, the admin's own rule),
folders whose last sync failed, documents waiting in the triage queue, failing post-actions, and the live (IMAP IDLE) loops: live mailboxes,
the watches held (``LiveWatch``) and each watch's time since its last event.
"""

from __future__ import annotations

from django.db import connection
from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily

from . import health
from .models import Mailbox

PER_MAILBOX = """
SELECT id, EXTRACT(EPOCH FROM now() - last_success_at), consecutive_failures
FROM mailpoll_mailbox WHERE enabled ORDER BY id
"""

LIVE = """
SELECT count(*) FILTER (WHERE m.live AND m.enabled),
       count(w.id) FILTER (WHERE m.live AND m.enabled)
FROM mailpoll_mailbox AS m LEFT JOIN mailpoll_livewatch AS w ON w.mailbox_id = m.id
"""

LIVE_EVENTS = """
SELECT w.mailbox_id, EXTRACT(EPOCH FROM now() - COALESCE(w.last_event_at, w.since))
FROM mailpoll_livewatch AS w JOIN mailpoll_mailbox AS m ON m.id = w.mailbox_id
WHERE m.live AND m.enabled ORDER BY w.mailbox_id
"""

# The triage queue (the partial index attachment_needs_route): documents waiting for a person to pick their site.
WAITING_FOR_SITE = """
SELECT COALESCE(r.mailbox_id, 0), count(*) FROM mailpoll_attachment AS a JOIN mailpoll_request AS r ON r.id = a.request_id
WHERE a.status = 'needs_route' GROUP BY 1 ORDER BY 1
"""

# Post-actions that are not going well (the partial index postaction_due serves the first): retrying, and given up.
POST_ACTION_PROBLEMS = """
SELECT mailbox_id, count(*) FILTER (WHERE status = 'pending' AND attempts > 0),
       count(*) FILTER (WHERE status = 'failed')
FROM mailpoll_postaction WHERE status = 'failed' OR (status = 'pending' AND attempts > 0)
GROUP BY mailbox_id ORDER BY mailbox_id
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
    live = GaugeMetricFamily("seoinsight_live_mailboxes",
                             "Enabled live mailboxes (wanted) and those with a watch recorded (watched).",
                             labels=["state"])
    live_silence = GaugeMetricFamily("seoinsight_live_watch_last_event_age_seconds",
                                     "Seconds since a live watch's last event (or its start).", labels=["mailbox"])
    waiting = GaugeMetricFamily("seoinsight_mail_documents_waiting_for_site",
                                "Mailed documents held for triage (no rule routed them, or their sender was not "
                                "authenticated as required), by mailbox (0: its mailbox was deleted).",
                                labels=["mailbox"])
    post_actions = GaugeMetricFamily("seoinsight_mail_post_actions_failing",
                                     "Post-actions on the source mailbox that failed: retrying (waiting for their "
                                     "next try) or failed (out of attempts, waiting for a person), by mailbox.",
                                     labels=["mailbox", "state"])
    with connection.cursor() as cursor:
        cursor.execute(POST_ACTION_PROBLEMS)
        for pk, retrying, failed in cursor.fetchall():
            post_actions.add_metric([str(pk), "retrying"], retrying)
            post_actions.add_metric([str(pk), "failed"], failed)
        cursor.execute(WAITING_FOR_SITE)
        for pk, count in cursor.fetchall():
            waiting.add_metric([str(pk)], count)
        cursor.execute(LIVE)
        wanted, watched = cursor.fetchone()
        live.add_metric(["wanted"], wanted)
        live.add_metric(["watched"], watched)
        cursor.execute(LIVE_EVENTS)
        for pk, age in cursor.fetchall():
            live_silence.add_metric([str(pk)], float(age))
        cursor.execute(PER_MAILBOX)
        for pk, age, failed in cursor.fetchall():
            if age is not None:
                since.add_metric([str(pk)], float(age))
            failures.add_metric([str(pk)], failed)
        cursor.execute(FOLDER_ERRORS)
        for pk, count in cursor.fetchall():
            folder_errors.add_metric([str(pk)], count)
    counts = Mailbox.objects.aggregate(**{state: Count("pk", filter=rule) for state, rule in health.FILTERS.items()})
    for state, count in counts.items():
        by_health.add_metric([state], count)
    return [since, failures, by_health, folder_errors, live, live_silence, waiting, post_actions]
