"""Which statement queues many jobs fastest: ``INSERT … SELECT`` against ``COPY``, with the dedup rules kept.

    .venv/bin/python -m bench.enqueue_paths [--jobs 20000] [--batch 1000] [--rounds 5]

Not a test: it prints figures and exits 0 unless something crashed. In a throw-away database
migrated by the app (``seoinsight_bench_enqueue``), each path queues ``--jobs`` noop jobs in
batches of ``--batch``, each batch one transaction, ``--rounds`` times interleaved (medians).
Two kinds of batch: ``keyless`` (no item has a dedup_key) and ``keyed`` (every other item has
one, all distinct: none is skipped, but every row is arbitrated).

- ``raw minimal``: ``bench.queue``'s raw bulk INSERT into its minimal table, the goal's yardstick;
- ``unnest, before``: ``enqueue_many``'s statement before issue 22: ``unnest`` of two ``text[]``,
  ``ON CONFLICT`` for every batch, ``RETURNING id, pg_notify(…)`` per row;
- ``unnest, count``: the same, answering a count and notifying once;
- ``unnest, keyless``: that without the key column and ``ON CONFLICT``;
- ``split``: ``jobs.sql.ENQUEUE_MANY``: the payloads as one text, a line each, split by
  ``string_to_table``, the keys as one JSON array, instead of two ``text[]`` (psycopg writes
  a list of strings as an array literal in Python, and the server parses it back);
- ``split, no order``: the same without ``WITH ORDINALITY … ORDER BY`` (the sort it saves);
- ``split, keyless``: ``jobs.sql.ENQUEUE_MANY_KEYLESS``: no key column, no ``ON CONFLICT``
  (a keyless row cannot conflict; ``ON CONFLICT`` makes every row a speculative insertion);
- ``split, keyless, server ids``: the same leaving each row's id to the column's default
  (``uuidv7()``), as it did before ``jobs.ids``;
- ``copy``: ``COPY jobs (…) FROM STDIN`` straight into the table, then one NOTIFY, in a
  transaction. Keyless batches only: COPY has no ON CONFLICT, so one held key fails the batch;
- ``copy, staged``: ``COPY`` into a temporary table, then ``INSERT … SELECT … ON CONFLICT DO
  NOTHING`` from it: the dedup rules kept, two statements and a temp table per batch;
- ``enqueue_many()``: ``jobs.queue.enqueue_many`` itself, through Django, as an app calls it.

Besides the rate, each path's CPU per job: this process's (the client) and its server
backend's (from /proc, so only with the server on this machine).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from bench import raw_queue
from bench.common import app_bench_database, connect, headline, server_version

BENCH_DB = "seoinsight_bench_enqueue"
COLUMNS = "org_id, type, payload, dedup_key, enqueued_key, priority, queue_name"
KEYLESS_COLUMNS = "org_id, type, payload, priority, queue_name"
STAGE = f"""
CREATE TEMP TABLE IF NOT EXISTS enqueue_stage (n bigint GENERATED ALWAYS AS IDENTITY, {COLUMNS.replace(', ', ' text, ')} text)
ON COMMIT DELETE ROWS
"""
FROM_STAGE = f"""
INSERT INTO jobs ({COLUMNS})
SELECT org_id, type, payload::jsonb, dedup_key, enqueued_key, priority::smallint, queue_name FROM enqueue_stage ORDER BY n
ON CONFLICT (dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
"""
# enqueue_many's statement before issue 22, for comparison.
BEFORE = """
INSERT INTO jobs (org_id, type, payload, dedup_key, enqueued_key, run_after, priority, queue_name)
SELECT %(org_id)s, %(type)s, item.payload::jsonb, item.dedup_key, item.dedup_key,
       %(run_after)s, %(priority)s, %(queue_name)s
FROM unnest(%(payloads)s::text[], %(dedup_keys)s::text[]) WITH ORDINALITY AS item(payload, dedup_key, n)
ORDER BY item.n
ON CONFLICT (dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
RETURNING id, pg_notify(%(channel)s, '')
"""
COUNTED = """
WITH queued AS ({insert} RETURNING 1)
SELECT count.n, pg_notify(%(channel)s, '') FROM (SELECT count(*) AS n FROM queued) AS count WHERE count.n > 0
"""
UNNEST_COUNT = COUNTED.format(insert=BEFORE.split("RETURNING")[0])
UNNEST_KEYLESS = COUNTED.format(insert="""
INSERT INTO jobs (org_id, type, payload, run_after, priority, queue_name)
SELECT %(org_id)s, %(type)s, item.payload::jsonb, %(run_after)s, %(priority)s, %(queue_name)s
FROM unnest(%(payloads)s::text[]) WITH ORDINALITY AS item(payload, n)
ORDER BY item.n
""")
RAW_BULK = f"INSERT INTO {raw_queue.MINIMAL} (payload) SELECT p::jsonb FROM unnest(%s::text[]) AS p"


# ENQUEUE_MANY_KEYLESS before the ids were made by the caller (jobs.ids): the column's default, uuidv7().
SPLIT_KEYLESS_SERVER_IDS = """
WITH queued AS (
    INSERT INTO jobs (org_id, type, payload, run_after, priority, queue_name)
    SELECT %(org_id)s, %(type)s, item.payload::jsonb, %(run_after)s, %(priority)s, %(queue_name)s
    FROM string_to_table(%(payloads)s, E'\\n') WITH ORDINALITY AS item(payload, n)
    ORDER BY item.n
    RETURNING 1
)
SELECT count.n, pg_notify(%(channel)s, '') FROM (SELECT count(*) AS n FROM queued) AS count WHERE count.n > 0
"""


def batch_items(round_: int, start: int, size: int, keyed: bool) -> list[tuple[str, str | None]]:
    return [(f'{{"n": {start + i}}}', f"noop:{round_}:{start + i}" if keyed and i % 2 else None)
            for i in range(size)]


def params(items, split: bool) -> dict:
    """The statements' parameters: the items as two text[] (``unnest``), or as enqueue_many sends them (``split``).

    New ids (``jobs.ids``) go along for the statements that take them; the others leave the id to the server.
    """
    from jobs import conf, ids

    payloads, keys = [p for p, _ in items], [k for _, k in items]
    if split:
        payloads, keys = "\n".join(payloads), json.dumps(keys)
    return {"org_id": "bench", "type": "noop", "payloads": payloads, "dedup_keys": keys, "run_after": None,
            "priority": 0, "queue_name": "default", "channel": conf.NOTIFY_CHANNEL,
            "ids": ids.new_ids_text(len(items))}


def raw_minimal(db, items) -> None:
    db.execute(RAW_BULK, ([p for p, _ in items],))


def statement_path(statement: str, split: bool):
    def path(db, items) -> None:
        db.execute(statement, params(items, split)).fetchall()
    return path


def without_order(statement: str) -> str:
    ordered = "WITH ORDINALITY AS item(id, payload, dedup_key, n)\n    ORDER BY item.n"
    assert ordered in statement, "jobs.sql.ENQUEUE_MANY no longer orders by ordinality: update bench.enqueue_paths"
    return statement.replace(ordered, "AS item(id, payload, dedup_key)")


def copy_path(db, items) -> None:
    from jobs import conf

    with db.transaction():
        with db.cursor().copy(f"COPY jobs ({KEYLESS_COLUMNS}) FROM STDIN") as copy:
            for payload, _ in items:
                copy.write_row(("bench", "noop", payload, 0, "default"))
        db.execute("SELECT pg_notify(%s, '')", (conf.NOTIFY_CHANNEL,))


def copy_staged_path(db, items) -> None:
    from jobs import conf

    with db.transaction():
        db.execute(STAGE)
        with db.cursor().copy(f"COPY enqueue_stage ({COLUMNS}) FROM STDIN") as copy:
            for payload, key in items:
                copy.write_row(("bench", "noop", payload, key, key, 0, "default"))
        db.execute(FROM_STAGE)
        db.execute("SELECT pg_notify(%s, '')", (conf.NOTIFY_CHANNEL,))


def app_path(_db, items) -> None:
    from jobs.queue import enqueue_many

    enqueue_many("noop", org_id="bench", items=items)


def paths() -> dict:
    """name -> (path, table it fills, the kinds of batch it takes)."""
    from jobs import sql

    both = ("keyless", "keyed")
    return {
        "raw minimal": (raw_minimal, raw_queue.MINIMAL, ("keyless",)),
        "unnest, before": (statement_path(BEFORE, False), "jobs", both),
        "unnest, count": (statement_path(UNNEST_COUNT, False), "jobs", both),
        "unnest, keyless": (statement_path(UNNEST_KEYLESS, False), "jobs", ("keyless",)),
        "split": (statement_path(sql.ENQUEUE_MANY, True), "jobs", both),
        "split, no order": (statement_path(without_order(sql.ENQUEUE_MANY), True), "jobs", both),
        "split, keyless": (statement_path(sql.ENQUEUE_MANY_KEYLESS, True), "jobs", ("keyless",)),
        "split, keyless, server ids": (statement_path(SPLIT_KEYLESS_SERVER_IDS, True), "jobs", ("keyless",)),
        "copy": (copy_path, "jobs", ("keyless",)),
        "copy, staged": (copy_staged_path, "jobs", both),
        "enqueue_many()": (app_path, "jobs", both),
    }


def cpu_seconds(pid: int) -> float:
    """User and system CPU of a process of this machine so far."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per path and round (default: 20000)")
    parser.add_argument("--batch", type=int, default=1000, help="jobs per transaction (default: 1000)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default: 5)")
    args = parser.parse_args()
    if args.batch < 1 or args.jobs < args.batch or args.rounds < 1:
        parser.error("--batch must be at least 1, --jobs at least --batch, --rounds at least 1")
    results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    with app_bench_database(BENCH_DB, "enqueue-bench-") as (server, _url, _media):
        from django.db import connection

        with connect(server, BENCH_DB) as db, connect(server, BENCH_DB) as admin:
            version = server_version(db)
            raw_queue.create_minimal(admin)
            backend = db.execute("SELECT pg_backend_pid()").fetchone()[0]
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                app_backend = cursor.fetchone()[0]
            local = os.path.exists(f"/proc/{backend}")
            chosen = paths()
            for round_ in range(args.rounds):
                for kind in ("keyless", "keyed"):
                    for name, (path, table, kinds) in chosen.items():
                        if kind not in kinds:
                            continue
                        raw_queue.reset(admin, table, 0)
                        batches = [batch_items(round_, start, args.batch, kind == "keyed")
                                   for start in range(0, args.jobs - args.batch + 1, args.batch)]
                        if path is app_path:  # the items as an app hands them: payloads as dicts
                            batches = [[(json.loads(p), k) for p, k in items] for items in batches]
                        pid = app_backend if path is app_path else backend
                        started, client = time.perf_counter(), time.process_time()
                        server_cpu = cpu_seconds(pid) if local else 0.0
                        for items in batches:
                            path(db, items)
                        jobs = len(batches) * args.batch
                        results.setdefault((kind, name), []).append((
                            jobs / (time.perf_counter() - started),
                            (time.process_time() - client) / jobs * 1e6,
                            ((cpu_seconds(pid) - server_cpu) / jobs * 1e6) if local else float("nan"),
                        ))
                        print(f"round {round_ + 1}: {kind}: {name}: {results[kind, name][-1][0]:,.0f} job/s",
                              flush=True)
    print()
    print(headline("enqueue paths", version))
    print(f"{args.jobs:,} jobs per path and round, {args.batch:,} per transaction, median of {args.rounds}")
    base = statistics.median(rate for rate, _, _ in results["keyless", "raw minimal"])
    print(f"  {'batch':<8} {'path':<28} {'rate':>14} {'x raw minimal':>14} {'client CPU':>12} {'server CPU':>12}")
    for (kind, name), runs in results.items():
        rate = statistics.median(r for r, _, _ in runs)
        client, server_cpu = (statistics.median(run[i] for run in runs) for i in (1, 2))
        print(f"  {kind:<8} {name:<28} {rate:>10,.0f} j/s {rate / base:>13.2f}x {client:>8.1f} us/j "
              f"{server_cpu:>8.1f} us/j")
    return 0


if __name__ == "__main__":
    sys.exit(main())
