"""The outbox claim (outbox.sql.CLAIM) reads its index, not the table, on an outbox far past its usual size,
and takes one entry, never more, whatever the planner believes about the table.

The index ``outbox_due_idx`` (next_attempt_at, id) gives the claim its order: the scan walks entries oldest
due first and stops at the first it can take, so waiting entries that back off into the future are never
read. Without it, the planner reads the whole table and sorts it: a Seq Scan on every claim.
"""

import json

import pytest
from django.db import connection

from outbox import entries, sql
from outbox.models import Entry
from tests.support.planner import as_subquery_in_from, believe_nearly_empty

pytestmark = pytest.mark.django_db

BACKING_OFF, IN_FLIGHT, DUE = 20_000, 20, 5


def fill(org) -> None:
    """BACKING_OFF entries due in an hour or more, IN_FLIGHT being sent under a live lease (oldest of all), and
    DUE waiting entries due an hour ago, in that order of ``next_attempt_at``: the first due is ``test:21``."""
    with connection.cursor() as cur:
        cur.execute("""
            INSERT INTO outbox_entry (key, org_id, document_ref, source, document, file, file_size, file_sha256,
                                      state, attempts, last_error, claimed_by, claim_token, lease_until,
                                      next_attempt_at, created_at)
            SELECT gen_random_uuid(), %(org)s, 'test:' || g, 'test', '{}'::jsonb, '', 0, '',
                   CASE WHEN g <= %(in_flight)s THEN 'sending' ELSE 'waiting' END, 1, '',
                   CASE WHEN g <= %(in_flight)s THEN 'sender-' || g ELSE '' END,
                   CASE WHEN g <= %(in_flight)s THEN gen_random_uuid() END,
                   CASE WHEN g <= %(in_flight)s THEN now() + interval '1 hour' END,
                   CASE WHEN g <= %(in_flight)s THEN now() - interval '1 day'
                        WHEN g <= %(in_flight)s + %(due)s THEN now() - interval '1 hour'
                        ELSE now() + interval '1 hour' END + g * interval '1 ms',
                   now() - interval '1 day'
            FROM generate_series(1, %(n)s) AS g
        """, {"org": org.pk, "in_flight": IN_FLIGHT, "due": DUE, "n": BACKING_OFF + IN_FLIGHT + DUE})
        cur.execute("ANALYZE outbox_entry")


def explain(statement: str, params: dict, options: str = "") -> str:
    """The plan of ``statement`` (run for real and rolled back with ANALYZE among ``options``), as JSON text."""
    with connection.cursor() as cur:
        cur.execute("SAVEPOINT explain")
        cur.execute(f"EXPLAIN ({options}{', ' if options else ''}FORMAT JSON) {statement}", params)
        (plan,) = cur.fetchone()
        cur.execute("ROLLBACK TO SAVEPOINT explain")
    return json.dumps(plan if isinstance(plan, list) else json.loads(plan), indent=1)


def test_the_claim_walks_its_index_and_stops_at_the_first_due_entry(org):
    fill(org)
    params = {"worker": "explain", "lease": 60.0}

    plan = explain(sql.CLAIM, params)
    assert '"Index Name": "outbox_due_idx"' in plan, plan
    assert '"Node Type": "Seq Scan"' not in plan, plan

    # Run: it reads the in-flight entries and the first due one, not the 20,000 behind them.
    analyzed = json.loads(explain(sql.CLAIM, params, "ANALYZE, BUFFERS"))[0]["Plan"]
    buffers = analyzed["Shared Hit Blocks"] + analyzed["Shared Read Blocks"]
    assert buffers < 100, f"the claim touched {buffers} buffers:\n{json.dumps(analyzed, indent=1)[:3000]}"

    claimed = entries.claim("test")
    assert claimed is not None and claimed.document_ref == f"test:{IN_FLIGHT + 1}"


# The claim as it was written first; under the statistics below every run of its subquery locks the next entry.
SUBQUERY_IN_FROM = as_subquery_in_from(sql.CLAIM)


def claimed_by(worker: str) -> int:
    return Entry.objects.filter(state="sending", claimed_by=worker).count()


def test_one_claim_takes_one_entry_whatever_the_planner_believes(downstream, held):
    held(3)
    believe_nearly_empty("outbox_entry")

    with connection.cursor() as cur:  # the hazard is real under these statistics: the old form took them all
        cur.execute("SAVEPOINT old_form")
        cur.execute(SUBQUERY_IN_FROM, {"worker": "old", "lease": 60.0})
        assert claimed_by("old") > 1
        cur.execute("ROLLBACK TO SAVEPOINT old_form")

    first = entries.claim("new")
    assert first is not None and claimed_by("new") == 1
    assert entries.claim("new") is not None and claimed_by("new") == 2
