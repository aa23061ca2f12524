"""The claim's cost while a transaction holds a snapshot open for the whole run (issue 22).

    .venv/bin/python -m bench.held_snapshot [--churn 100000] [--points 0,25%,50%,100%] [--waiting 1000]

Not a test: it prints figures and exits 0 unless something crashed. In a throw-away database
(``seoinsight_bench_snapshot``) migrated by the app, ``--churn`` noop jobs are queued (``enqueue_many``,
1,000 per call) and drained by real ``manage.py runjobs --burst`` processes, twice: once plain, once
while another connection holds a REPEATABLE READ transaction that took its snapshot before the
first job (``BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1 FROM jobs LIMIT 1``, kept open to the
end). At each of ``--points`` (jobs churned so far), with ``--waiting`` more jobs queued, it measures:

- the claim (``jobs.sql.CLAIM_UNGUARDED``) and the batched claim (``CLAIM_MANY_UNGUARDED``, limit 8):
  shared buffers (hit + read) and execution time of ``EXPLAIN (ANALYZE, BUFFERS)``, in a transaction
  rolled back, with the parameters a worker sends (``jobs.queue.claim_plan()``) and the worker's
  generic plan (``plan_cache_mode=force_generic_plan``, as ``jobs.dbsession`` sets it); median of
  ``--samples``;
- ``--real-claims`` real exact claims, prepared, each its own transaction and its job finished after:
  wall ms per claim (this session commits with ``synchronous_commit=off``, so the figure is the
  claim, not the disk's flush);
- the bounded claims (``CLAIM_UNGUARDED_AFTER``, ``CLAIM_MANY_UNGUARDED_AFTER``) started after the last
  of those, by EXPLAIN as above;
- ``--worker-claims`` claims (queued for it) as a worker makes them (``jobs.queue.claim`` with its
  ``ClaimCursor``): ms per claim, claims per second and how many were exact. With the EXPLAIN figures
  of both claims, what a worker's claim costs in buffers: exact ones times their share, bounded
  ones times theirs.

The drains are the workers' too: with ``--tree`` those of another work tree (before the cursor,
for one), else this one's.

Before every drain and measurement the table is ANALYZEd, so the worker's generic plan is made from
the queue it sees (docs/benchmarks.md: a plan made from an empty table's statistics sorts the whole
queue at every claim). After the last point the snapshot is released and the claim measured again.
The figures and what they mean: docs/benchmarks.md, "Held snapshot and a million jobs".
"""

from __future__ import annotations

import argparse
import statistics
import time

import psycopg
from psycopg import sql as pgsql

from bench.common import ROOT, app_bench_database, connect, headline, server_version, settle, verdict
from bench.soak import TreeProcess, tree_argument, tree_label

BENCH_DB = "seoinsight_bench_snapshot"
BULK = 1000  # jobs per enqueue_many() call
GOAL = 2.0  # buffers per claim with a held snapshot, at most this many times those without
DRAIN_TIMEOUT = 3600  # seconds one runjobs --burst may take
HOLD = "SELECT 1 FROM jobs LIMIT 1"
QUEUED_INDEX = "jobs_queued_claim_order"


# -- the claim, as a worker sends it ----------------------------------------------------------------

def claim_params(limit: int | None = None) -> dict:
    from jobs import queue

    params = {**queue.claim_plan().params, "queues": None, "worker_id": "bench:1"}
    if limit is not None:
        params["limit"] = limit
    return params


def explain(db: psycopg.Connection, statement: str, params: dict) -> tuple[int, float, str]:
    """(shared buffers hit + read, execution ms, indexes the candidates come from) of one run, rolled back."""
    with db.transaction(force_rollback=True):
        result = db.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, params).fetchone()[0][0]
    plan = result["Plan"]
    return (plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0), result["Execution Time"],
            "+".join(sorted(set(scans(plan)))))


def scans(node: dict):
    """The indexes (or Seq Scan) the candidates are read by (alias j), not the UPDATE's probe of the pkey."""
    if node.get("Alias") == "j" and "Scan" in node.get("Node Type", ""):
        yield node.get("Index Name", node["Node Type"]).removeprefix("jobs_")
    for child in node.get("Plans", []):
        yield from scans(child)


def explained(db: psycopg.Connection, statement: str, params: dict, samples: int) -> dict:
    runs = [explain(db, statement, params) for _ in range(samples)]
    return {"buffers": statistics.median(r[0] for r in runs), "ms": statistics.median(r[1] for r in runs),
            "index": runs[0][2]}


# -- the claim a worker makes: exact, or after its mark (jobs.claim_cursor) ---------------------------

def after_params(mark: tuple, limit: int | None = None) -> dict:
    return {**claim_params(limit), "after_priority": mark[0], "after_created": mark[1], "after_id": mark[2]}


def real_claims(db: psycopg.Connection, count: int) -> tuple:
    """(ms per claim, the last claimed job's claim-order key) of ``count`` exact claims, prepared and autocommit,
    each job finished after."""
    from jobs import sql

    columns = [c.strip() for c in sql.JOB_COLUMNS.split(",")]
    key, attempts = [columns.index(name) for name in ("priority", "created_at", "id")], columns.index("attempts")
    spent, mark = 0.0, None
    for _ in range(count):
        started = time.perf_counter()
        row = db.execute(sql.CLAIM_UNGUARDED, claim_params(), prepare=True).fetchone()
        spent += time.perf_counter() - started
        if row is None:
            raise RuntimeError("nothing to claim")
        mark = tuple(row[i] for i in key)
        db.execute(sql.FINISH_DONE, {"id": row[0], "attempt": row[attempts], "report": "{}"}, prepare=True)
    return spent / count * 1000, mark


def worker_claims(count: int, claims) -> dict:
    """``count`` claims as a worker makes them (``jobs.queue.claim`` with its ``ClaimCursor``, ``claims``, kept
    from point to point as a worker keeps it), each job finished after: ms per claim, claims per second
    (finishes included) and how many were exact."""
    from django.db import connection

    from jobs import queue

    with connection.cursor() as cursor:
        cursor.execute("SET plan_cache_mode = force_generic_plan")  # the worker's (jobs.dbsession)
        cursor.execute("SET synchronous_commit = off")
    exact_before = claims.exact_claims
    spent = 0.0
    began = time.perf_counter()
    for _ in range(count):
        started = time.perf_counter()
        job = queue.claim(worker_id="bench:2", cursor=claims)
        spent += time.perf_counter() - started
        if job is None:
            raise RuntimeError("nothing to claim")
        queue.finish_done(job, {})
    return {"ms": spent / count * 1000, "rate": count / (time.perf_counter() - began),
            "exact": claims.exact_claims - exact_before, "claims": count}


# -- for make bench: the goal's figure in seconds, in bench.queue's database ---------------------------

def worker_turns(jobs: int, claims, limit: int = 8) -> int:
    """Claim and finish ``jobs`` queued jobs as ``runjobs --concurrency 8`` does: each turn one statement records
    the last turn's runs and claims up to ``limit`` (``jobs.queue.finish_and_claim`` with its cursor). The jobs
    done."""
    from jobs import queue

    done, running = 0, []
    while done < jobs:
        _, running = queue.finish_and_claim([(job, None) for job in running], min(limit, jobs - done),
                                            worker_id="bench:3", cursor=claims)
        if not running:
            raise RuntimeError("nothing to claim")
        done += len(running)
    queue.finish_and_claim([(job, None) for job in running], 0)
    return done


def claim_under_held_snapshot(server: dict, database: str, churn: int, measured: int = 10_000) -> dict:
    """The worker's claim of 8 in buffers, plain and with a snapshot held while it churns ``churn`` jobs.

    A worker's cursor claims ``churn`` jobs, then ``measured`` more (a few seconds' worth: a bounded
    worker claims exactly once a second), counting its exact claims; with the jobs schema's claims of 8
    in EXPLAIN at that point (exact, and bounded after the worker's mark), its buffers per claim are each
    kind's weighted by how many of it the worker made.
    """
    from jobs import sql
    from jobs.claim_cursor import ClaimCursor

    figures = {}
    for held in (False, True):
        with connect(server, database) as db:
            db.execute("TRUNCATE jobs CASCADE")
            settle(db, "jobs")
            db.execute("SET plan_cache_mode = force_generic_plan")  # the worker's (jobs.dbsession)
            holder = connect(server, database) if held else None
            try:
                if holder is not None:
                    holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
                    holder.execute(HOLD)
                claims = ClaimCursor()
                enqueue(db, churn)
                worker_turns(churn, claims)
                enqueue(db, measured + 1000)
                exact_before = claims.exact_claims
                turns_began = time.perf_counter()
                worker_turns(measured, claims)
                seconds = time.perf_counter() - turns_began
                exact_share = min(1.0, (claims.exact_claims - exact_before) / (measured / 8))
                exact = explained(db, sql.CLAIM_MANY_UNGUARDED, claim_params(8), 3)["buffers"]
                bounded = explained(db, sql.CLAIM_MANY_UNGUARDED_AFTER, after_params(claims.after, 8), 3)["buffers"]
            finally:
                if holder is not None:
                    holder.close()
        figures[held] = {"exact": exact, "bounded": bounded, "exact_share": exact_share, "seconds": seconds,
                         "per_claim": exact * exact_share + bounded * (1 - exact_share), "rate": measured / seconds}
    return figures


# -- churn: jobs queued, then drained by runjobs --burst --------------------------------------------

def enqueue(db: psycopg.Connection, count: int) -> None:
    """``count`` noop jobs, BULK per enqueue_many() (each its own transaction), then ANALYZE."""
    from jobs.queue import enqueue_many

    items = [({}, None)] * BULK
    while count > 0:
        enqueue_many("noop", org_id="bench", items=items[:count])
        count -= BULK
    db.execute("ANALYZE jobs")


def drain(url: str, tree) -> float:
    """Everything queued, drained by one runjobs --burst; its wall seconds (Django's start-up included)."""
    return TreeProcess(tree, url, "runjobs", "--burst").wait(DRAIN_TIMEOUT)


def counts(db: psycopg.Connection) -> tuple[int, int]:
    return db.execute("SELECT count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE status = 'queued') "
                      "FROM jobs").fetchone()


def oldest_xid_elsewhere(db: psycopg.Connection) -> int:
    """Age (in transactions) of the oldest xid open on the server, in any database.

    A write transaction left open anywhere on the server stops kill_prior_tuple (and on-access
    pruning) in every database, not only its own: an index entry is judged dead against the
    oldest xid running in the whole cluster before the database's own horizon is looked at. On a
    shared server that inflates the plain figures; VACUUM, whose horizon is per database, still cleans.
    """
    return db.execute("SELECT coalesce(max(age(backend_xid)), 0) FROM pg_stat_activity "
                      "WHERE pid <> pg_backend_pid()").fetchone()[0]


def index_pages(db: psycopg.Connection) -> int:
    return db.execute("SELECT pg_relation_size(%s) / current_setting('block_size')::int", (QUEUED_INDEX,)).fetchone()[0]


# -- one mode: plain, or with the snapshot held ------------------------------------------------------

def measure(db: psycopg.Connection, args, claims) -> dict:
    """Every figure of one point; uses 2 x --real-claims of the queued jobs."""
    from jobs import sql

    f = {"index_pages": index_pages(db), "xid_age": oldest_xid_elsewhere(db)}
    f["claim"] = explained(db, sql.CLAIM_UNGUARDED, claim_params(), args.samples)
    f["many"] = explained(db, sql.CLAIM_MANY_UNGUARDED, claim_params(8), args.samples)
    f["real_ms"], mark = real_claims(db, args.real_claims)
    f["bounded"] = explained(db, sql.CLAIM_UNGUARDED_AFTER, after_params(mark), args.samples)
    f["bounded many"] = explained(db, sql.CLAIM_MANY_UNGUARDED_AFTER, after_params(mark, 8), args.samples)
    enqueue(db, args.worker_claims)
    f["worker"] = worker_claims(args.worker_claims, claims)
    return f


def run_mode(server: dict, url: str, held: bool, args) -> dict:
    """The churn, with every figure taken at each point; ``held``: a snapshot held open throughout."""
    from jobs import sql
    from jobs.claim_cursor import ClaimCursor

    label = "held" if held else "plain"
    claims = ClaimCursor()  # the measured worker's, from its first claim to its last
    with connect(server, BENCH_DB) as db:
        db.execute("TRUNCATE jobs CASCADE")
        settle(db, "jobs")
    holder = connect(server, BENCH_DB) if held else None
    result = {"points": {}, "drains": []}
    try:
        if holder is not None:
            holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            holder.execute(HOLD)
        with connect(server, BENCH_DB) as db:
            db.execute("SET plan_cache_mode = force_generic_plan")  # the worker's (jobs.dbsession)
            db.execute("SET synchronous_commit = off")  # real claims: time the claim, not the flush
            for point in args.points:
                done, queued = counts(db)
                if point > done:
                    enqueue(db, point - done - queued)
                    seconds = drain(url, args.tree)
                    result["drains"].append((point - done, seconds))
                enqueue(db, args.waiting)
                figures = measure(db, args, claims)
                result["points"][point] = figures
                print(f"  {label}: {point:,} churned: claim {figures['claim']['buffers']:,.0f} buffers "
                      f"{figures['claim']['ms']:.2f} ms ({figures['claim']['index']}), bounded "
                      f"{figures['bounded']['buffers']:,.0f} buffers; last drain {result['drains'][-1][0] if result['drains'] else 0:,}"
                      f" jobs in {result['drains'][-1][1] if result['drains'] else 0:.0f} s", flush=True)
            if holder is not None:
                holder.execute("COMMIT")
                holder.close()
                holder = None
                # After the release, a second apart: the first claim walks the entries once more and marks
                # them dead (kill_prior_tuple) unless an xid open anywhere on the server is older than they are.
                result["released"] = []
                for _ in range(3):
                    result["released"].append((*explain(db, sql.CLAIM_UNGUARDED, claim_params())[:2],
                                                oldest_xid_elsewhere(db)))
                    time.sleep(1)
                db.execute("VACUUM jobs")
                result["vacuumed"] = explain(db, sql.CLAIM_UNGUARDED, claim_params())
            return result
    finally:
        if holder is not None:
            holder.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--churn", type=int, default=100_000, help="jobs churned in each mode (default 100,000)")
    parser.add_argument("--points", default="0,25%,50%,100%",
                        help="jobs churned when the claim is measured: numbers or percentages of --churn")
    parser.add_argument("--waiting", type=int, default=1000, help="jobs queued while the claim is measured")
    parser.add_argument("--samples", type=int, default=5, help="EXPLAIN ANALYZE runs per figure (median)")
    parser.add_argument("--real-claims", type=int, default=200, help="real exact claims timed per point")
    parser.add_argument("--worker-claims", type=int, default=1000,
                        help="claims made as a worker makes them, per point (default 1,000)")
    parser.add_argument("--durable", action="store_true",
                        help="keep synchronous_commit on for the churn (slower; the buffers are the same)")
    tree_argument(parser)
    args = parser.parse_args(argv)
    args.points = sorted({round(args.churn * float(p[:-1]) / 100) if p.endswith("%") else int(p)
                          for p in args.points.split(",")})
    if args.waiting < 2 * args.real_claims:
        parser.error("--waiting must be at least twice --real-claims")
    with app_bench_database(BENCH_DB, "seoinsight-bench-snapshot-") as (server, url, _media):
        with connect(server, BENCH_DB) as db:
            print(headline("held snapshot", server_version(db)), flush=True)
            print(tree_label(args.tree), flush=True)
            print("claim statements measured: " + tree_label(ROOT).removeprefix("workers from "), flush=True)
            if not args.durable:
                db.execute(pgsql.SQL("ALTER DATABASE {} SET synchronous_commit = off").format(pgsql.Identifier(BENCH_DB)))
        results = {held: run_mode(server, url, held, args) for held in (False, True)}
    report(results, args)
    return 0


# -- the report --------------------------------------------------------------------------------------

def report(results: dict, args) -> None:
    plain, held = results[False], results[True]
    print(f"\n{args.churn:,} noop jobs churned (enqueue_many, runjobs --burst), {args.waiting:,} queued at each "
          f"point; buffers = shared hit + read of EXPLAIN (ANALYZE, BUFFERS), median of {args.samples}; "
          "plain / held")
    print(f"{'churned':>9}  {'claim buffers':>17} {'ratio':>7}  {'claim ms':>13}  {'real claim ms':>13}  "
          f"{'claim_many(8) buffers':>21} {'ratio':>7}  {'index pages':>13}")
    worst = 0.0
    for point in args.points:
        p, h = plain["points"][point], held["points"][point]
        ratio = h["claim"]["buffers"] / max(p["claim"]["buffers"], 1)
        ratio_many = h["many"]["buffers"] / max(p["many"]["buffers"], 1)
        worst = max(worst, ratio, ratio_many)
        print(f"{point:>9,}  {pair(p['claim']['buffers'], h['claim']['buffers']):>17} {ratio:>6.1f}x  "
              f"{pair(p['claim']['ms'], h['claim']['ms'], '.2f'):>13}  {pair(p['real_ms'], h['real_ms'], '.2f'):>13}  "
              f"{pair(p['many']['buffers'], h['many']['buffers']):>21} {ratio_many:>6.1f}x  "
              f"{pair(p['index_pages'], h['index_pages']):>13}")
    indexes = sorted({f[k]["index"] for r in (plain, held) for f in r["points"].values() for k in ("claim", "many")})
    print(f"the claims' plans read {', '.join(indexes)}")
    for label, r in (("plain", plain), ("held", held)):
        print(f"oldest xid open on the server (any database) at each point, {label}: "
              + ", ".join(f"{f['xid_age']:,}" for f in r["points"].values()) + " transactions old")
    for label, r in (("plain", plain), ("held", held)):
        print(f"runjobs --burst drains, {label}: "
              + ", ".join(f"{jobs:,} jobs {jobs / seconds:,.0f} job/s" for jobs, seconds in r["drains"]))
    if held.get("released"):
        print("claim after the snapshot is released, 1 s apart: "
              + ", ".join(f"{b:,.0f} buffers {ms:.2f} ms (oldest xid {age:,})" for b, ms, age in held["released"])
              + f"; after a VACUUM: {held['vacuumed'][0]:,.0f} buffers {held['vacuumed'][1]:.2f} ms")
    print(f"the exact claim and claim_many alone, held, against plain: worst {worst:.1f}x (what a bounded claim avoids)")

    from jobs.claim_cursor import EXACT_EVERY

    print(f"\nthe worker's claim (jobs.claim_cursor): exact while fast; after two slow exact claims in a row it claims "
          f"after its last job (bounded), exactly again every {EXACT_EVERY:g} s; {args.worker_claims:,} claims per point; "
          "'per claim' = exact and bounded buffers (EXPLAIN) weighted by how many of each the worker made; "
          "ratios against the plain exact claim")
    print(f"{'churned':>9}  {'bounded':>13}  {'bounded many(8)':>15}  {'worker ms':>13}  {'claims/s':>15}  "
          f"{'exact claims':>13}  {'per claim':>13} {'ratio':>7}")
    worst_worker = 0.0
    for point in args.points:
        p, h = plain["points"][point], held["points"][point]
        per_claim = [weighted(r) for r in (p, h)]
        ratio = per_claim[1] / max(p["claim"]["buffers"], 1)
        worst_worker = max(worst_worker, ratio)
        print(f"{point:>9,}  {pair(p['bounded']['buffers'], h['bounded']['buffers']):>13}  "
              f"{pair(p['bounded many']['buffers'], h['bounded many']['buffers']):>15}  "
              f"{pair(p['worker']['ms'], h['worker']['ms'], '.2f'):>13}  "
              f"{pair(p['worker']['rate'], h['worker']['rate']):>15}  "
              f"{pair(p['worker']['exact'], h['worker']['exact']):>13}  {pair(*per_claim):>13} {ratio:>6.1f}x")
    print(f"the worker's claim with a held snapshot <= {GOAL:g}x the plain claim, at every point: "
          f"worst {worst_worker:.1f}x  {verdict(worst_worker <= GOAL, 'SHORT')}")


def weighted(figures: dict) -> float:
    """Buffers per claim of the worker's claims at one point: each kind's EXPLAIN buffers, by its share."""
    exact = figures["worker"]["exact"] / figures["worker"]["claims"]
    return figures["claim"]["buffers"] * exact + figures["bounded"]["buffers"] * (1 - exact)


def pair(a: float, b: float, spec: str = ",.0f") -> str:
    return f"{a:{spec}} / {b:{spec}}"


if __name__ == "__main__":
    raise SystemExit(main())
