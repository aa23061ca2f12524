"""Where a queue job's time goes: per statement, per process, per index. The profile behind docs/benchmarks.md.

    .venv/bin/python -m bench.queue_profile [--jobs 10000] [--profile-jobs 3000]

Not a test: it prints figures and exits 0 unless something crashed. It runs on a PostgreSQL
cluster of its own (Debian's binaries with pg_stat_statements, ``bench/own_postgres.py``;
``make bench-profile`` installs them), so the server's CPU and WAL are this run's alone. In a
database migrated by the app it drains ``--jobs`` no-op jobs, one consumer process at a time:

- the raw loops of ``bench/raw_queue.py``: the minimal table and the jobs schema's table, each
  with the same lean statements, claim 1 and claim 10 per statement;
- ``runjobs --burst``, the app's worker, on the jobs table, one job at a time and with
  ``--concurrency 8`` (judged by the claim-10 loops).

For each: the drain rate on the database's clock; CPU per job of the server (every process of
the cluster, from /proc) and of the consumer (its rusage, its start-up measured on an empty
queue and taken off); statements and WAL bytes per job; the table's updates and how many were
HOT; and the consumer's statements from pg_stat_statements (calls per job, mean execution,
buffers, WAL). Then ``EXPLAIN (ANALYZE, BUFFERS, WAL)`` of the claim and the finish on a queue of
``--jobs``, the indexes of ``jobs``, and a cProfile
of the worker's loop over ``--profile-jobs`` jobs (functions by own time, per job).
"""

from __future__ import annotations

import argparse
import io
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


from bench import raw_queue
from bench.common import (
    ROOT,
    AppProcess,
    app_bench_database,
    connect,
    database_url,
    headline,
    server_version,
    worker_env,
)
from bench.own_postgres import Unavailable, binaries, debian_server, server_cpu_seconds
from bench.schema_cost import wal_position

BENCH_DB = "seoinsight_bench_profile"
TOP_STATEMENTS = 8
TOP_FUNCTIONS = 18


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def table_counters(db, table: str) -> tuple[int, int, int]:
    db.execute("SELECT pg_stat_clear_snapshot()")
    return db.execute("SELECT n_tup_ins, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = %s",
                      (table,)).fetchone()


def statements_of(db, jobs: int) -> list[dict]:
    """This database's statements since the reset, by total execution time, with per-call figures."""
    found = db.execute(
        """
        SELECT regexp_replace(query, '\\s+', ' ', 'g'), calls, total_exec_time, total_plan_time,
               shared_blks_hit + shared_blks_read, shared_blks_dirtied, wal_bytes, wal_fpi
        FROM pg_stat_statements
        WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND query NOT LIKE '%%pg_stat_statements%%'
        ORDER BY total_exec_time DESC
        """
    ).fetchall()
    return [{"query": q, "calls": c, "per_job": c / jobs, "mean_ms": t / c, "plan_ms": p / c, "blocks": b / c,
             "dirtied": d / c, "wal": float(w) / c, "fpi": f / c} for q, c, t, p, b, d, w, f in found if c]


def drain(postgres_bin: Path, db, table: str, start, jobs: int, startup_cpu: float) -> dict:
    """Queue ``jobs`` in ``table``, run one consumer to the end, and read every counter around it."""
    raw_queue.reset(db, table, jobs)
    db.execute("SELECT pg_stat_statements_reset()")
    before = table_counters(db, table)
    wal, server0, client0 = wal_position(db), server_cpu_seconds(postgres_bin), children_cpu()
    consumer = start()
    consumer.wait()
    time.sleep(0.6)  # backends flush their table statistics within a second of their last transaction
    client = children_cpu() - client0 - startup_cpu
    server_cpu = server_cpu_seconds(postgres_bin) - server0
    wal = wal_position(db) - wal
    after = table_counters(db, table)
    rate, _ = raw_queue.drained(db, table, jobs)
    found = statements_of(db, jobs)
    return {
        "rate": rate,
        "server_ms": server_cpu * 1000 / jobs,
        "client_ms": client * 1000 / jobs,
        "wal": wal / jobs,
        "statements": sum(s["calls"] for s in found) / jobs,
        "updates": (after[1] - before[1]) / jobs,
        "hot": (after[2] - before[2]) / max(1, after[1] - before[1]),
        "top": found[:TOP_STATEMENTS],
    }


def startup(start) -> float:
    """CPU seconds a consumer spends on an empty queue: its start-up and exit, taken off each drain."""
    client0 = children_cpu()
    start().wait()
    return children_cpu() - client0


def explain(db, statement: str, params: dict) -> str:
    """The plan of one run of ``statement``, rolled back."""
    with db.transaction(force_rollback=True):
        rows = db.execute("EXPLAIN (ANALYZE, BUFFERS, WAL, COSTS OFF, TIMING OFF, SUMMARY OFF) " + statement,
                          params).fetchall()
    return "\n".join("    " + r[0] for r in rows)


def plans(db, jobs: int) -> str:
    from jobs import queue, sql as jobs_sql

    raw_queue.reset(db, "jobs", jobs)
    claim_params = {**queue.claim_plan().params, "queues": None, "worker_id": "bench:1"}
    claim_plan = explain(db, jobs_sql.CLAIM_UNGUARDED, claim_params)
    with db.transaction():
        claimed = db.execute(jobs_sql.CLAIM_UNGUARDED, claim_params).fetchone()
    columns = [c.strip() for c in jobs_sql.JOB_COLUMNS.split(",")]
    job_id, attempts = claimed[columns.index("id")], claimed[columns.index("attempts")]
    finish_plan = explain(db, jobs_sql.FINISH_DONE, {"id": job_id, "attempt": attempts, "report": None})
    return f"  claim (CLAIM_UNGUARDED, {jobs:,} queued):\n{claim_plan}\n  finish (FINISH_DONE):\n{finish_plan}"


def indexes(db) -> list[tuple[str, str]]:
    return db.execute(
        """
        SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
        FROM pg_index AS i WHERE i.indrelid = 'jobs'::regclass ORDER BY 1
        """
    ).fetchall()


def worker_profile(url: str, media: Path, db, jobs: int) -> str:
    """cProfile of ``runjobs --burst`` over ``jobs`` jobs: the loop's functions by own time, per job."""
    raw_queue.reset(db, "jobs", jobs)
    with tempfile.TemporaryDirectory(prefix="queue-profile-") as directory:
        out = Path(directory) / "runjobs.prof"
        subprocess.run([sys.executable, "-m", "cProfile", "-o", str(out), "manage.py", "runjobs", "--burst"],
                       cwd=ROOT, env=worker_env(url, media), check=True, timeout=600)
        stats = pstats.Stats(str(out), stream=io.StringIO())
    entries = []
    for (path, line, name), (_, calls, own, cumulative, _) in stats.stats.items():
        entries.append((own, cumulative, calls, f"{Path(path).name}:{line}({name})" if line else name))
    entries.sort(reverse=True)
    total = sum(e[0] for e in entries)
    lines = [f"  {'own µs/job':>10} {'cum µs/job':>10} {'calls/job':>9}  function",
             *(f"  {own * 1e6 / jobs:10.1f} {cum * 1e6 / jobs:10.1f} {calls / jobs:9.2f}  {where}"
               for own, cum, calls, where in entries[:TOP_FUNCTIONS]),
             f"  {total * 1e6 / jobs:10.1f} {'':10} {'':9}  all functions (own time, start-up included)"]
    return "\n".join(lines)


def report_drain(label: str, r: dict, ceilings: dict) -> list[str]:
    batched = "claim 10" in label or "--concurrency" in label
    ceiling = ceilings["raw loop, minimal table, claim 10" if batched else "raw loop, minimal table, claim 1"]
    lines = [
        f"{label}: {r['rate']:,.0f} job/s ({r['rate'] / ceiling['rate']:.2f}x the minimal claim-{10 if batched else 1}"
        " loop)",
        f"  CPU per job: server {r['server_ms']:.3f} ms, consumer {r['client_ms']:.3f} ms   "
        f"statements per job {r['statements']:.2f}   WAL {r['wal']:,.0f} bytes per job",
        f"  updates per job {r['updates']:.2f}, of which HOT {r['hot']:.0%}",
        f"  {'calls/job':>9} {'mean ms':>8} {'plan ms':>8} {'buffers':>8} {'dirtied':>8} {'WAL B':>7} {'FPI':>5}"
        "  statement",
    ]
    for s in r["top"]:
        lines.append(f"  {s['per_job']:9.2f} {s['mean_ms']:8.3f} {s['plan_ms']:8.3f} {s['blocks']:8.1f} "
                     f"{s['dirtied']:8.2f} {s['wal']:7.0f} {s['fpi']:5.2f}  {s['query'][:90]}")
    return lines


def measure(args, server: dict, postgres_bin: Path) -> str:
    """Every figure of the report, on the cluster ``server`` (its binary ``postgres_bin``)."""
    # The app's processes and this one's Django go to this cluster, nowhere else.
    os.environ["DATABASE_URL"] = database_url(server, "postgres")
    with app_bench_database(BENCH_DB, "queue-profile-") as (_, url, media), connect(server, BENCH_DB) as db:
        version = server_version(db)
        db.execute("CREATE EXTENSION pg_stat_statements")
        raw_queue.create_minimal(db)
        raw_queue.create_schema(db)

        def raw(table, batch):
            return lambda: raw_queue.RawConsumer(server, BENCH_DB, table, batch)

        consumers = [
            ("raw loop, minimal table, claim 1", raw_queue.MINIMAL, raw(raw_queue.MINIMAL, 1)),
            ("raw loop, minimal table, claim 10", raw_queue.MINIMAL, raw(raw_queue.MINIMAL, 10)),
            ("raw loop, jobs schema, claim 1", raw_queue.SCHEMA, raw(raw_queue.SCHEMA, 1)),
            ("raw loop, jobs schema, claim 10", raw_queue.SCHEMA, raw(raw_queue.SCHEMA, 10)),
            ("runjobs --burst", "jobs", lambda: AppProcess(url, "runjobs", "--burst", media=media)),
            ("runjobs --burst --concurrency 8", "jobs",
             lambda: AppProcess(url, "runjobs", "--burst", "--concurrency", "8", media=media)),
        ]
        results = {}
        for label, table, start in consumers:
            print(f"drain: {args.jobs:,} jobs, {label} ...", flush=True)
            raw_queue.reset(db, table, 0)
            results[label] = drain(postgres_bin, db, table, start, args.jobs, startup(start))
        print("plans ...", flush=True)
        explained = plans(db, args.jobs)
        print(f"cProfile: runjobs --burst over {args.profile_jobs:,} jobs ...", flush=True)
        profiled = worker_profile(url, media, db, args.profile_jobs)
        listed = indexes(db)

    lines = [headline("queue profile", version), f"jobs per drain: {args.jobs:,}, one consumer process", ""]
    for label, _, _ in consumers:
        lines += report_drain(label, results[label], results) + [""]
    lines += ["plans:", explained, "", f"indexes of jobs ({len(listed)}):"]
    lines += [f"  {name}: {definition.split(' USING ', 1)[1]}" for name, definition in listed]
    lines += ["", f"runjobs --burst under cProfile, {args.profile_jobs:,} jobs (cProfile slows it ~2x; read ratios):",
              profiled]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs per drain (default: 10000)")
    parser.add_argument("--profile-jobs", type=int, default=3_000, help="jobs under cProfile (default: 3000)")
    args = parser.parse_args()
    if args.jobs < 100 or args.profile_jobs < 100:
        parser.error("--jobs and --profile-jobs must be at least 100")
    try:
        binaries()
    except Unavailable as exc:
        print(f"queue_profile: {exc}", file=sys.stderr)
        return 1
    with debian_server() as (server, postgres_bin):
        report = measure(args, server, postgres_bin)
    print()
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
