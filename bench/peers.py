"""The queue benchmark's peers: procrastinate and django-tasks-db's ``db_worker``, beside runjobs, same server, same run.

Two PostgreSQL queues of the Python world, pinned in pyproject.toml's ``bench`` extra, which
``make bench`` alone installs. ``python -m bench.queue`` runs them when they are installed (one
line says how to get them when not, and the benchmark runs without them); ``--no-peers`` skips them.

- **procrastinate** (``procrastinate worker --one-shot --concurrency 1`` and ``8``; the app and its
  no-op task in ``bench.peer_procrastinate``). Its schema: ``procrastinate schema --apply``. Its jobs'
  times: the ``started`` and ``succeeded`` rows its triggers write into ``procrastinate_events``, at
  ``now()`` of the worker's fetch and finish transactions (the database clock).
- **django-tasks-db** (``python -m django db_worker --batch``, settings ``bench.peer_settings``, the
  no-op task in ``bench.peer_tasks``). Its schema: its migrations. Its times: ``started_at`` and
  ``finished_at`` of its rows, ``timezone.now()`` in the worker (the machine's clock, in Python).

Each consumer is a process of its own (``PeerProcess``: what ``bench.queue.drain`` expects of a
consumer) whose first claim blocks on the drain's ``LOCK TABLE … IN EXCLUSIVE MODE`` of its queue's
table, one waiting claim per process (procrastinate fetches one job at a time whatever its
concurrency), and which exits once nothing is queued. Each peer's table is filled in SQL, as its own
enqueue writes it, before every drain; its rate is jobs over first start to last finish, from its
own columns, and a drain that leaves a job unfinished raises.
"""

from __future__ import annotations

import argparse
import datetime
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from importlib.util import find_spec
from pathlib import Path

import psycopg
from psycopg import sql

from bench.common import ROOT, TIMEOUT, AppProcess, connect, settle, worker_env

BULK = 1000  # jobs per procrastinate batch_defer() call, as bench.queue's enqueue_many()
INSTALL_HINT = ("peers: procrastinate and django-tasks-db are not installed, so they are left out; "
                "`make bench` installs them (pip install -e '.[dev,bench]')")

PROCRASTINATE_CLI = ("-m", "procrastinate", "--log-level", "warning", "--app", "bench.peer_procrastinate.app")
DJANGO_CLI = ("-m", "django")


def rate(name: str, jobs: int, done: int, first_start: datetime.datetime | None,
         last_finish: datetime.datetime | None) -> tuple[float, float]:
    """(jobs per second, window in seconds) of a drain: first start to last finish. Raises unless all ``jobs`` ended.

    >>> t = datetime.datetime(2026, 12, 4, tzinfo=datetime.UTC)
    >>> rate("q", 100, 100, t, t + datetime.timedelta(seconds=0.5))
    (200.0, 0.5)
    """
    if done != jobs:
        raise RuntimeError(f"{name}: {done} of {jobs} jobs finished after the drain")
    if first_start is None or last_finish is None or last_finish <= first_start:
        raise RuntimeError(f"{name}: no time between the first start ({first_start}) and the last finish "
                           f"({last_finish})")
    window = (last_finish - first_start).total_seconds()
    return jobs / window, window


@dataclass(frozen=True, eq=False)  # each one is itself: compared and hashed by identity
class System:
    """One peer queue: its package, table, schema, how its jobs are queued and read, how its worker starts."""

    name: str  # the distribution, as pinned in pyproject.toml
    module: str  # what find_spec looks for
    table: str  # the table its workers claim from: the drain's gate
    env: dict  # for its processes, beside libpq's PG* variables
    schema: tuple  # argv that creates its tables
    fill: str  # SQL: %s no-op jobs queued
    truncate: str
    tally: str  # SQL: jobs finished, first start, last finish
    enqueue_one: str  # SQL: one no-op job, RETURNING its id
    started: str  # SQL: the job %s's start, epoch seconds, or NULL
    finished: str  # SQL: whether job %s has finished
    idle_worker: tuple  # argv of a worker that waits for jobs (start latency)
    listens: bool  # woken by NOTIFY (else it polls: a tenth of the samples, gaps of up to an interval)
    vacuum: tuple = ()  # more of its tables the drain's VACUUM ANALYZE covers

    def reset(self, db: psycopg.Connection, table: str, rows: int) -> None:
        """``bench.queue.drain``'s reset: empty, ``rows`` no-op jobs, the same settled state as the raw loops."""
        db.execute(self.truncate)
        if rows:
            db.execute(self.fill, (rows,))
        for other in self.vacuum:
            db.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(other)))
        settle(db, table)

    def drained(self, db: psycopg.Connection, table: str, jobs: int) -> tuple[float, float]:
        """``bench.queue.drain``'s rate: from this queue's own columns."""
        return rate(self.name, jobs, *db.execute(self.tally).fetchone())

    def installed(self) -> str | None:
        """Its version if installed (the pin ``make bench`` installs), else None."""
        if find_spec(self.module) is None:
            return None
        try:
            return version(self.name)
        except PackageNotFoundError:
            return None


PROCRASTINATE = System(
    name="procrastinate",
    module="procrastinate",
    table="procrastinate_jobs",
    env={},
    schema=(*PROCRASTINATE_CLI, "schema", "--apply"),
    # Its defer's INSERT (procrastinate_defer_jobs_v1) with what a plain noop.defer() gives; its triggers
    # write the 'deferred' event and send the NOTIFY as they do for every defer.
    fill="INSERT INTO procrastinate_jobs (queue_name, task_name) SELECT 'default', 'noop' FROM generate_series(1, %s)",
    truncate="TRUNCATE procrastinate_jobs, procrastinate_workers CASCADE",  # events, periodic defers too
    tally="SELECT (SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'), "
          "(SELECT min(at) FROM procrastinate_events WHERE type = 'started'), "
          "(SELECT max(at) FROM procrastinate_events WHERE type = 'succeeded')",
    # What noop.defer() sends, in a transaction of ours, so the time before its COMMIT can be taken.
    enqueue_one="SELECT unnest(procrastinate_defer_jobs_v1(ARRAY[ROW('default', 'noop', 0, NULL, NULL, '{}', NULL)"
                "::procrastinate_job_to_defer_v1]))",
    started="SELECT extract(epoch FROM at)::float8 FROM procrastinate_events WHERE job_id = %s AND type = 'started'",
    finished="SELECT status = 'succeeded' FROM procrastinate_jobs WHERE id = %s",
    idle_worker=(*PROCRASTINATE_CLI, "worker", "--concurrency", "1"),
    listens=True,
    vacuum=("procrastinate_events",),
)

TASKS_DB_TABLE = "django_tasks_database_dbtaskresult"
TASKS_DB = System(
    name="django-tasks-db",
    module="django_tasks_db",
    table=TASKS_DB_TABLE,
    env={"DJANGO_SETTINGS_MODULE": "bench.peer_settings"},
    schema=(*DJANGO_CLI, "migrate", "django_tasks_database", "--noinput", "-v", "0"),
    # The row noop.enqueue() writes (DBTaskResult.objects.create): no run_after is stored as the year 9999.
    fill=f"INSERT INTO {TASKS_DB_TABLE} (id, status, args_kwargs, priority, task_path, queue_name, backend_name, "
         "run_after, enqueued_at, exception_class_path, traceback, worker_ids) "
         "SELECT gen_random_uuid(), 'READY', '{\"args\": [], \"kwargs\": {}}', 0, 'bench.peer_tasks.noop', "
         "'default', 'default', '9999-01-01 00:00:00+00', clock_timestamp(), '', '', '[]' "
         "FROM generate_series(1, %s)",
    truncate=f"TRUNCATE {TASKS_DB_TABLE}",
    tally=f"SELECT count(*) FILTER (WHERE status = 'SUCCESSFUL'), min(started_at), max(finished_at) FROM {TASKS_DB_TABLE}",
    enqueue_one=f"INSERT INTO {TASKS_DB_TABLE} (id, status, args_kwargs, priority, task_path, queue_name, "
                "backend_name, run_after, enqueued_at, exception_class_path, traceback, worker_ids) "
                "VALUES (gen_random_uuid(), 'READY', '{\"args\": [], \"kwargs\": {}}', 0, 'bench.peer_tasks.noop', "
                "'default', 'default', '9999-01-01 00:00:00+00', now(), '', '', '[]') RETURNING id",
    started=f"SELECT extract(epoch FROM started_at)::float8 FROM {TASKS_DB_TABLE} WHERE id = %s",
    finished=f"SELECT status = 'SUCCESSFUL' FROM {TASKS_DB_TABLE} WHERE id = %s",
    # Its default interval (1 s): db_worker has no LISTEN, it polls. -v 0: no line per task, as runjobs at WARNING.
    idle_worker=(*DJANGO_CLI, "db_worker", "--no-startup-delay", "-v", "0"),
    listens=False,
)
SYSTEMS = (PROCRASTINATE, TASKS_DB)
POLL_INTERVAL = 1.0  # db_worker's default --interval


@dataclass(frozen=True)
class Peer:
    """One peer drain of the report: a system, how its consumer starts, and which raw loop it is judged by."""

    key: str
    label: str
    system: System
    argv: tuple  # a consumer that exits once nothing is queued
    base: str  # bench.queue's key of the raw loop


PEERS = (
    Peer("procrastinate_1", "procrastinate --concurrency 1", PROCRASTINATE,
         (*PROCRASTINATE_CLI, "worker", "--one-shot", "--concurrency", "1"), "minimal_1"),
    Peer("procrastinate_8", "procrastinate --concurrency 8", PROCRASTINATE,
         (*PROCRASTINATE_CLI, "worker", "--one-shot", "--concurrency", "8"), "minimal_10"),
    Peer("tasks_db", "django-tasks-db db_worker --batch", TASKS_DB,
         (*DJANGO_CLI, "db_worker", "--batch", "--no-startup-delay", "-v", "0"), "minimal_1"),
)


# -- the processes --------------------------------------------------------------------------------

def peer_env(server: dict, dbname: str, system: System) -> dict:
    """libpq's variables naming the bench database (both peers read them), and the system's own."""
    return {"PGHOST": server["host"], "PGPORT": server["port"], "PGUSER": server["user"],
            "PGPASSWORD": server["password"], "PGDATABASE": dbname, **system.env}


class PeerProcess(AppProcess):
    """``python <argv>`` (a peer's CLI) in its own process, with ``AppProcess``'s wait, stop and kill."""

    def __init__(self, url: str, env: dict, command: str, *argv: str):  # not AppProcess's: no manage.py here
        self.command = command
        with tempfile.NamedTemporaryFile(prefix=f"bench-{command}-", suffix=".log", delete=False) as log:
            self.log = Path(log.name)
            self.started = time.perf_counter()
            self.proc = subprocess.Popen([sys.executable, *argv], cwd=ROOT, env=worker_env(url, extra=env),
                                         stdout=log, stderr=subprocess.STDOUT)
        self.output = ""


def run(url: str, env: dict, *argv: str) -> str:
    """Run a peer's command to its end; its stdout, or a RuntimeError with its output."""
    done = subprocess.run([sys.executable, *argv], cwd=ROOT, env=worker_env(url, extra=env), capture_output=True,
                          text=True, timeout=TIMEOUT)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited with {done.returncode}:\n{(done.stdout + done.stderr)[-4000:]}")
    return done.stdout


# -- the run --------------------------------------------------------------------------------------

@dataclass
class PeerBench:
    """The installed peers on one bench database, and their figures (``results``, for the report)."""

    server: dict
    dbname: str
    url: str
    systems: tuple
    results: dict = field(default_factory=lambda: {"versions": {}, "drains": {}, "enqueue": {}, "latency": {}})

    def env(self, system: System) -> dict:
        return peer_env(self.server, self.dbname, system)

    @property
    def peers(self) -> list[Peer]:
        return [peer for peer in PEERS if peer.system in self.systems]

    def consumers(self) -> dict:
        """Each peer drain by its key: (table, start one consumer, reset, drained), as ``bench.queue.drain`` takes them."""
        def start(peer):
            return lambda: PeerProcess(self.url, self.env(peer.system), peer.key, *peer.argv)

        return {peer.key: (peer.system.table, start(peer), peer.system.reset, peer.system.drained)
                for peer in self.peers}

    def drains(self, drain, db: psycopg.Connection, processes: int, jobs: int) -> None:
        """One drain of each peer with ``processes`` consumers, through ``bench.queue.drain``."""
        for key, (table_name, start, reset, drained) in self.consumers().items():
            run_ = drain(self.server, db, table_name, start, processes, jobs, reset=reset, drained=drained)
            self.results["drains"].setdefault((key, processes), []).append(run_)

    def enqueue(self, db: psycopg.Connection, one: int, bulk: int) -> None:
        """Enqueue rates through each peer's own API, each in a process of its own (timed there, start-up aside)."""
        for system, mode, count in ((PROCRASTINATE, "one", one), (PROCRASTINATE, "bulk", bulk), (TASKS_DB, "one", one)):
            if system in self.systems:
                system.reset(db, system.table, 0)
                out = run(self.url, self.env(system), "-m", "bench.peers", "enqueue", system.name, mode, str(count))
                self.results["enqueue"][(system.name, mode)] = float(out.split()[-1])

    def latency(self, db: psycopg.Connection, samples: int) -> None:
        """Start latency of each peer's idle worker, measured as bench.queue measures runjobs'."""
        for system in self.systems:
            count = samples if system.listens else max(10, samples // 10)
            gap = (0.005, 0.015) if system.listens else (0, POLL_INTERVAL * 4 / 3)
            print(f"latency: {count} samples, {system.name} ...", flush=True)
            self.results["latency"][system.name] = latency(db, self.server, self.dbname, self.url, system, count, gap)


def prepare(server: dict, dbname: str, url: str) -> PeerBench | None:
    """The installed peers with their schemas created in ``dbname``; None (and one line) when none is installed."""
    found = {system: system.installed() for system in SYSTEMS}
    systems = tuple(system for system, ver in found.items() if ver)
    if not systems:
        print(INSTALL_HINT, flush=True)
        return None
    for system in SYSTEMS:
        if system not in systems:
            print(f"peers: {system.name} is not installed, so it is left out; `make bench` installs it", flush=True)
    bench = PeerBench(server, dbname, url, systems)
    for system in systems:
        run(url, bench.env(system), *system.schema)
        bench.results["versions"][system.name] = found[system]
    print("peers: " + ", ".join(f"{name} {ver}" for name, ver in bench.results["versions"].items())
          + " (their schemas created)", flush=True)
    return bench


def latency(db: psycopg.Connection, server: dict, dbname: str, url: str, system: System, samples: int,
            gap: tuple) -> list[float]:
    """Milliseconds from "enqueue about to commit" to the job's start, one idle worker of ``system``.

    As ``bench.queue.latency``: one job at a time, the clock read just before our COMMIT, the job's
    start from its own columns, a random ``gap`` after each job finished.
    """
    system.reset(db, system.table, 0)
    worker = PeerProcess(url, peer_env(server, dbname, system), f"{system.name}-idle", *system.idle_worker)
    warmup = 3
    sent = []
    try:
        with connect(server, dbname, autocommit=False) as enqueuer:
            for _ in range(warmup + samples):
                with enqueuer.transaction():
                    job_id = enqueuer.execute(system.enqueue_one).fetchone()[0]
                    before_commit = time.time()
                sent.append((job_id, before_commit))
                deadline = time.monotonic() + 60
                while not db.execute(system.finished, (job_id,)).fetchone()[0]:
                    if not worker.alive():
                        worker.wait()  # raises with its output
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{system.name}: a latency job still not finished after 60 s")
                    time.sleep(0.002)
                time.sleep(random.uniform(*gap))
    finally:
        try:
            worker.stop()
        finally:
            worker.kill()  # only if stopping failed
    return [(db.execute(system.started, (job_id,)).fetchone()[0] - t) * 1000 for job_id, t in sent[warmup:]]


# -- the report -----------------------------------------------------------------------------------

def header(results: dict | None) -> list[str]:
    if not results:
        return []
    versions = ", ".join(f"{name} {ver}" for name, ver in results["versions"].items())
    return [f"peers ({versions}; the bench extra): same server, same rounds, judged by the same raw loops, no goal"]


def drain_rows(results: dict | None, processes: int, suffix: str, row, show_rate, base_median) -> list[str]:
    """Each peer's median drain rate with ``processes`` processes, and its ratio to the raw loop it is judged by."""
    lines = []
    for peer in PEERS:
        runs = (results or {}).get("drains", {}).get((peer.key, processes))
        if runs:
            value = statistics.median(run_["rate"] for run_ in runs)
            ratio = value / base_median(peer.base)
            lines.append(row(f"{peer.label}, {suffix}", show_rate(value), f"{ratio:.2f}x {peer.base.split('_')[1]}"))
    return lines


def other_rows(results: dict | None, row, show_rate, raw_insert_1: float, raw_insert_bulk: float,
               percentile) -> list[str]:
    """The peers' enqueue rates (against the same raw INSERTs as ours) and start latency."""
    if not results:
        return []
    lines = []
    enqueue = results["enqueue"]
    for (name, mode), label, base in (
        (("procrastinate", "one"), "procrastinate defer(), 1 per transaction", raw_insert_1),
        (("procrastinate", "bulk"), f"procrastinate batch_defer(), {BULK:,} per call", raw_insert_bulk),
        (("django-tasks-db", "one"), "django-tasks-db enqueue(), 1 per transaction", raw_insert_1),
    ):
        if (name, mode) in enqueue:
            lines.append(row(label, show_rate(enqueue[(name, mode)]), f"{enqueue[(name, mode)] / base:.2f}x"))
    for name, label in (("procrastinate", "procrastinate (LISTEN)"),
                        ("django-tasks-db", f"db_worker (polls {POLL_INTERVAL:g} s)")):
        if name in results["latency"]:
            values = results["latency"][name]
            lines.append(row(f"start latency p50 / p95, {label}",
                             f"{percentile(values, 50):.1f} / {percentile(values, 95):.1f} ms"))
    return ["", *lines] if lines else []


def round_lines(results: dict | None, suffix_of) -> list[str]:
    labels = {peer.key: peer.label for peer in PEERS}
    return [f"  {labels[key] + ', ' + suffix_of(n):<52} " + "  ".join(f"{run_['rate']:8,.0f}" for run_ in runs)
            for (key, n), runs in (results or {}).get("drains", {}).items()]


# -- enqueue timing, in a peer's own process ------------------------------------------------------

def enqueue_procrastinate(mode: str, count: int) -> float:
    from bench.peer_procrastinate import app, noop

    with app.open():
        noop.defer()  # the pool's first connection, not timed
        started = time.perf_counter()
        if mode == "one":
            for _ in range(count):
                noop.defer()  # one statement, one COMMIT
        else:
            items = [{}] * BULK
            count = count // BULK * BULK
            for _ in range(count // BULK):
                noop.batch_defer(*items)
        return count / (time.perf_counter() - started)


def enqueue_tasks_db(count: int) -> float:
    import django

    django.setup()
    from bench.peer_tasks import noop

    noop.enqueue()  # the connection, not timed
    started = time.perf_counter()
    for _ in range(count):
        noop.enqueue()  # autocommit: one INSERT, one COMMIT
    return count / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description="Time a peer's enqueue (run by bench.queue, in the peer's env).")
    sub = parser.add_subparsers(dest="command", required=True)
    enqueue = sub.add_parser("enqueue")
    enqueue.add_argument("system", choices=[system.name for system in SYSTEMS])
    enqueue.add_argument("mode", choices=["one", "bulk"])
    enqueue.add_argument("count", type=int)
    args = parser.parse_args()
    if args.system == PROCRASTINATE.name:
        print(enqueue_procrastinate(args.mode, args.count))
    elif args.mode == "one":
        print(enqueue_tasks_db(args.count))
    else:
        parser.error("django-tasks has no bulk enqueue")
    return 0


if __name__ == "__main__":
    sys.exit(main())
