"""Import benchmark: a Search Console-like CSV through import_csv, against a COPY ceiling.

    .venv/bin/python bench/import_bench.py [--rows 1000000] [--small-rows 100000]

Not a test: it prints figures and exits 0 unless something crashed. Everything
runs in a throw-away database (``seoinsight_bench_imports``) on the same server
as the app — the embedded one, or the one ``DATABASE_URL`` names — and a
temporary directory for the generated files; both are removed at the end.
docs/benchmarks.md says what each figure means and keeps a recorded run.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import nullcontext
from pathlib import Path

import psycopg
from psycopg import sql

# The queue benchmark's way to find the app's server and name a database on it
# (this script's directory is on sys.path when it runs).
from queue_bench import ROOT, app_bench_database, connect, worker_env

BENCH_DB = "seoinsight_bench_imports"
DAYS = 30
FIRST_DAY = datetime.date(2026, 10, 1)
HOST = "shop.example"
PREFIX = f"https://{HOST}/"
RATIO_GOAL = 0.5  # import >= 0.5 x the COPY ceiling (issue goal)
RSS_GOAL_MB = 150  # peak RSS under 150 MB at any file size (issue goal)
RSS_POLL = 0.02  # seconds between reads of the worker's /proc/<pid>/status
TIMEOUT = 600

HEADER = "Page,Clicks,Impressions,CTR,Position,Date\n"
# What the ceiling COPYs: the rows as import_csv leaves them in imports_urlmetric.
COPY_COLUMNS = ("site_target_id", "url", "url_normalized", "period_start", "period_end",
                "clicks", "impressions", "ctr", "position", "import_id")


# -- the files -------------------------------------------------------------------------------

def page_urls(count: int, rng: random.Random) -> list[str]:
    """``count`` distinct URLs under PREFIX, shaped like a shop's Search Console pages."""
    sections = ["products", "category", "blog", "guides", "fr/produits", "de/produkte"]
    words = ["blue", "linen", "shirt", "oak", "table", "lamp", "garden", "chair", "wool", "coat",
             "summer", "sale", "kids", "leather", "bag", "ceramic", "mug", "desk", "sofa", "rug"]
    urls = []
    for n in range(count):
        slug = "-".join(rng.sample(words, rng.randint(2, 4)))
        url = f"{PREFIX}{rng.choice(sections)}/{slug}-{n}"
        kind = rng.random()
        if kind < 0.05:
            url += f"?page={rng.randint(2, 9)}"  # paginated listings
        elif kind < 0.08:
            url = f"{PREFIX}fr/caf%C3%A9-cr%C3%A8me-{n}"  # percent-encoded, as Search Console writes them
        elif kind < 0.09:
            url = f"{PREFIX}fr/caf%c3%a9-{n}"  # lowercase escapes: normalized to uppercase
        elif kind < 0.25:
            url += "/"
        urls.append(url)
    return urls


def generate(directory: Path, rows: int, *, target_id: int, import_id: int, ceiling: bool, seed: int = 1):
    """Write the export (and, with ``ceiling``, the same rows parsed, for COPY); returns facts about it.

    ``rows / DAYS`` URLs, each once a day for DAYS days, day after day, each day in
    its own order: a URL comes back only after every other URL has been seen.
    """
    from imports.formats.values import parse_ctr
    from imports.urlnorm import normalize_url

    rng = random.Random(seed)
    urls = page_urls(-(-rows // DAYS), rng)
    normalized = [normalize_url(url) for url in urls]
    export = directory / f"export-{rows}.csv"
    parsed = directory / f"parsed-{rows}.csv" if ceiling else None
    written = 0
    with export.open("w", encoding="utf-8", newline="") as out, \
            (parsed.open("w", encoding="utf-8", newline="") if parsed else nullcontext()) as parsed_out:
        out.write(HEADER)
        order = list(range(len(urls)))
        for day in range(DAYS):
            when = (FIRST_DAY + datetime.timedelta(days=day)).isoformat()
            rng.shuffle(order)
            for index in order[: rows - written]:
                impressions = int(rng.lognormvariate(3, 1.5)) + 1
                clicks = min(impressions, int(impressions * rng.random() * 0.1))
                ctr = f"{clicks / impressions * 100:.2f}%"
                position = f"{rng.uniform(1, 60):.1f}"
                out.write(f"{urls[index]},{clicks},{impressions},{ctr},{position},{when}\n")
                if parsed_out:
                    parsed_out.write(f"{target_id},{urls[index]},{normalized[index]},{when},{when},"
                               f"{clicks},{impressions},{parse_ctr(ctr)!r},{position},{import_id}\n")
            written += min(len(order), rows - written)
            if written >= rows:
                break
    return {"path": export, "parsed": parsed, "urls": len(urls), "bytes": export.stat().st_size}


# -- the database ------------------------------------------------------------------------------

def settle(db: psycopg.Connection, table: str) -> None:
    """Same starting state for every timed run: statistics fresh, no dirty pages of the last run."""
    db.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(table)))
    try:
        db.execute("CHECKPOINT")
    except psycopg.errors.InsufficientPrivilege:
        pass


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

class MemoryWatch(threading.Thread):
    """The peak RSS of a process: its VmHWM, read from /proc/<pid>/status every RSS_POLL seconds.

    VmHWM is the kernel's high-water mark of the process's resident memory, so
    a spike between two reads is still seen at the next one; only growth in the
    last RSS_POLL seconds before exit (interpreter teardown, which frees) could
    be missed. Polling VmRSS (or psutil's rss) would miss spikes between reads.
    Not ru_maxrss from wait4(): Popen forks this process, and the kernel carries
    the high-water mark of the address space replaced at exec into the child's
    ru_maxrss, so it reports at least this benchmark's own RSS (about 88 MB,
    where the idle worker's own peak is about 78 MB).
    """

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.path = Path(f"/proc/{pid}/status")
        self.peak_kb = 0

    def run(self) -> None:
        while True:
            try:
                status = self.path.read_text()
            except (FileNotFoundError, ProcessLookupError):
                return
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            if "VmHWM" not in fields:
                return  # exited: a zombie has no memory left to report
            self.peak_kb = max(self.peak_kb, int(fields["VmHWM"].split()[0]))
            time.sleep(RSS_POLL)


def run_worker(url: str, media: Path) -> dict:
    """``manage.py runjobs --burst --max-jobs 1``: one job (the import, not the map_reconcile it queues)."""
    with tempfile.NamedTemporaryFile(prefix="bench-runjobs-", suffix=".log", delete=False) as log:
        log_path = Path(log.name)
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "manage.py", "runjobs", "--burst", "--max-jobs", "1"],
                                cwd=ROOT, env=worker_env(url, media), stdout=log, stderr=subprocess.STDOUT)
    watch = MemoryWatch(proc.pid)
    watch.start()
    try:
        code = proc.wait(timeout=TIMEOUT)
        wall = time.perf_counter() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    watch.join()
    output = log_path.read_text(errors="replace")
    log_path.unlink()
    if code != 0:
        raise RuntimeError(f"runjobs exited with {code}:\n{output[-4000:]}")
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
    # The map_reconcile it queued is no part of the benchmark, and would be the next run's first job.
    db.execute("DELETE FROM jobs WHERE type = 'map_reconcile' AND status = 'queued'")
    return {**worker, "seconds": window, "report": report}


# -- where the time goes (in this process) ---------------------------------------------------

class Stopwatch:
    """Seconds spent per stage of import_csv, taken by wrapping what the handler calls through ``ingest``."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    def add(self, stage: str, seconds: float) -> None:
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds

    def __call__(self, execute, sql_text, params, many, context):  # a Django execute_wrapper
        started = time.perf_counter()
        try:
            return execute(sql_text, params, many, context)
        finally:
            self.add(statement_stage(sql_text), time.perf_counter() - started)


def statement_stage(sql_text: str) -> str:
    words = sql_text.split()
    if "imports_urlmetric" in sql_text and words[0] == "WITH":
        return "upsert: INSERT … SELECT … ON CONFLICT"
    if "imports_stage" in sql_text:
        return "upsert: CREATE/DROP staging table"
    if "jobs" in sql_text and words[0] == "UPDATE":
        return "checkpoint: progress UPDATE"
    return "other SQL"


def breakdown(db: psycopg.Connection, imp) -> dict:
    """Run an import's job in this process, timing each stage (wall time, from this side)."""
    from django.db import connections

    connection = connections["default"]  # the wrapper itself, not the proxy: its commit is replaced

    from imports import handlers, ingest
    from jobs.queue import claim, finish_done

    watch = Stopwatch()
    originals = {name: getattr(ingest, name) for name in ("batched", "prepare", "upsert")}

    def batched(iterable, size):
        batches = originals["batched"](iterable, size)
        while True:
            started = time.perf_counter()
            batch = next(batches, None)
            watch.add("read and parse the file", time.perf_counter() - started)
            if batch is None:
                return
            yield batch

    def timed(function, stage):
        def call(*args, **kwargs):
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                watch.add(stage, time.perf_counter() - started)
        return call

    db.execute("TRUNCATE imports_urlmetric")
    settle(db, "imports_urlmetric")
    job = claim()
    if job is None or job.type != "import_csv":
        raise RuntimeError(f"expected the import's job, claimed {job and job.type}")
    try:
        ingest.batched = batched
        ingest.prepare = timed(originals["prepare"], "normalize, scope, dedup (prepare)")
        ingest.upsert = timed(originals["upsert"], "upsert")
        connection.commit = timed(connection.commit, "COMMIT (runs the deferred FK checks)")  # atomic() calls it
        started = time.perf_counter()
        with connection.execute_wrapper(watch):
            report = handlers.import_csv(job)
        total = time.perf_counter() - started
    finally:
        for name, function in originals.items():
            setattr(ingest, name, function)
        del connection.commit  # the method again
    finish_done(job, report)
    db.execute("DELETE FROM jobs WHERE type = 'map_reconcile' AND status = 'queued'")
    stages = dict(watch.seconds)
    statements = sum(v for k, v in stages.items() if k.startswith("upsert: "))
    stages["upsert: COPY into the staging table"] = stages.pop("upsert") - statements
    stages["everything else"] = total - sum(v for k, v in stages.items())
    return {"total": total, "rows": report["read"], "stages": stages}


# -- report --------------------------------------------------------------------------------

def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def mb(kb: int) -> str:
    return f"{kb / 1024:,.0f} MB"


def report(r: dict, args, version: str) -> str:
    def row(label, value, ratio="", goal=""):
        return f"{label:<44}{value:>18}{ratio:>12}  {goal}".rstrip()

    big, ceiling = r["big"], r["ceiling"]
    rows = args.rows
    import_rate, copy_rate = rows / big["seconds"], rows / ceiling["seconds"]
    ratio = import_rate / copy_rate
    lines = [
        f"seoinsight import benchmark  {datetime.datetime.now():%Y-%m-%d %H:%M}  "
        f"{os.cpu_count()} CPU(s), {platform.python_implementation()} {platform.python_version()}, {version}",
        f"file: {rows:,} rows ({r['files'][rows]['urls']:,} URLs x {DAYS} days), "
        f"{r['files'][rows]['bytes'] / 1e6:,.1f} MB; batch {r['batch_size']:,} rows",
        "",
        row("figure", "value", "vs ceiling", "goal"),
        "-" * 100,
        row("ceiling: COPY of the parsed rows", f"{copy_rate:,.0f} rows/s", "1.00x"),
        row("import_csv in runjobs --burst", f"{import_rate:,.0f} rows/s", f"{ratio:.2f}x",
            f">= {RATIO_GOAL}x  {verdict(ratio >= RATIO_GOAL)}"),
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
            version = "PostgreSQL " + db.execute("SHOW server_version").fetchone()[0]
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
