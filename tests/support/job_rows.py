"""Bulk rows for tests of which plan the queue's statements get on a table of realistic size."""

from __future__ import annotations

from django.db import connection


def add_finished_jobs(count: int = 20000) -> None:
    """Insert ``count`` done no-op jobs of org 'demo', one second apart in age, then ANALYZE ``jobs``.

    Finished jobs are most of a production table; a claim must not read them.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO jobs (org_id, type, status, attempts, started_at, finished_at, created_at)
            SELECT 'demo', 'noop', 'done', 1, now(), now(), now() - make_interval(secs => g)
            FROM generate_series(1, %s) AS g
            """,
            [count],
        )
        cursor.execute("ANALYZE jobs")
