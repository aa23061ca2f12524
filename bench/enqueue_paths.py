"""Which statement queues many jobs fastest: ``INSERT … SELECT unnest`` against ``COPY``, with the dedup rules kept.

    .venv/bin/python -m bench.enqueue_paths [--jobs 20000] [--batch 1000] [--rounds 3]

Not a test: it prints figures and exits 0 unless something crashed. In a throw-away database
migrated by the app (``seoinsight_bench_enqueue``), each path queues ``--jobs`` noop jobs in
batches of ``--batch``, each batch one transaction, ``--rounds`` times interleaved (medians):

- ``unnest``: ``jobs.sql.ENQUEUE_MANY`` as ``enqueue_many`` sends it: one statement, two arrays,
  ``ON CONFLICT … DO NOTHING`` for the keys a live job holds, and the wake-up NOTIFY;
- ``copy, keyless``: ``COPY jobs (…) FROM STDIN`` straight into the table, then one NOTIFY. Only
  for jobs without a dedup_key: COPY has no ON CONFLICT, so one held key fails the whole batch;
- ``copy, staged``: ``COPY`` into a temporary table, then ``INSERT … SELECT … ON CONFLICT DO
  NOTHING`` from it: the dedup rules kept, two statements and a temp table per batch.

Half of each batch's jobs carry a dedup_key (distinct: none is skipped), except in the keyless
path, so the unique index is written as it would be.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from bench.common import app_bench_database, connect, headline, server_version

BENCH_DB = "seoinsight_bench_enqueue"
COLUMNS = "org_id, type, payload, dedup_key, enqueued_key, priority, queue_name"
STAGE = f"""
CREATE TEMP TABLE IF NOT EXISTS enqueue_stage (n bigint GENERATED ALWAYS AS IDENTITY, {COLUMNS.replace(', ', ' text, ')} text)
ON COMMIT DELETE ROWS
"""
FROM_STAGE = f"""
INSERT INTO jobs ({COLUMNS})
SELECT org_id, type, payload::jsonb, dedup_key, enqueued_key, priority::smallint, queue_name FROM enqueue_stage ORDER BY n
ON CONFLICT (dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
"""


def batch_items(round_: int, start: int, size: int, keyed: bool) -> list[tuple[str, str | None]]:
    return [(f'{{"n": {start + i}}}', f"noop:{round_}:{start + i}" if keyed and i % 2 else None)
            for i in range(size)]


def unnest_path(db, items) -> None:
    from jobs import conf, sql

    params = {"org_id": "bench", "type": "noop", "payloads": [p for p, _ in items],
              "dedup_keys": [k for _, k in items], "run_after": None, "priority": 0, "queue_name": "default",
              "channel": conf.NOTIFY_CHANNEL}
    with db.transaction():
        db.execute(sql.ENQUEUE_MANY, params).fetchall()


def copy_keyless_path(db, items) -> None:
    from jobs import conf

    with db.transaction():
        with db.cursor().copy(f"COPY jobs ({COLUMNS}) FROM STDIN") as copy:
            for payload, _ in items:
                copy.write_row(("bench", "noop", payload, None, None, 0, "default"))
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


PATHS = {"unnest": (unnest_path, True), "copy, keyless": (copy_keyless_path, False),
         "copy, staged": (copy_staged_path, True)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per path and round (default: 20000)")
    parser.add_argument("--batch", type=int, default=1000, help="jobs per transaction (default: 1000)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default: 3)")
    args = parser.parse_args()
    if args.batch < 1 or args.jobs < args.batch or args.rounds < 1:
        parser.error("--batch must be at least 1, --jobs at least --batch, --rounds at least 1")
    rates: dict[str, list[float]] = {name: [] for name in PATHS}
    with app_bench_database(BENCH_DB, "enqueue-bench-") as (server, _url, _media):
        with connect(server, BENCH_DB) as db:
            version = server_version(db)
            for round_ in range(args.rounds):
                for name, (path, keyed) in PATHS.items():
                    db.execute("TRUNCATE jobs CASCADE")
                    db.execute("VACUUM ANALYZE jobs")
                    batches = [batch_items(round_, start, args.batch, keyed)
                               for start in range(0, args.jobs - args.batch + 1, args.batch)]
                    started = time.perf_counter()
                    for items in batches:
                        path(db, items)
                    rates[name].append(len(batches) * args.batch / (time.perf_counter() - started))
                    print(f"round {round_ + 1}: {name}: {rates[name][-1]:,.0f} job/s", flush=True)
    print()
    print(headline("enqueue paths", version))
    print(f"{args.jobs:,} jobs per path and round, {args.batch:,} per transaction, median of {args.rounds}")
    base = statistics.median(rates["unnest"])
    for name, values in rates.items():
        value = statistics.median(values)
        print(f"  {name:<16} {value:>12,.0f} job/s  {value / base:5.2f}x unnest")
    return 0


if __name__ == "__main__":
    sys.exit(main())
