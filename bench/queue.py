"""Queue benchmark: enqueue rate, drain rate, wake-up latency, and the ceiling they are judged by.

    .venv/bin/python -m bench.queue [--jobs 10000] [--latency-samples 200]

Not a test: it prints figures and exits 0 unless something crashed. Everything
runs in a throw-away database (``seoinsight_bench``) on the same server as the
app — the embedded one, or the one ``DATABASE_URL`` names — dropped at the end.
docs/benchmarks.md says what each figure means and keeps a recorded run.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import random
import statistics
import sys
import time

import psycopg
from psycopg import sql

from bench.common import (
    TIMEOUT,
    AppProcess,
    app_bench_database,
    connect,
    headline,
    ratio_goal,
    server_version,
    settle,
    table,
    verdict,
)

BENCH_DB = "seoinsight_bench"
BATCH = 100
DRAIN_GOAL = 0.6  # drain ≥ 0.6 × ceiling (issue goal)
LATENCY_GOAL_MS = 5.0  # LISTEN/NOTIFY p50 ≤ 5 ms (issue goal)

# The ceiling: what the same server does with no framework at all — a one-statement
# SKIP LOCKED claim, then a fenced finish, each in autocommit, on a table with the
# jobs table's columns, constraints and indexes (the partial one included).
CEILING_CLAIM = """
UPDATE bench_ceiling
SET status = 'running', started_at = now(), attempts = attempts + 1
WHERE id = (
    SELECT id FROM bench_ceiling
    WHERE status = 'queued'
    ORDER BY created_at
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
RETURNING id, attempts, payload
"""
CEILING_FINISH = """
UPDATE bench_ceiling
SET status = 'done', finished_at = now()
WHERE id = %s AND status = 'running' AND attempts = %s
"""

# Distinct created_at per row, as enqueue() one at a time would give.
FILL = """
INSERT INTO {} (org_id, type, payload, created_at)
SELECT 'bench', 'noop', '{{}}', clock_timestamp() FROM generate_series(1, %s)
"""


def reset_table(db: psycopg.Connection, table_name: str, rows: int) -> None:
    """Empty ``table_name``, queue ``rows`` noop jobs, and give every run the same starting state."""
    ident = sql.Identifier(table_name)
    db.execute(sql.SQL("TRUNCATE {} CASCADE").format(ident))  # other apps' tables point at jobs: empty here
    if rows:
        db.execute(sql.SQL(FILL).format(ident), (rows,))
    settle(db, table_name)


# -- the consumers -----------------------------------------------------------------------------

class Ceiling:
    """A ceiling consumer in a fresh interpreter (spawn: nothing inherited from this one)."""

    def __init__(self, server: dict):
        self.proc = multiprocessing.get_context("spawn").Process(target=ceiling_loop, args=(server,))
        self.proc.start()

    def alive(self) -> bool:
        return self.proc.is_alive()

    def wait(self) -> None:
        self.proc.join(TIMEOUT)
        if self.proc.exitcode != 0:
            raise RuntimeError(f"ceiling process exited with {self.proc.exitcode}")

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


def ceiling_loop(server: dict) -> None:
    """One ceiling process: claim, finish, until the table has nothing queued."""
    with connect(server, BENCH_DB) as conn:
        while True:
            row = conn.execute(CEILING_CLAIM).fetchone()
            if row is None:
                return
            conn.execute(CEILING_FINISH, (row[0], row[1]))


def wait_for(condition, message: str, timeout: float = TIMEOUT, interval: float = 0.01):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)
    return value


def drain(server: dict, db: psycopg.Connection, table_name: str, start, processes: int, jobs: int) -> dict:
    """Queue ``jobs`` in ``table_name``, start ``processes`` consumers behind a lock, release them together.

    The lock keeps process start-up (Django's ~0.5 s) out of the figure and lets
    two processes begin at the same instant: a runjobs worker blocks in its first
    sweep, a ceiling process in its first claim. The rate comes from the
    database's own clock, first claim to last finish.
    """
    reset_table(db, table_name, jobs)
    gate = connect(server, BENCH_DB, autocommit=False)
    consumers = []
    try:
        gate.execute(sql.SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(sql.Identifier(table_name)))
        consumers = [start() for _ in range(processes)]
        def at_gate() -> bool:
            for consumer in consumers:
                if not consumer.alive():
                    consumer.wait()  # raises with its exit code (and output)
                    raise RuntimeError("a consumer exited before the drain started")
            waiting = "SELECT count(*) FROM pg_locks WHERE relation = %s::regclass AND NOT granted"
            return db.execute(waiting, (table_name,)).fetchone()[0] >= processes

        wait_for(at_gate, f"{processes} consumer(s) to reach the gate")
        released = time.perf_counter()
        gate.commit()
        for consumer in consumers:
            consumer.wait()
        wall = time.perf_counter() - released
    finally:
        gate.close()
        for consumer in consumers:
            consumer.kill()  # only if something failed: by now they have exited
    done, window = db.execute(sql.SQL(
        "SELECT count(*) FILTER (WHERE status = 'done'), "
        "extract(epoch FROM max(finished_at) - min(started_at))::float8 FROM {}").format(sql.Identifier(table_name))
    ).fetchone()
    if done != jobs:
        raise RuntimeError(f"{table_name}: {done} of {jobs} jobs done after the drain")
    return {"rate": jobs / window, "window": window, "wall": wall}


# -- enqueue and latency (in this process, through jobs.queue) ------------------------------

def enqueue_rate(count: int, per_transaction: int) -> float:
    from django.db import transaction

    from jobs.queue import enqueue

    started = time.perf_counter()
    for _ in range(count // per_transaction):
        if per_transaction == 1:
            enqueue("noop", org_id="bench")  # autocommit: one INSERT, one COMMIT
        else:
            with transaction.atomic():
                for _ in range(per_transaction):
                    enqueue("noop", org_id="bench")
    return (count // per_transaction * per_transaction) / (time.perf_counter() - started)


def latency(db: psycopg.Connection, url: str, samples: int, gap: tuple, *worker_args: str) -> list[float]:
    """Milliseconds from "enqueue about to commit" to "a worker claimed it", one idle worker.

    Jobs go one at a time, each ``gap`` (a random pause, seconds) after the previous
    one finished. With LISTEN a few ms is enough for the worker to be waiting again;
    a polling worker needs a pause as long as its interval, or every job would
    arrive just as it starts to sleep and each sample would be a full interval.

    We take time.time() just before COMMIT and read the job's started_at, which is
    now() of the claim transaction: the database clock, the same machine's clock.
    The figure includes the commit itself (NOTIFY is delivered only once the commit
    is durable) and is an upper bound by the few microseconds between our clock
    read and COMMIT being sent. created_at is no use here: it is the enqueue
    transaction's start, before the INSERT.
    """
    from django.db import transaction

    from jobs.queue import enqueue

    reset_table(db, "jobs", 0)
    worker = AppProcess(url, "runjobs", *worker_args)
    warmup = 3
    sent = []

    def finished(job_id) -> bool:
        return db.execute("SELECT status = 'done' FROM jobs WHERE id = %s", (job_id,)).fetchone()[0]

    try:
        for _ in range(warmup + samples):
            with transaction.atomic():
                job = enqueue("noop", org_id="bench")
                before_commit = time.time()
            sent.append((job.id, before_commit))
            # One job at a time, each into a worker that is back to waiting.
            wait_for(functools.partial(finished, job.id), "a latency job to finish", timeout=60, interval=0.002)
            time.sleep(random.uniform(*gap))
    finally:
        try:
            worker.stop()
        finally:
            worker.kill()  # only if stopping failed
    started = dict(db.execute("SELECT id, extract(epoch FROM started_at)::float8 FROM jobs "
                              "WHERE id = ANY(%s)", ([i for i, _ in sent],)).fetchall())
    return [(started[i] - t) * 1000 for i, t in sent[warmup:]]


# -- report --------------------------------------------------------------------------------

def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "es" if word.endswith("s") else "s")


def report(r: dict, args, version: str) -> str:
    row, head = table(40, 20, 96)

    def rate(x):
        return f"{x:,.0f} job/s"

    lines = [
        headline("queue", version),
        f"jobs per drain: {args.jobs:,}  latency samples: {args.latency_samples} (listen), "
        f"{r['poll_samples']} (poll)",
        "",
        *head,
        row("enqueue, 1 per transaction", rate(r["enqueue_1"])),
        row(f"enqueue, {BATCH} per transaction", rate(r["enqueue_batch"])),
    ]
    for n in (1, 2):
        lines.append(row(f"ceiling: raw psycopg, {plural(n, 'process')}", rate(r[f"ceiling_{n}"]["rate"]), "1.00x"))
    for n in (1, 2):
        ratio = r[f"drain_{n}"]["rate"] / r[f"ceiling_{n}"]["rate"]
        lines.append(row(f"drain: runjobs --burst, {plural(n, 'worker')}", rate(r[f"drain_{n}"]["rate"]),
                         f"{ratio:.2f}x", ratio_goal(ratio, DRAIN_GOAL)))
    for key, label in (("listen", "LISTEN/NOTIFY"), ("poll", "polling, --no-listen")):
        p50, p95 = percentile(r[f"latency_{key}"], 50), percentile(r[f"latency_{key}"], 95)
        goal = f"p50 <= {LATENCY_GOAL_MS:g} ms  {verdict(p50 <= LATENCY_GOAL_MS)}" if key == "listen" else ""
        lines.append(row(f"latency p50 / p95, {label}", f"{p50:.1f} / {p95:.1f} ms", "", goal))
    lines += ["", "drain wall time (gate release to last process exited), window (first claim to last finish):"]
    for key in ("ceiling_1", "drain_1", "ceiling_2", "drain_2"):
        lines.append(f"  {key:<10} wall {r[key]['wall']:6.2f} s   window {r[key]['window']:6.2f} s")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs per drain run (default: 10000)")
    parser.add_argument("--latency-samples", type=int, default=200,
                        help="enqueue-to-start samples with LISTEN/NOTIFY (default: 200; polling takes a tenth)")
    args = parser.parse_args()
    if args.jobs < BATCH or args.latency_samples < 10:
        parser.error("--jobs must be at least 100 and --latency-samples at least 10")

    # This process enqueues through jobs.queue too, into the bench database only.
    with app_bench_database(BENCH_DB, "queue-bench-") as (server, url, _media):
        from jobs import conf

        results = {}
        with connect(server, BENCH_DB) as db:
            version = server_version(db)
            db.execute("CREATE TABLE bench_ceiling (LIKE jobs INCLUDING ALL)")
            enqueues = min(args.jobs, 2000)  # one fsync each: enough for a stable figure
            print(f"enqueue: {enqueues:,} one per transaction, {args.jobs:,} in batches of {BATCH} ...", flush=True)
            reset_table(db, "jobs", 0)
            results["enqueue_1"] = enqueue_rate(enqueues, 1)
            reset_table(db, "jobs", 0)
            results["enqueue_batch"] = enqueue_rate(args.jobs, BATCH)
            for n in (1, 2):  # ceiling and runjobs back to back, so both see the same machine
                print(f"drain: {args.jobs:,} jobs, ceiling then runjobs, {plural(n, 'process')} ...", flush=True)
                results[f"ceiling_{n}"] = drain(server, db, "bench_ceiling", lambda: Ceiling(server), n, args.jobs)
                results[f"drain_{n}"] = drain(server, db, "jobs", lambda: AppProcess(url, "runjobs", "--burst"),
                                              n, args.jobs)
            # Polling samples take ~2 s each at the default interval: a tenth as many.
            results["poll_samples"] = max(10, args.latency_samples // 10)
            poll_interval = conf.get("JOBS_POLL_INTERVAL")
            print(f"latency: {args.latency_samples} samples with LISTEN/NOTIFY, "
                  f"{results['poll_samples']} polling every ~{poll_interval:g} s ...", flush=True)
            results["latency_listen"] = latency(db, url, args.latency_samples, (0.005, 0.015))
            results["latency_poll"] = latency(db, url, results["poll_samples"], (0, poll_interval * 4 / 3),
                                              "--no-listen")
    print()
    print(report(results, args, version))
    return 0


if __name__ == "__main__":
    sys.exit(main())
