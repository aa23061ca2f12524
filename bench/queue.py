"""Queue benchmark: enqueue rate, drain rate, wake-up latency, and the raw loops they are judged by.

    .venv/bin/python -m bench.queue [--jobs 10000] [--rounds 3] [--latency-samples 200]

Not a test: it prints figures and exits 0 unless something crashed. Everything
runs in a throw-away database (``seoinsight_bench``) on the same server as the
app — the embedded one, or the one ``DATABASE_URL`` names — dropped at the end.
Every drain runs ``--rounds`` times, interleaved (one of each per round, so a
slow spell of the machine hits all of them), and the report gives medians.
Last, a worker's claims of 8 through ``--held-churn`` jobs, plain and with a
snapshot held open (buffers per claim: the short form of ``bench.held_snapshot``).
docs/benchmarks.md says what each figure means and keeps a recorded run.
"""

from __future__ import annotations

import argparse
import functools
import random
import statistics
import sys
import time

import psycopg
from psycopg import sql

from bench import held_snapshot, peers, raw_queue
from bench.common import (
    TIMEOUT,
    AppProcess,
    app_bench_database,
    connect,
    headline,
    ratio_goal,
    server_version,
    table,
    verdict,
)

BENCH_DB = "seoinsight_bench"
BATCH = 100  # enqueue() calls per transaction
BULK = 1000  # rows per enqueue_many() call, and per raw bulk INSERT
PAIRED_CHUNK = 100  # one-per-transaction inserts per turn when the raw loop and enqueue() alternate
CONCURRENCY = 8  # runjobs --concurrency of the batched drains

# Goals (issue 22), each a ratio to a raw loop measured in the same run.
DRAIN_GOAL = 0.6  # runjobs, one job at a time, against the minimal claim-1 loop
BATCHED_GOAL = 0.5  # runjobs --concurrency 8 against the minimal claim-10 loop
ENQUEUE_GOAL = 0.8  # enqueue() against the raw INSERT loop
BULK_GOAL = 0.5  # enqueue_many() against the raw bulk INSERT
LATENCY_GOAL_MS = 2.0  # LISTEN/NOTIFY p50
HELD_GOAL = held_snapshot.GOAL  # the worker's claim with a snapshot held open against without, in buffers
HELD_CHURN = 20_000  # jobs the worker claims while the snapshot is held (make bench-snapshot: 100,000)

RAW_INSERT = f"INSERT INTO {raw_queue.MINIMAL} (payload) VALUES (%s::jsonb)"
RAW_BULK = f"INSERT INTO {raw_queue.MINIMAL} (payload) SELECT p::jsonb FROM unnest(%s::text[]) AS p"


def wait_for(condition, message: str, timeout: float = TIMEOUT, interval: float = 0.01):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)
    return value


def drain(server: dict, db: psycopg.Connection, table_name: str, start, processes: int, jobs: int,
          reset=raw_queue.reset, drained=raw_queue.drained) -> dict:
    """Queue ``jobs`` in ``table_name``, start ``processes`` consumers behind a lock, release them together.

    The lock keeps process start-up (Django's ~0.5 s) out of the figure and lets
    two processes begin at the same instant: a runjobs worker blocks in its first
    sweep, a raw loop in its first claim. The rate comes from the database's own
    clock, first claim to last finish. ``reset`` and ``drained`` fill the table and read the rate: a
    peer's own (``bench.peers``) for its table.
    """
    reset(db, table_name, jobs)
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
    rate, window = drained(db, table_name, jobs)
    return {"rate": rate, "window": window, "wall": wall}


# -- enqueue: jobs.queue in this process, against raw psycopg on the minimal table ---------------

def enqueue_rate(count: int, per_transaction: int) -> float:
    from django.db import transaction

    from jobs.queue import enqueue

    started = time.perf_counter()
    for _ in range(count // per_transaction):
        with transaction.atomic():
            for _ in range(per_transaction):
                enqueue("noop", org_id="bench")
    return (count // per_transaction * per_transaction) / (time.perf_counter() - started)


def paired(raw, ours, chunks: int, per_chunk: int) -> tuple[float, float]:
    """Calls per second of ``raw()`` and ``ours()``, run in alternating chunks of ``per_chunk`` calls,
    which goes first turn about.

    Each call waits for its own WAL flush, and what a flush (or the machine) costs drifts by a quarter
    within seconds here: two loops run one after the other saw different disks. Paired in chunks of
    a few tens of milliseconds, a slow spell hits both alike.
    """
    spent = {raw: 0.0, ours: 0.0}
    for chunk in range(chunks):
        for call in (raw, ours) if chunk % 2 == 0 else (ours, raw):
            started = time.perf_counter()
            for _ in range(per_chunk):
                call()
            spent[call] += time.perf_counter() - started
    done = chunks * per_chunk
    return done / spent[raw], done / spent[ours]


def paired_insert_rates(server: dict, count: int) -> tuple[float, float]:
    """The raw INSERT loop and ``enqueue()``, one per transaction each (autocommit), ``PAIRED_CHUNK`` at a
    turn: (raw rate, enqueue rate), in job/s."""
    from jobs.queue import enqueue

    with connect(server, BENCH_DB) as conn:
        return paired(lambda: conn.execute(RAW_INSERT, ("{}",)), lambda: enqueue("noop", org_id="bench"),
                      count // PAIRED_CHUNK, PAIRED_CHUNK)


def paired_bulk_rates(server: dict, count: int) -> tuple[float, float]:
    """The raw bulk INSERT into the minimal table and ``enqueue_many()``, ``BULK`` rows per statement, each
    in autocommit, one statement at a turn: (raw rate, enqueue_many rate), in job/s."""
    from jobs.queue import enqueue_many

    payloads = ["{}"] * BULK
    items = [({}, None)] * BULK
    with connect(server, BENCH_DB) as conn:
        calls = paired(lambda: conn.execute(RAW_BULK, (payloads,)),
                       lambda: enqueue_many("noop", org_id="bench", items=items), count // BULK, 1)
    return calls[0] * BULK, calls[1] * BULK


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

    raw_queue.reset(db, "jobs", 0)
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


# -- the drains ----------------------------------------------------------------------------

def consumers(server: dict, url: str) -> dict:
    """Each drain's table and how to start one of its consumer processes, by the report's key."""
    def raw(table_name, batch):
        return lambda: raw_queue.RawConsumer(server, BENCH_DB, table_name, batch)

    def runjobs(*args):
        return lambda: AppProcess(url, "runjobs", "--burst", *args)

    return {
        "minimal_1": (raw_queue.MINIMAL, raw(raw_queue.MINIMAL, 1)),
        "minimal_10": (raw_queue.MINIMAL, raw(raw_queue.MINIMAL, 10)),
        "schema_1": (raw_queue.SCHEMA, raw(raw_queue.SCHEMA, 1)),
        "schema_10": (raw_queue.SCHEMA, raw(raw_queue.SCHEMA, 10)),
        "runjobs": ("jobs", runjobs()),
        "runjobs_batched": ("jobs", runjobs("--concurrency", str(CONCURRENCY))),
    }


# -- report --------------------------------------------------------------------------------

def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "es" if word.endswith("s") else "s")


LABELS = {
    "minimal_1": "raw loop, minimal table, claim 1",
    "minimal_10": "raw loop, minimal table, claim 10",
    "schema_1": "raw loop, jobs schema, claim 1",
    "schema_10": "raw loop, jobs schema, claim 10",
    "runjobs": "runjobs --burst",
    "runjobs_batched": f"runjobs --burst --concurrency {CONCURRENCY}",
}
# Which raw loop each drain is judged against, and the goal.
JUDGED = {
    "schema_1": ("minimal_1", None),
    "schema_10": ("minimal_10", None),
    "runjobs": ("minimal_1", DRAIN_GOAL),
    "runjobs_batched": ("minimal_10", BATCHED_GOAL),
}


ENQUEUE_FIGURES = ("raw_insert_1", "enqueue_1", "enqueue_batch", "raw_insert_bulk", "enqueue_bulk")


def report(r: dict, args, version: str) -> str:
    row, head = table(52, 16, 100)

    def rate(x):
        return f"{x:,.0f} job/s"

    def median(key):
        return statistics.median(run["rate"] for run in r["drains"][key])

    lines = [
        headline("queue", version),
        f"jobs per drain: {args.jobs:,}  rounds: {args.rounds} (medians)  latency samples: "
        f"{args.latency_samples} (listen), {r['poll_samples']} (poll)",
        *peers.header(r.get("peers")),
        "",
        *head,
    ]
    for n in (1, 2):
        for key in LABELS:
            value = median((key, n))
            if key in JUDGED:
                base, wanted = JUDGED[key]
                ratio = value / median((base, n))
                lines.append(row(f"{LABELS[key]}, {plural(n, 'process')}", rate(value),
                                 f"{ratio:.2f}x {base.split('_')[1]}", ratio_goal(ratio, wanted, "SHORT") if wanted else ""))
            else:
                lines.append(row(f"{LABELS[key]}, {plural(n, 'process')}", rate(value), "1.00x"))
        lines += peers.drain_rows(r.get("peers"), n, plural(n, "process"), row, rate,
                                  lambda key, n=n: median((key, n)))
        lines.append("")
    m = {key: statistics.median(r[key]) for key in ENQUEUE_FIGURES}  # each enqueue figure's median of the rounds
    one, bulk = m["enqueue_1"] / m["raw_insert_1"], m["enqueue_bulk"] / m["raw_insert_bulk"]
    lines += [
        row("raw INSERT, 1 per transaction (minimal table)", rate(m["raw_insert_1"]), "1.00x"),
        row("enqueue(), 1 per transaction", rate(m["enqueue_1"]), f"{one:.2f}x", ratio_goal(one, ENQUEUE_GOAL, "SHORT")),
        row(f"enqueue(), {BATCH} per transaction", rate(m["enqueue_batch"])),
        row(f"raw bulk INSERT, {BULK:,} rows per statement", rate(m["raw_insert_bulk"]), "1.00x"),
        row(f"enqueue_many(), {BULK:,} per call", rate(m["enqueue_bulk"]), f"{bulk:.2f}x", ratio_goal(bulk, BULK_GOAL, "SHORT")),
        "",
    ]
    for key, label in (("listen", "LISTEN/NOTIFY"), ("poll", "polling, --no-listen")):
        p50, p95 = percentile(r[f"latency_{key}"], 50), percentile(r[f"latency_{key}"], 95)
        wanted = f"p50 <= {LATENCY_GOAL_MS:g} ms  {verdict(p50 <= LATENCY_GOAL_MS, 'SHORT')}" if key == "listen" else ""
        lines.append(row(f"start latency p50 / p95, {label}", f"{p50:.1f} / {p95:.1f} ms", "", wanted))
    lines += peers.other_rows(r.get("peers"), row, rate, m["raw_insert_1"], m["raw_insert_bulk"], percentile)
    plain, held = r["held"][False], r["held"][True]
    ratio = held["per_claim"] / max(plain["per_claim"], 1)
    lines += [
        "",
        row(f"claim of 8, snapshot held through {args.held_churn:,} jobs (buffers)",
            f"{plain['per_claim']:,.0f} / {held['per_claim']:,.0f}", f"{ratio:.2f}x",
            f"<= {HELD_GOAL:g}x  {verdict(ratio <= HELD_GOAL, 'SHORT')}"),
        row("  its exact claim alone, plain / held (buffers)", f"{plain['exact']:,.0f} / {held['exact']:,.0f}"),
        row("  its share of exact claims, plain / held", f"{plain['exact_share']:.1%} / {held['exact_share']:.1%}",
            "", f"over {plain['seconds']:.1f} / {held['seconds']:.1f} s"),
        row("worker RSS flat (10 %) over 1,000,000 jobs", "not run here", "", "make bench-soak (~15 min)"),
    ]
    lines += ["", "each drain's rate per round (job/s):"]
    for (key, n), runs in r["drains"].items():
        lines.append(f"  {LABELS[key] + ', ' + plural(n, 'process'):<52} "
                     + "  ".join(f"{run['rate']:8,.0f}" for run in runs))
    lines += peers.round_lines(r.get("peers"), lambda n: plural(n, "process"))
    lines += ["", "each enqueue figure per round (job/s):"]
    for key in ENQUEUE_FIGURES:
        lines.append(f"  {key:<52} " + "  ".join(f"{value:8,.0f}" for value in r[key]))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs per drain run (default: 10000)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of every drain (default: 3)")
    parser.add_argument("--latency-samples", type=int, default=200,
                        help="enqueue-to-start samples with LISTEN/NOTIFY (default: 200; polling takes a tenth)")
    parser.add_argument("--held-churn", type=int, default=HELD_CHURN,
                        help=f"jobs claimed while a snapshot is held (default: {HELD_CHURN:,})")
    parser.add_argument("--peers", action=argparse.BooleanOptionalAction, default=True,
                        help="also run procrastinate and django-tasks-db when installed (make bench installs them)")
    args = parser.parse_args()
    if args.jobs < BULK or args.latency_samples < 10 or args.rounds < 1:
        parser.error(f"--jobs must be at least {BULK}, --latency-samples at least 10, --rounds at least 1")

    # This process enqueues through jobs.queue too, into the bench database only.
    with app_bench_database(BENCH_DB, "queue-bench-") as (server, url, _media):
        from jobs import conf

        results = {"drains": {}}
        with connect(server, BENCH_DB) as db:
            version = server_version(db)
            raw_queue.create_minimal(db)
            raw_queue.create_schema(db)
            peer_bench = peers.prepare(server, BENCH_DB, url) if args.peers else None
            results["peers"] = peer_bench and peer_bench.results
            enqueues = min(args.jobs, 2000)  # one fsync each: enough for a stable figure
            drains = consumers(server, url)
            for round_ in range(1, args.rounds + 1):
                # Every round, each figure beside its raw loop: the report takes the medians, as for the drains.
                print(f"enqueue, round {round_} of {args.rounds}: {enqueues:,} one per transaction, {args.jobs:,} "
                      f"in batches of {BATCH} and of {BULK:,}, raw and through jobs.queue ...", flush=True)
                for table_name in (raw_queue.MINIMAL, "jobs"):
                    raw_queue.reset(db, table_name, 0)
                raw_rate, enqueue_1 = paired_insert_rates(server, enqueues)
                results.setdefault("raw_insert_1", []).append(raw_rate)
                results.setdefault("enqueue_1", []).append(enqueue_1)
                raw_queue.reset(db, "jobs", 0)
                results.setdefault("enqueue_batch", []).append(enqueue_rate(args.jobs, BATCH))
                for table_name in (raw_queue.MINIMAL, "jobs"):
                    raw_queue.reset(db, table_name, 0)
                raw_rate, enqueue_bulk = paired_bulk_rates(server, args.jobs)
                results.setdefault("raw_insert_bulk", []).append(raw_rate)
                results.setdefault("enqueue_bulk", []).append(enqueue_bulk)
                if peer_bench and round_ == 1:
                    peer_bench.enqueue(db, enqueues, args.jobs)
                for n in (1, 2):
                    print(f"drain, round {round_} of {args.rounds}: {args.jobs:,} jobs, {plural(n, 'process')}, "
                          f"{len(drains)} consumers ...", flush=True)
                    for key, (table_name, start) in drains.items():
                        run = drain(server, db, table_name, start, n, args.jobs)
                        results["drains"].setdefault((key, n), []).append(run)
                    if peer_bench:
                        peer_bench.drains(drain, db, n, args.jobs)
            # Polling samples take ~2 s each at the default interval: a tenth as many.
            results["poll_samples"] = max(10, args.latency_samples // 10)
            poll_interval = conf.get("JOBS_POLL_INTERVAL")
            print(f"latency: {args.latency_samples} samples with LISTEN/NOTIFY, "
                  f"{results['poll_samples']} polling every ~{poll_interval:g} s ...", flush=True)
            results["latency_listen"] = latency(db, url, args.latency_samples, (0.005, 0.015))
            results["latency_poll"] = latency(db, url, results["poll_samples"], (0, poll_interval * 4 / 3),
                                              "--no-listen")
            if peer_bench:
                peer_bench.latency(db, args.latency_samples)
            print(f"held snapshot: a worker's claims of 8 over {args.held_churn:,} jobs, plain and with a snapshot "
                  "held open ...", flush=True)
            results["held"] = held_snapshot.claim_under_held_snapshot(server, BENCH_DB, args.held_churn)
    print()
    print(report(results, args, version))
    return 0


if __name__ == "__main__":
    sys.exit(main())
