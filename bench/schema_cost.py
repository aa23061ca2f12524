"""What issue 21's columns and indexes cost per job: WAL written and buffers touched, with and without each.

    .venv/bin/python -m bench.schema_cost [--jobs 5000] [--backlog 0]

Not a test: it prints figures and exits 0 unless something crashed. In a throw-away database
(``seoinsight_bench_schema``) migrated by the app, this process runs the production verbs
(``queue.enqueue``, ``queue.claim``, ``queue.finish_done``, each its own transaction) over ``--jobs``
noop jobs (behind ``--backlog`` queued jobs of a type no worker claims here, if asked), once per
variant of the schema: as migrated, then without each index migration 0006 added. Per job and
phase it prints the WAL bytes written (``pg_current_wal_insert_lsn`` before and after: what every
index entry and row version costs the server, a count that the machine's load does not change)
and the shared buffers the claim's plan touches, then the wall time, which is noisy on a shared
machine. WAL is counted for the whole server, so it runs on a server of its own (pgserver, in a temporary
directory) unless told ``--shared-server``. The new columns' bytes per row come from ``pg_column_size`` of a drained job.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from bench.common import app_bench_database, connect, headline, server_version, settle

BENCH_DB = "seoinsight_bench_schema"
NEW_INDEXES = {
    "jobs_queued_claim_order": "(priority DESC, created_at, id) WHERE status = 'queued'",  # 0006's, as 0009 made it
    "jobs_queued_run_after": "(run_after) WHERE status = 'queued' AND run_after IS NOT NULL",
}
NEW_COLUMNS = ("run_after", "priority", "queue_name", "cancel_requested_at", "worker_ids")
BACKLOG = """
INSERT INTO jobs (org_id, type, payload, created_at)
SELECT 'bench', 'unclaimed', '{}', clock_timestamp() FROM generate_series(1, %s)
"""


@contextmanager
def own_server():
    """A PostgreSQL server of this run's own (pgserver, in a temporary directory), so its WAL is ours alone."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver
    base = Path(tempfile.mkdtemp(prefix="seoinsight-bench-schema-pg-"))
    base.chmod(0o755)  # under root the server runs as the 'pgserver' user
    handle = pgserver.get_server(base / "pgdata", cleanup_mode="delete")
    try:
        yield f"postgres://postgres@{quote(str(handle.pgdata), safe='')}/postgres"
    finally:
        handle.cleanup()
        shutil.rmtree(base, ignore_errors=True)


def wal_position(db) -> int:
    return db.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn").fetchone()[0]


def claim_buffers(db) -> int:
    """Shared buffers (hit + read) of one claim's plan, rolled back."""
    from jobs import queue, sql

    params = {**queue.claim_plan().params, "queues": None, "worker_id": "bench:1"}
    statement = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql.CLAIM_UNGUARDED
    with db.transaction(force_rollback=True):
        plan = db.execute(statement, params).fetchone()[0][0]["Plan"]
    return plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0)


def one_variant(db, jobs: int) -> dict:
    from jobs import queue

    db.execute("DELETE FROM jobs WHERE type = 'noop'")
    settle(db, "jobs")
    figures = {}
    start, t0 = wal_position(db), time.perf_counter()
    for _ in range(jobs):
        queue.enqueue("noop", org_id="bench")
    figures["enqueue"] = (wal_position(db) - start, time.perf_counter() - t0)
    buffers = claim_buffers(db)
    claimed, start, t0 = [], wal_position(db), time.perf_counter()
    for _ in range(jobs):
        claimed.append(queue.claim(None, "bench:1"))
    figures["claim"] = (wal_position(db) - start, time.perf_counter() - t0)
    start, t0 = wal_position(db), time.perf_counter()
    for job in claimed:
        queue.finish_done(job, {})
    figures["finish"] = (wal_position(db) - start, time.perf_counter() - t0)
    figures["buffers"] = buffers
    return figures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--backlog", type=int, default=0)
    parser.add_argument("--shared-server", action="store_true",
                        help="the app's server (DATABASE_URL or the embedded one); its other databases' WAL counts too")
    args = parser.parse_args(argv)
    if args.shared_server:
        return run(args)
    with own_server() as url:
        os.environ["DATABASE_URL"] = url
        return run(args)


def run(args) -> int:
    with app_bench_database(BENCH_DB, "seoinsight-bench-schema-") as (server, _url, _media):
        with connect(server, BENCH_DB) as db:
            print(headline("schema cost per job", server_version(db)))
            db.execute(BACKLOG, [args.backlog])
            variants = [("as migrated (0006's two indexes)", [])]
            variants += [(f"without {name}", [name]) for name in NEW_INDEXES]
            one_variant(db, min(args.jobs, 1000))  # warm-up: caches, prepared plans; not printed
            results = []
            for label, dropped in variants:
                for name in dropped:
                    db.execute(f"DROP INDEX {name}")
                results.append((label, one_variant(db, args.jobs)))
                for name in dropped:
                    db.execute(f"CREATE INDEX {name} ON jobs {NEW_INDEXES[name]}")
            print(f"{args.jobs:,} noop jobs, behind {args.backlog:,} queued jobs of another type; "
                  "WAL bytes and wall microseconds per job")
            print(f"{'variant':<46}{'enqueue':>16}{'claim':>16}{'finish':>16}{'claim buffers':>15}")
            for label, f in results:
                cells = "".join(f"{f[p][0] / args.jobs:>8.0f} B {f[p][1] / args.jobs * 1e6:>4.0f} us"
                                for p in ("enqueue", "claim", "finish"))
                print(f"{label:<46}{cells}{f['buffers']:>15}")
            base = results[0][1]
            for label, f in results[1:]:
                saved = sum(base[p][0] - f[p][0] for p in ("enqueue", "claim", "finish")) / args.jobs
                print(f"{label.removeprefix('without ')} costs {saved:.0f} WAL bytes per job (enqueue, claim, finish)")
            sizes = db.execute(
                "SELECT " + ", ".join(f"avg(pg_column_size({c}))" for c in NEW_COLUMNS)
                + ", avg(pg_column_size(jobs.*)) FROM jobs WHERE type = 'noop'").fetchone()
            print("bytes per row of the new columns (a drained job): "
                  + ", ".join(f"{c} {s or 0:.0f}" for c, s in zip(NEW_COLUMNS, sizes[:-1], strict=True)) + f"; whole row {sizes[-1]:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
