"""Where an import's time goes: import_csv run in the benchmark's own process, timed stage by stage."""

from __future__ import annotations

import time

import psycopg

from bench.common import settle


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
    db.execute("DELETE FROM jobs WHERE type IN ('map_reconcile', 'refresh_site_page') AND status = 'queued'")
    stages = dict(watch.seconds)
    statements = sum(v for k, v in stages.items() if k.startswith("upsert: "))
    stages["upsert: COPY into the staging table"] = stages.pop("upsert") - statements
    stages["everything else"] = total - sum(v for k, v in stages.items())
    return {"total": total, "rows": report["read"], "stages": stages}
