"""Retention benchmark: claim latency of a live queue while ``prunejobs`` deletes 1,000,000 finished jobs.

    .venv/bin/python -m bench.prune [--rows 1000000] [--rate 50] [--baseline-seconds 15]

Not a test: it prints figures and exits 0 unless something crashed. In a throw-away database
(``seoinsight_bench_prune``) on the app's server: ``--rows`` finished jobs from four months ago
(one in ten failed, one in a thousand ``map_reconcile``, which must survive), then two ``runjobs``
workers (DEBUG=0) drain a steady stream of noop jobs enqueued here, one per transaction. The
enqueue-to-start latency of that stream is measured first without a prune (the baseline), then
while ``manage.py prunejobs`` runs in its own process with its defaults; both are printed with
their ratio, and the prune's rate. Locks the claims waited for are sampled from pg_locks all along.
docs/benchmarks.md keeps a recorded run.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time

from bench.common import AppProcess, app_bench_database, connect, headline, server_version, settle, table, verdict

BENCH_DB = "seoinsight_bench_prune"
P99_GOAL = 2.0  # p99 while pruning <= 2 x the baseline's: the prune must not make claims spike
WORKERS = 2

# Old finished jobs as the queue would have left them: a UUIDv7 id of their creation time (what
# uuidv7() gave then, jobs/migrations/0001), created, run for 10 ms, finished; 5 ms apart.
FILL = """
INSERT INTO jobs (id, org_id, type, status, attempts, payload, report, error, created_at, started_at, finished_at)
SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
                                      placing substring(int8send(floor(extract(epoch FROM t) * 1000)::bigint) FROM 3)
                                      FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid,
       'bench', CASE WHEN g %% 1000 = 0 THEN 'map_reconcile' ELSE 'noop' END,
       CASE WHEN g %% 10 = 3 THEN 'failed' ELSE 'done' END, 1, '{}',
       CASE WHEN g %% 10 = 3 THEN NULL ELSE '{"slept": 0}'::jsonb END,
       CASE WHEN g %% 10 = 3 THEN 'boom' END,
       t, t, t + interval '10 milliseconds'
FROM (SELECT g, now() - interval '120 days' + g * interval '5 milliseconds' AS t
      FROM generate_series(1, %s) AS g) AS s
"""
# Lock requests of this database's sessions not granted right now: on the jobs table, or on a row (a claim
# behind a delete would wait on the deleting transaction's id). The server may serve other databases.
WAITING = """
SELECT count(*) FROM pg_locks
WHERE NOT granted AND (relation = 'jobs'::regclass OR locktype IN ('tuple', 'transactionid'))
  AND pid IN (SELECT pid FROM pg_stat_activity WHERE datname = current_database())
"""
DELETING = "kept whatever their age:"  # prunejobs prints it, then deletes
SUMMARY = re.compile(r"deleted (\d+) job\(s\) \(.*?\) in (\d+) batch\(es\), ([\d.]+) s \((\d+) jobs/s\)")


def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


class Stream:
    """Noop jobs enqueued here at a steady rate, one per transaction; when each was about to commit."""

    def __init__(self, db, rate: float):
        self.db, self.gap = db, 1.0 / rate
        self.sent: dict[str, list[tuple[str, float]]] = {}
        self.lock_waits = 0

    def run(self, phase: str, until) -> None:
        from django.db import transaction

        from jobs.queue import enqueue

        sent = self.sent.setdefault(phase, [])
        next_at = time.monotonic()
        while not until():
            with transaction.atomic():
                job = enqueue("noop", org_id="bench")
                before_commit = time.time()
            sent.append((str(job.id), before_commit))
            self.lock_waits = max(self.lock_waits, self.db.execute(WAITING).fetchone()[0])
            next_at += self.gap
            time.sleep(max(0.0, next_at - time.monotonic()))

    def latencies(self, phase: str) -> list[float]:
        """Milliseconds from "about to commit" to the claim's now() (as bench.queue measures it)."""
        sent = self.sent[phase]
        ids = [i for i, _ in sent]
        deadline = time.monotonic() + 120
        while self.db.execute("SELECT count(*) FROM jobs WHERE id = ANY(%s::uuid[]) AND status <> 'done'",
                              (ids,)).fetchone()[0]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{phase}: stream jobs still not done after 120 s")
            time.sleep(0.1)
        started = dict(self.db.execute("SELECT id::text, extract(epoch FROM started_at)::float8 FROM jobs "
                                       "WHERE id = ANY(%s::uuid[])", (ids,)).fetchall())
        return [(started[i] - t) * 1000 for i, t in sent]


def for_seconds(seconds: float):
    ends = time.monotonic() + seconds
    return lambda: time.monotonic() >= ends


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="old finished jobs to prune (default: 1000000)")
    parser.add_argument("--rate", type=float, default=50.0, help="stream jobs enqueued per second (default: 50)")
    parser.add_argument("--baseline-seconds", type=float, default=15.0,
                        help="seconds of stream measured before the prune (default: 15)")
    args = parser.parse_args()
    if args.rows < 1000 or args.rate <= 0 or args.baseline_seconds < 2:
        parser.error("--rows must be at least 1000, --rate above 0, --baseline-seconds at least 2")

    with app_bench_database(BENCH_DB, "prune-bench-") as (server, url, _media), connect(server, BENCH_DB) as db:
        version = server_version(db)
        print(f"fill: {args.rows:,} finished jobs from four months ago ...", flush=True)
        filled = time.perf_counter()
        db.execute(FILL, (args.rows,))
        fill_seconds = time.perf_counter() - filled
        kept = db.execute("SELECT count(*) FROM jobs WHERE type = 'map_reconcile'").fetchone()[0]
        settle(db, "jobs")

        workers = [AppProcess(url, "runjobs", env={"JOBS_PRUNE_EVERY": "0"}) for _ in range(WORKERS)]
        prune = None
        try:
            deadline = time.monotonic() + 60
            while db.execute("SELECT count(*) FROM jobs_process WHERE kind = 'runjobs'").fetchone()[0] < WORKERS:
                if time.monotonic() > deadline or not all(w.alive() for w in workers):
                    raise RuntimeError("the workers did not start")
                time.sleep(0.1)
            stream = Stream(db, args.rate)
            print(f"baseline: {args.rate:g} jobs/s for {args.baseline_seconds:g} s, {WORKERS} workers ...",
                  flush=True)
            stream.run("baseline", for_seconds(args.baseline_seconds))
            baseline_waits, stream.lock_waits = stream.lock_waits, 0
            print("prune: manage.py prunejobs (14d / 90d) while the stream goes on ...", flush=True)
            prune = AppProcess(url, "prunejobs", env={"LOG_LEVEL": "WARNING"})
            # Its start-up (Django's imports, a second of CPU) is not the prune: the stream is measured
            # from the line it prints just before its first batch.
            stream.run("start-up", lambda: DELETING in prune.log.read_text() or not prune.alive())
            stream.run("prune", lambda: not prune.alive())
            prune_wall = prune.wait()
            prune_waits = stream.lock_waits
            for worker in workers:
                worker.stop()
        finally:
            for process in [*workers, *([prune] if prune else [])]:
                process.kill()  # only if something failed: by now they have exited
        found = SUMMARY.search(prune.output)
        if found is None:
            raise RuntimeError(f"prunejobs printed no summary:\n{prune.output[-2000:]}")
        deleted, batches, seconds, rate = int(found[1]), int(found[2]), float(found[3]), int(found[4])
        left = db.execute("SELECT count(*) FILTER (WHERE type = 'map_reconcile'), count(*) FROM jobs "
                          "WHERE finished_at < now() - interval '30 days'").fetchone()
        if deleted != args.rows - kept or left != (kept, kept):
            raise RuntimeError(f"deleted {deleted} of {args.rows - kept}; old rows left {left}, "
                               f"map_reconcile {kept}")
        base, during = stream.latencies("baseline"), stream.latencies("prune")

    row, _head = table(44, 22, 100)
    head = [row("figure", "value", "vs baseline", "goal"), "-" * 100]
    ratio50 = percentile(during, 50) / percentile(base, 50)
    ratio99 = percentile(during, 99) / percentile(base, 99)
    lines = [
        headline("prune", version),
        f"{args.rows:,} old finished jobs ({kept:,} map_reconcile, kept), filled in {fill_seconds:.1f} s; "
        f"stream {args.rate:g} jobs/s, {WORKERS} runjobs workers",
        "",
        *head,
        row("claim latency p50 / p99, no prune", f"{percentile(base, 50):.1f} / {percentile(base, 99):.1f} ms",
            "1.00x", f"{len(base)} jobs"),
        row("claim latency p50 / p99, during the prune",
            f"{percentile(during, 50):.1f} / {percentile(during, 99):.1f} ms",
            f"{ratio50:.2f}/{ratio99:.2f}x",
            f"{len(during)} jobs; p99 <= {P99_GOAL:g}x  {verdict(ratio99 <= P99_GOAL)}"),
        row("claim latency max, no prune / during", f"{max(base):.1f} / {max(during):.1f} ms"),
        row("prune: jobs deleted", f"{deleted:,}", "", f"{batches} batches"),
        row("prune: rate (its statements)", f"{rate:,} jobs/s", "", f"{seconds:.1f} s in statements"),
        row("prune: process wall time", f"{prune_wall:.1f} s", "", "start-up included"),
        row("lock requests waiting, seen (baseline/prune)", f"{baseline_waits} / {prune_waits}", "",
            "sampled once per stream job"),
    ]
    print()
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
