"""A worker's memory over a million jobs (issue 22): is its RSS flat?

    .venv/bin/python -m bench.soak [--jobs 1000000] [--concurrency 1] [--sample-every 50000]

Not a test: it prints figures and exits 0 unless something crashed. In a throw-away database
(``seoinsight_bench_soak_c<concurrency>``) migrated by the app, one ``manage.py runjobs`` process
(not ``--burst``: a long-running worker, as production runs it, with its periodic duties) drains
``--jobs`` noop jobs while this process keeps the queue fed: whenever fewer than ``--low`` are
queued it queues up to ``--high`` (1,000 per INSERT: the rows ``enqueue_many`` writes, without its
notification; see FILL). Every ``--sample-every`` jobs done it reads the worker's VmRSS (and its
high-water mark, VmHWM) from /proc/<pid>/status. At the end it prints the series and judges
"flat": the sample after warm-up (the first at ``--sample-every`` jobs) against the highest, the
lowest and the last one after it, within ``--tolerance`` (10 %).

Jobs done are counted as queued so far minus the live ones (queued or running, read off the two
states' partial indexes), so no count runs over the million finished rows. The table is
ANALYZEd after the first fill, so the worker's generic claim plan is made from a queue, not from an
empty table. The database commits with ``synchronous_commit=off`` unless ``--durable``: the worker's
code path is the same, the server only stops waiting for each commit's flush, which on a shared disk
would make a million jobs take hours. It stops by itself after ``--max-minutes`` whatever is done,
and the report says so.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from psycopg import sql

from bench.common import ROOT, AppProcess, app_bench_database, connect, headline, server_version, verdict, worker_env

BENCH_DB = "seoinsight_bench_soak_c{}"  # by --concurrency: two soaks can run side by side
BULK = 1000  # jobs per INSERT
POLL = 0.25  # seconds between looks at the queue
LIVE = "SELECT count(*) FROM jobs WHERE status = 'queued' OR status = 'running'"  # the two states' partial indexes


class TreeProcess(AppProcess):
    """An AppProcess whose ``manage.py`` (and so its code) comes from ``tree``: this project, or another
    checkout of it (``git archive <commit> | tar -x -C DIR``), run with this venv and environment.

    The script's directory comes first on sys.path, so the tree's packages win over the venv's
    editable install of this one. Its migrations must match this project's.
    """

    def __init__(self, tree: Path, url: str, command: str, *args: str):
        self.command = command
        with tempfile.NamedTemporaryFile(prefix=f"bench-{command}-", suffix=".log", delete=False) as log:
            self.log = Path(log.name)
            self.started = time.perf_counter()
            self.proc = subprocess.Popen([sys.executable, "manage.py", command, *args], cwd=tree,
                                         env=worker_env(url), stdout=log, stderr=subprocess.STDOUT)
        self.output = ""


def tree_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tree", type=Path, default=ROOT,
                        help="source tree the workers run from (default: this one), e.g. a commit exported by "
                             "git archive, to measure it against the same benchmark")


def tree_label(tree: Path) -> str:
    """What the workers run: the tree, and its commit and changed files when it is a git work tree."""
    git = ["git", "-C", str(tree)]
    try:
        commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                check=True).stdout.strip()
        changed = subprocess.run([*git, "status", "--porcelain", "--", "jobs"], capture_output=True, text=True,
                                 check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        return f"workers from {tree} (not a git work tree)"
    changed = [line[3:] for line in changed if line.strip()]
    return f"workers from {tree} at {commit}" + (f", jobs/ changed: {', '.join(changed)}" if changed else "")


def memory(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process, in kB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


# The rows enqueue_many("noop", org_id="bench") writes, BULK per statement, without its pg_notify: a
# worker kept busy never reads its LISTEN connection (jobs.worker.Waker reads it only while idle), so
# every notification waits in the socket; after a few thousand its server backend blocks writing
# to it, and a backend blocked there holds up every ProcSignalBarrier of the server, so each DROP
# DATABASE on it (other benchmarks', test teardowns) hangs, and the xids those hold stop index
# cleanup in every database (docs/benchmarks.md). The worker keeps its LISTEN connection; nothing
# arrives on it, as nothing would be read from it.
FILL = """
INSERT INTO jobs (org_id, type, payload, priority, queue_name)
SELECT 'bench', 'noop', '{}', %(priority)s, %(queue_name)s FROM generate_series(1, %(count)s)
"""


def enqueue(db, count: int) -> None:
    from jobs import registry

    noop = registry.get("noop")
    while count > 0:
        db.execute(FILL, {"priority": noop.priority, "queue_name": noop.queue, "count": min(count, BULK)})
        count -= BULK


def soak(server: dict, url: str, dbname: str, args) -> dict:
    """Feed one worker ``args.jobs`` jobs; the RSS samples, the time it took, and whether it finished."""
    with connect(server, dbname) as db:
        produced = min(args.high, args.jobs)
        enqueue(db, produced)
        db.execute("ANALYZE jobs")
        worker = TreeProcess(args.tree, url, "runjobs", "--concurrency", str(args.concurrency))
        try:
            started = time.monotonic()
            deadline = started + args.max_minutes * 60
            samples = [(0, *memory(worker.pid), 0.0)]  # at start, before Django has loaded: for reference only
            next_sample, done, last_report, elapsed = args.sample_every, 0, started, 0.0
            while done < args.jobs:
                if not worker.alive():
                    worker.wait(0)  # raises with its output
                    raise RuntimeError("the worker exited")
                if time.monotonic() > deadline:
                    break
                time.sleep(POLL)
                live = db.execute(LIVE).fetchone()[0]
                done = produced - live
                if produced < args.jobs and live < args.low:
                    more = min(args.high - live, args.jobs - produced)
                    enqueue(db, more)
                    produced += more
                if done >= next_sample:
                    samples.append((done, *memory(worker.pid), time.monotonic() - started))
                    while next_sample <= done:
                        next_sample += args.sample_every
                if time.monotonic() - last_report > 60:
                    last_report = time.monotonic()
                    rss = memory(worker.pid)[0]
                    print(f"  {time.monotonic() - started:>6.0f} s  {done:>9,} done  {live:>7,} live  "
                          f"VmRSS {rss / 1024:.1f} MB", flush=True)
            elapsed = time.monotonic() - started
            final = memory(worker.pid)
            if not samples or samples[-1][0] != done:
                samples.append((done, *final, elapsed))
            worker.stop(60)
        finally:
            worker.kill()
    return {"samples": samples, "done": done, "elapsed": elapsed, "finished": done >= args.jobs}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--concurrency", type=int, default=1, help="the worker's --concurrency (default 1)")
    parser.add_argument("--sample-every", type=int, default=50_000, help="jobs done between RSS samples")
    parser.add_argument("--low", type=int, default=10_000, help="refill the queue when fewer are queued")
    parser.add_argument("--high", type=int, default=30_000, help="refill up to this many queued")
    parser.add_argument("--tolerance", type=float, default=0.10, help="flat: within this fraction (default 0.10)")
    parser.add_argument("--max-minutes", type=float, default=90, help="stop after this long, done or not")
    parser.add_argument("--durable", action="store_true", help="keep synchronous_commit on (slower)")
    tree_argument(parser)
    args = parser.parse_args(argv)
    dbname = BENCH_DB.format(args.concurrency)
    with app_bench_database(dbname, "seoinsight-bench-soak-") as (server, url, _media):
        with connect(server, dbname) as db:
            print(headline("worker soak", server_version(db)), flush=True)
            print(tree_label(args.tree), flush=True)
            if not args.durable:
                db.execute(sql.SQL("ALTER DATABASE {} SET synchronous_commit = off").format(sql.Identifier(dbname)))
        print(f"{args.jobs:,} noop jobs, runjobs --concurrency {args.concurrency}, queue kept at "
              f"{args.low:,}-{args.high:,}, VmRSS every {args.sample_every:,} jobs", flush=True)
        result = soak(server, url, dbname, args)
    report(result, args)
    return 0


def report(result: dict, args) -> None:
    samples = result["samples"]
    print(f"\n{'jobs done':>10}  {'VmRSS MB':>9}  {'VmHWM MB':>9}  {'seconds':>8}  {'job/s since last':>16}")
    previous = None
    for done, rss, hwm, seconds in samples:
        rate = "" if previous is None or seconds == previous[1] else f"{(done - previous[0]) / (seconds - previous[1]):,.0f}"
        print(f"{done:>10,}  {rss / 1024:>9.1f}  {hwm / 1024:>9.1f}  {seconds:>8.0f}  {rate:>16}")
        previous = (done, seconds)
    print(f"{result['done']:,} jobs in {result['elapsed']:.0f} s ({result['done'] / max(result['elapsed'], 1e-9):,.0f} "
          f"job/s){'' if result['finished'] else f', stopped by --max-minutes {args.max_minutes:g} before {args.jobs:,}'}")
    after = [s for s in samples if s[0] >= args.sample_every]
    if len(after) < 2:
        print(f"RSS flat within ±{args.tolerance:.0%}: too few samples after warm-up  SHORT")
        return
    warm, last = after[0], after[-1]
    peak = max(after, key=lambda s: s[1])
    low = min(after, key=lambda s: s[1])
    growth_last = last[1] / warm[1] - 1
    growth_peak = peak[1] / warm[1] - 1
    drop = low[1] / warm[1] - 1
    ok = max(abs(growth_last), abs(growth_peak), abs(drop)) <= args.tolerance
    print(f"after warm-up ({warm[0]:,} jobs) {warm[1] / 1024:.1f} MB; highest {peak[1] / 1024:.1f} MB "
          f"({growth_peak:+.1%}, at {peak[0]:,}); last {last[1] / 1024:.1f} MB ({growth_last:+.1%}, at {last[0]:,})")
    print(f"RSS flat within ±{args.tolerance:.0%} from {warm[0]:,} to {last[0]:,} jobs: {verdict(ok, 'SHORT')}"
          + ("" if result["finished"] else " (run incomplete)"))


if __name__ == "__main__":
    raise SystemExit(main())
