"""Queue benchmark: enqueue rate, drain rate, wake-up latency, and the ceiling they are judged by.

    .venv/bin/python bench/queue_bench.py [--jobs 10000] [--latency-samples 200]

Not a test: it prints figures and exits 0 unless something crashed. Everything
runs in a throw-away database (``seoinsight_bench``) on the same server as the
app — the embedded one, or the one ``DATABASE_URL`` names — dropped at the end.
docs/benchmarks.md says what each figure means and keeps a recorded run.
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote, unquote

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make `seoinsight` and `jobs` importable

BENCH_DB = "seoinsight_bench"
BATCH = 100
DRAIN_GOAL = 0.6  # drain ≥ 0.6 × ceiling (issue goal)
LATENCY_GOAL_MS = 5.0  # LISTEN/NOTIFY p50 ≤ 5 ms (issue goal)
TIMEOUT = 300

# The ceiling: what the same server does with no framework at all — the claim
# the worker runs, minus its one_running_per guard, then a fenced finish, each
# in autocommit, on a table with the same columns, constraints and indexes.
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
FILL = "INSERT INTO {} (org_id, type, payload, created_at) SELECT 'bench', 'noop', '{{}}', clock_timestamp() FROM generate_series(1, %s)"


# -- the database ------------------------------------------------------------------------------

def server_settings() -> dict:
    """Connection settings of the app's server: DATABASE_URL's, else the embedded one (started if need be)."""
    url = os.environ.get("DATABASE_URL")
    if url:
        import environ

        s = environ.Env.db_url_config(url)
        s["HOST"] = unquote(s.get("HOST") or "")
    else:
        from seoinsight.embedded_db import database_settings

        # "postgres" always exists: asking for it creates nothing, it only finds the server.
        s = database_settings(ROOT / ".data" / "postgres", name="postgres")
    return {"host": s.get("HOST") or "localhost", "port": str(s.get("PORT") or 5432),
            "user": s.get("USER") or "postgres", "password": s.get("PASSWORD") or ""}


def database_url(server: dict, dbname: str) -> str:
    """Socket directories go percent-encoded in the host, which settings decode."""
    password = f":{quote(server['password'], safe='')}" if server["password"] else ""
    return f"postgres://{quote(server['user'], safe='')}{password}@{quote(server['host'], safe='')}:{server['port']}/{dbname}"


def connect(server: dict, dbname: str, autocommit: bool = True) -> psycopg.Connection:
    return psycopg.connect(dbname=dbname, autocommit=autocommit, **server)


def recreate_database(server: dict) -> None:
    with connect(server, "postgres") as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(BENCH_DB)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(BENCH_DB)))


def drop_database(server: dict) -> None:
    with connect(server, "postgres") as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(BENCH_DB)))


def reset_table(db: psycopg.Connection, table: str, rows: int) -> None:
    """Empty ``table``, queue ``rows`` noop jobs, and give every run the same starting state."""
    ident = sql.Identifier(table)
    db.execute(sql.SQL("TRUNCATE {}").format(ident))
    if rows:
        db.execute(sql.SQL(FILL).format(ident), (rows,))
    db.execute(sql.SQL("VACUUM ANALYZE {}").format(ident))
    try:
        db.execute("CHECKPOINT")  # so no run pays for the previous one's dirty pages
    except psycopg.errors.InsufficientPrivilege:
        pass


# -- processes ---------------------------------------------------------------------------------

def worker_env(url: str) -> dict:
    env = dict(os.environ, DATABASE_URL=url, LOG_LEVEL="WARNING", DJANGO_LOG_LEVEL="WARNING")
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Runjobs:
    """``manage.py runjobs`` in its own process, its output kept for the crash report."""

    def __init__(self, url: str, *args: str):
        self.log = tempfile.NamedTemporaryFile(prefix="bench-runjobs-", suffix=".log", delete=False)
        self.proc = subprocess.Popen([sys.executable, "manage.py", "runjobs", *args], cwd=ROOT,
                                     env=worker_env(url), stdout=self.log, stderr=subprocess.STDOUT)

    def wait(self) -> None:
        code = self.proc.wait(timeout=TIMEOUT)
        if code != 0:
            raise RuntimeError(f"runjobs exited with {code}:\n{Path(self.log.name).read_text()[-4000:]}")
        os.unlink(self.log.name)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


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


def gated_drain(server: dict, db: psycopg.Connection, table: str, start_all, jobs: int) -> dict:
    """Start the consumers behind a table lock, release them together, time the drain.

    The lock keeps process start-up (Django's ~0.5 s) out of the figure and lets
    two processes begin at the same instant. The rate comes from the database's
    own clock: first claim to last finish.
    """
    gate = connect(server, BENCH_DB, autocommit=False)
    try:
        gate.execute(sql.SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(sql.Identifier(table)))
        consumers = start_all()
        waiting = "SELECT count(*) FROM pg_locks WHERE relation = %s::regclass AND NOT granted"
        wait_for(lambda: db.execute(waiting, (table,)).fetchone()[0] >= len(consumers),
                 f"{len(consumers)} consumer(s) to reach the gate")
        released = time.perf_counter()
        gate.commit()
        for wait in consumers:
            wait()
        wall = time.perf_counter() - released
    finally:
        gate.close()
    done, window = db.execute(sql.SQL(
        "SELECT count(*) FILTER (WHERE status = 'done'), "
        "extract(epoch FROM max(finished_at) - min(started_at))::float8 FROM {}").format(sql.Identifier(table))
    ).fetchone()
    if done != jobs:
        raise RuntimeError(f"{table}: {done} of {jobs} jobs done after the drain")
    return {"rate": jobs / window, "window": window, "wall": wall}


def drain_runjobs(server, db, url, jobs, workers) -> dict:
    reset_table(db, "jobs", jobs)

    def start_all():
        procs = [Runjobs(url, "--burst") for _ in range(workers)]
        return [p.wait for p in procs]

    return gated_drain(server, db, "jobs", start_all, jobs)


def drain_ceiling(server, db, jobs, processes) -> dict:
    reset_table(db, "bench_ceiling", jobs)
    ctx = multiprocessing.get_context("spawn")  # fresh interpreters: nothing inherited from Django

    def start_all():
        procs = [ctx.Process(target=ceiling_loop, args=(server,)) for _ in range(processes)]
        for p in procs:
            p.start()

        def waiter(p):
            def wait():
                p.join(TIMEOUT)
                if p.exitcode != 0:
                    raise RuntimeError(f"ceiling process exited with {p.exitcode}")
            return wait

        return [waiter(p) for p in procs]

    return gated_drain(server, db, "bench_ceiling", start_all, jobs)


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


def latency(db: psycopg.Connection, url: str, samples: int, *worker_args: str) -> list[float]:
    """Milliseconds from "enqueue about to commit" to "a worker claimed it", one idle worker.

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
    worker = Runjobs(url, *worker_args)
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
            wait_for(lambda: finished(job.id), "a latency job to finish", timeout=60, interval=0.002)
            time.sleep(random.uniform(0.005, 0.015))
    finally:
        worker.stop()
    started = dict(db.execute("SELECT id, extract(epoch FROM started_at)::float8 FROM jobs "
                              "WHERE id = ANY(%s)", ([i for i, _ in sent],)).fetchall())
    return [(started[i] - t) * 1000 for i, t in sent[warmup:]]


# -- report --------------------------------------------------------------------------------

def p(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def report(r: dict, args, version: str) -> str:
    lines = [
        f"seoinsight queue benchmark  {datetime.datetime.now():%Y-%m-%d %H:%M}  "
        f"{os.cpu_count()} CPU(s), {platform.python_implementation()} {platform.python_version()}, {version}",
        f"jobs per drain: {args.jobs:,}  latency samples: {args.latency_samples} (listen), "
        f"{r['poll_samples']} (poll)",
        "",
        f"{'figure':<44}{'value':>18}{'vs ceiling':>12}  goal",
        "-" * 96,
        f"{'enqueue, 1 per transaction':<44}{r['enqueue_1']:>12,.0f} job/s",
        f"{f'enqueue, {BATCH} per transaction':<44}{r['enqueue_batch']:>12,.0f} job/s",
    ]
    for n in (1, 2):
        c = r[f"ceiling_{n}"]
        lines.append(f"{f'ceiling: raw psycopg, {n} process(es)':<44}{c['rate']:>12,.0f} job/s{1:>11.2f}x")
    for n in (1, 2):
        d, c = r[f"drain_{n}"], r[f"ceiling_{n}"]
        ratio = d["rate"] / c["rate"]
        lines.append(f"{f'drain: runjobs --burst, {n} worker(s)':<44}{d['rate']:>12,.0f} job/s{ratio:>11.2f}x"
                     f"  >= {DRAIN_GOAL}x  {verdict(ratio >= DRAIN_GOAL)}")
    for key, label in (("listen", "LISTEN/NOTIFY"), ("poll", "polling, --no-listen")):
        values = r[f"latency_{key}"]
        p50, p95 = p(values, 50), p(values, 95)
        goal = f"  p50 <= {LATENCY_GOAL_MS:g} ms  {verdict(p50 <= LATENCY_GOAL_MS)}" if key == "listen" else ""
        lines.append(f"{f'latency p50 / p95, {label}':<44}{f'{p50:.1f} / {p95:.1f} ms':>18}{'':>12}{goal}")
    lines += ["", "drain wall time (gate release to last process exited), drain window (first claim to last finish):"]
    for key in ("ceiling_1", "drain_1", "ceiling_2", "drain_2"):
        lines.append(f"  {key:<10} wall {r[key]['wall']:6.2f} s   window {r[key]['window']:6.2f} s")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs per drain run (default: 10000)")
    parser.add_argument("--latency-samples", type=int, default=200,
                        help="enqueue-to-start samples with LISTEN/NOTIFY (default: 200; polling takes a fifth)")
    args = parser.parse_args()
    if args.jobs < BATCH or args.latency_samples < 10:
        parser.error("--jobs must be at least 100 and --latency-samples at least 10")

    server = server_settings()
    url = database_url(server, BENCH_DB)
    recreate_database(server)
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT,
                       env=worker_env(url), check=True)
        # This process enqueues through jobs.queue too, into the bench database only.
        os.environ.update(DATABASE_URL=url, LOG_LEVEL="WARNING", DJANGO_LOG_LEVEL="WARNING",
                          DJANGO_SETTINGS_MODULE="seoinsight.settings")
        import django

        django.setup()
        from django.db import connection

        results = {}
        with connect(server, BENCH_DB) as db:
            version = "PostgreSQL " + db.execute("SHOW server_version").fetchone()[0]
            db.execute("CREATE TABLE bench_ceiling (LIKE jobs INCLUDING ALL)")
            enqueues = min(args.jobs, 2000)  # one fsync each: enough for a stable figure
            print(f"enqueue: {enqueues:,} one per transaction, {args.jobs:,} in batches of {BATCH} ...", flush=True)
            reset_table(db, "jobs", 0)
            results["enqueue_1"] = enqueue_rate(enqueues, 1)
            reset_table(db, "jobs", 0)
            results["enqueue_batch"] = enqueue_rate(args.jobs, BATCH)
            for n in (1, 2):
                print(f"drain: {args.jobs:,} jobs, ceiling then runjobs, {n} process(es) ...", flush=True)
                results[f"ceiling_{n}"] = drain_ceiling(server, db, args.jobs, n)
                results[f"drain_{n}"] = drain_runjobs(server, db, url, args.jobs, n)
            results["poll_samples"] = max(10, args.latency_samples // 5)  # ~0.75 s each at the default interval
            print(f"latency: {args.latency_samples} samples with LISTEN/NOTIFY, "
                  f"{results['poll_samples']} polling ...", flush=True)
            results["latency_listen"] = latency(db, url, args.latency_samples)
            results["latency_poll"] = latency(db, url, results["poll_samples"], "--no-listen")
        connection.close()
    finally:
        drop_database(server)
    print()
    print(report(results, args, version))
    return 0


if __name__ == "__main__":
    sys.exit(main())
