"""Import benchmark: a Search Console-like CSV through import_csv, against a COPY ceiling.

    .venv/bin/python -m bench.imports [--rows 1000000] [--small-rows 100000]

Not a test: it prints figures and exits 0 unless something crashed. Everything
runs in a throw-away database (``seoinsight_bench_imports``) on the same server
as the app — the embedded one, or the one ``DATABASE_URL`` names — and a
temporary directory for the generated files; both are removed at the end.
docs/benchmarks.md says what each figure means and keeps a recorded run.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path

import psycopg
from psycopg import sql

from bench.common import (
    RSS_POLL,
    AppProcess,
    MemoryWatch,
    app_bench_database,
    connect,
    headline,
    ratio_goal,
    server_version,
    settle,
    table,
    verdict,
)
from bench.import_data import COPY_COLUMNS, DAYS, HOST, PREFIX, generate
from bench.import_stages import breakdown

BENCH_DB = "seoinsight_bench_imports"
RATIO_GOAL = 0.5  # import >= 0.5 x the COPY ceiling (issue goal)
RSS_GOAL_MB = 150  # peak RSS under 150 MB at any file size (issue goal)
TIMEOUT = 600


# -- the ceiling -----------------------------------------------------------------------------

def create_ceiling_table(db: psycopg.Connection) -> None:
    """imports_urlmetric under another name: its columns, types, defaults, CHECK, UNIQUE, indexes and FKs."""
    db.execute("CREATE TABLE bench_copy (LIKE imports_urlmetric INCLUDING ALL)")
    foreign_keys = db.execute("SELECT pg_get_constraintdef(oid) FROM pg_constraint "
                              "WHERE conrelid = 'imports_urlmetric'::regclass AND contype = 'f'").fetchall()
    for (definition,) in foreign_keys:
        db.execute(f"ALTER TABLE bench_copy ADD {definition}")  # text from the catalog, not from input


def checkpoints(db: psycopg.Connection) -> int:
    """Checkpoints the server has run (all databases: a test suite on the same server counts too)."""
    return db.execute("SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter").fetchone()[0]


def copy_ceiling(server: dict, db: psycopg.Connection, path: Path) -> dict:
    """One COPY of the parsed rows into bench_copy, in one transaction, streamed from this process."""
    columns = sql.SQL(", ").join(map(sql.Identifier, COPY_COLUMNS))
    statement = sql.SQL("COPY bench_copy ({}) FROM STDIN (FORMAT csv)").format(columns)
    settle(db, "bench_copy")
    before = checkpoints(db)
    with connect(server, BENCH_DB, autocommit=False) as conn:
        started = time.perf_counter()
        with conn.cursor() as cursor, cursor.copy(statement) as copy, path.open("rb") as data:
            while chunk := data.read(1 << 20):
                copy.write(chunk)
        conn.commit()
        seconds = time.perf_counter() - started
    return {"seconds": seconds, "checkpoints": checkpoints(db) - before}


def same_rows(db: psycopg.Connection, target_id: int) -> int:
    """Rows on which the import and the ceiling agree, every column the import wrote."""
    return db.execute("""
        SELECT count(*) FROM imports_urlmetric m JOIN bench_copy c
          USING (site_target_id, url_normalized, period_start, period_end)
        WHERE m.site_target_id = %s AND m.url = c.url AND m.clicks = c.clicks
          AND m.impressions = c.impressions AND m.ctr = c.ctr AND m.position = c.position
    """, (target_id,)).fetchone()[0]


# -- the worker ------------------------------------------------------------------------------

def run_worker(url: str, media: Path) -> dict:
    """``manage.py runjobs --burst --max-jobs 1``: one job (the import, not the map_reconcile it queues)."""
    worker = AppProcess(url, "runjobs", "--burst", "--max-jobs", "1", media=media)
    watch = MemoryWatch(worker.pid)
    watch.start()
    wall = worker.wait(TIMEOUT)
    watch.join()
    return {"wall": wall, "peak_kb": watch.peak_kb}


def new_import(target, path: Path, media: Path):
    """An Import of the file at ``path`` (already under MEDIA_ROOT) with its queued job, as an upload makes it."""
    from django.db import transaction

    from imports.handlers import enqueue_import
    from imports.models import Import, ImportKind

    imp = Import(org_id=target.site.org_id, site_target=target, kind=ImportKind.CSV, uid=uuid.uuid4().hex,
                 original_filename=path.name, size=path.stat().st_size)
    imp.file.name = str(path.relative_to(media))  # generated in place: no 100 MB copy
    with transaction.atomic():
        imp.save()
        enqueue_import(imp)
    return imp


def run_import(db: psycopg.Connection, url: str, media: Path, imp) -> dict:
    """Empty imports_urlmetric, run the import's job in a worker; rate from the job's own timestamps."""
    db.execute("TRUNCATE imports_urlmetric")
    settle(db, "imports_urlmetric")
    before = checkpoints(db)
    worker = run_worker(url, media)
    worker["checkpoints"] = checkpoints(db) - before
    status, error, report, window = db.execute(
        "SELECT status, error, report, extract(epoch FROM finished_at - started_at)::float8 FROM jobs WHERE id = %s",
        (imp.job_id,)).fetchone()
    if status != "done":
        raise RuntimeError(f"the import job ended {status}: {error}")
    # The map_reconcile and the site page's refresh it queued are no part of the benchmark, and would be the next
    # run's first jobs.
    db.execute("DELETE FROM jobs WHERE type IN ('map_reconcile', 'refresh_site_page') AND status = 'queued'")
    return {**worker, "seconds": window, "report": report}


# -- report --------------------------------------------------------------------------------

def mb(kb: int) -> str:
    return f"{kb / 1024:,.0f} MB"


def report(r: dict, args, version: str) -> str:
    row, head = table(44, 18, 100)
    big, ceiling = r["big"], r["ceiling"]
    rows = args.rows
    import_rate, copy_rate = rows / big["seconds"], rows / ceiling["seconds"]
    ratio = import_rate / copy_rate
    lines = [
        headline("import", version),
        f"file: {rows:,} rows ({r['files'][rows]['urls']:,} URLs x {DAYS} days), "
        f"{r['files'][rows]['bytes'] / 1e6:,.1f} MB; batch {r['batch_size']:,} rows",
        "",
        *head,
        row("ceiling: COPY of the parsed rows", f"{copy_rate:,.0f} rows/s", "1.00x"),
        row("import_csv in runjobs --burst", f"{import_rate:,.0f} rows/s", f"{ratio:.2f}x",
            ratio_goal(ratio, RATIO_GOAL)),
        row("peak RSS, worker with no job", mb(r["idle"]["peak_kb"])),
    ]
    for size in sorted(r["files"]):
        peak = r["small" if size != rows else "big"]["peak_kb"]
        lines.append(row(f"peak RSS, worker importing {size:,} rows", mb(peak), "",
                         f"< {RSS_GOAL_MB} MB  {verdict(peak / 1024 < RSS_GOAL_MB)}"))
    lines += ["", "times: COPY and import from first row to commit (import: the job's started_at to finished_at);"
                  " wall = worker process start to exit"]
    lines.append(f"  ceiling  {ceiling['seconds']:7.2f} s                  {rows:,} rows, "
                 f"checkpoints during: {ceiling['checkpoints']}")
    for key in ("small", "big"):
        if key in r:
            run = r[key]
            lines.append(f"  import   {run['seconds']:7.2f} s   wall {run['wall']:6.2f} s   "
                         f"{run['report']['read']:,} rows, {run['report']['inserted']:,} inserted, "
                         f"checkpoints during: {run['checkpoints']}")
    lines.append(f"peak RSS: the worker's VmHWM (/proc/<pid>/status), read every {RSS_POLL * 1000:.0f} ms")
    if "breakdown" in r:
        b = r["breakdown"]
        lines += ["", f"where the time goes: import_csv of the {b['rows']:,}-row file run again in the benchmark's "
                      f"own process ({b['total']:.2f} s, {b['rows'] / b['total']:,.0f} rows/s), wall time per stage:"]
        for stage, seconds in sorted(b["stages"].items(), key=lambda item: -item[1]):
            lines.append(f"  {stage:<44}{seconds:7.2f} s {seconds / b['rows'] * 1e6:7.1f} us/row "
                         f"{seconds / b['total']:6.0%}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the main file (default: 1000000)")
    parser.add_argument("--small-rows", type=int, default=100_000,
                        help="rows of a second file, imported for its peak RSS and timed stage by stage "
                             "(default: 100000; 0: none)")
    args = parser.parse_args()
    if args.rows < 1000 or not (args.small_rows == 0 or 1000 <= args.small_rows < args.rows):
        parser.error("--rows must be at least 1000, and --small-rows 0 or from 1000 to less than --rows")

    with app_bench_database(BENCH_DB, "import-bench-") as (server, url, media):
        from imports import conf
        from imports.models import Import, ImportKind
        from seoinsight.models import Org, Site, SiteTarget

        org = Org.objects.create(id="bench", name="Bench")
        target = SiteTarget.objects.create(site=Site.objects.create(org=org, domain=HOST), url_prefix=PREFIX)
        # The ceiling's rows need an import to point to (the FK): a plain row, no job.
        for_copy = Import.objects.create(org=org, site_target=target, kind=ImportKind.CSV, uid=uuid.uuid4().hex)
        results = {"files": {}, "batch_size": conf.get("IMPORT_BATCH_SIZE")}
        files = media / "imports"
        files.mkdir()
        for size in (args.small_rows, args.rows):
            if size:
                print(f"generating {size:,} rows ...", flush=True)
                results["files"][size] = generate(files, size, target_id=target.pk, import_id=for_copy.pk,
                                                  ceiling=size == args.rows)
        with connect(server, BENCH_DB) as db:
            version = server_version(db)
            create_ceiling_table(db)
            print("peak RSS of a worker with no job ...", flush=True)
            results["idle"] = run_worker(url, media)
            if args.small_rows:
                print(f"import: {args.small_rows:,} rows ...", flush=True)
                imp = new_import(target, results["files"][args.small_rows]["path"], media)
                results["small"] = run_import(db, url, media, imp)
                print(f"where the time goes: {args.small_rows:,} rows again, in this process ...", flush=True)
                imp = new_import(target, results["files"][args.small_rows]["path"], media)
                results["breakdown"] = breakdown(db, imp)
            print(f"ceiling: COPY of {args.rows:,} parsed rows ...", flush=True)
            results["ceiling"] = copy_ceiling(server, db, results["files"][args.rows]["parsed"])
            print(f"import: {args.rows:,} rows ...", flush=True)
            imp = new_import(target, results["files"][args.rows]["path"], media)
            results["big"] = run_import(db, url, media, imp)
            agree = same_rows(db, target.pk)
            if agree != args.rows or results["big"]["report"]["inserted"] != args.rows:
                raise RuntimeError(f"the import and the ceiling agree on {agree:,} rows of {args.rows:,} "
                                   f"(report: {results['big']['report']})")
    print()
    print(report(results, args, version))
    return 0


if __name__ == "__main__":
    sys.exit(main())
