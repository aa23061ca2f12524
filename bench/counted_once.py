"""What the "counted once" triggers (migrations 0011, 0012) add to an import: 200,000 daily rows written by ingest.

    .venv/bin/python -m bench.counted_once [--pages 2000] [--days 100] [--batch 5000] [--repeats 3]

Not a test: it prints figures and exits 0 unless something crashed. In a throw-away database
(``seoinsight_bench_counted_once``): per case, a fresh site target gets ``--pages`` x ``--days`` daily
rows through ``ingest.upsert`` in batches of ``--batch`` (one statement per batch, its own transaction,
as an import writes them), then the same rows again from a second import (every row replaced: the UPDATE
path). Cases: a target with daily rows only, and one already holding a 28- and a 90-day export of the
same pages (every batch then recomputes the export keys it shadows); each with the new triggers enabled and
disabled (``ALTER TABLE … DISABLE TRIGGER``: what an import cost before them), in alternation,
``--repeats`` times; the median is printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import date, timedelta

from bench.common import app_bench_database, headline

BENCH_DB = "seoinsight_bench_counted_once"
NEW_TRIGGERS = tuple(os.environ.get("BENCH_TRIGGERS", "").split()) or (
    "imports_sitepage_insert_shadowed", "imports_sitepage_update_shadowed", "imports_sitepage_delete_shadowed",
    "imports_replacement_update")
FIRST = date(2026, 1, 1)


def records(pages: int, days: int, clicks: int) -> dict[tuple, tuple]:
    out = {}
    for n in range(pages):
        url = f"https://bench.example/p{n}"
        for d in range(days):
            day = FIRST + timedelta(days=d)
            out[(url, day, day)] = (url, url, day, day, clicks + n % 50, 100 + n, None, 3.5, float(100 + n), 1)
    return out


def long_rows(pages: int, start: date, end: date) -> dict[tuple, tuple]:
    return {(f"https://bench.example/p{n}", start, end): (f"https://bench.example/p{n}", f"https://bench.example/p{n}",
                                                          start, end, 900 + n, 9000 + n, None, 6.5, 9000.0, 1)
            for n in range(pages)}


def write(target_id: int, import_id: int, rows: dict, batch: int) -> float:
    from django.db import transaction

    from imports import ingest

    items = list(rows.items())
    began = time.perf_counter()
    for at in range(0, len(items), batch):
        with transaction.atomic():
            ingest.upsert(target_id, import_id, dict(items[at:at + batch]))
    return time.perf_counter() - began


def triggers(enabled: bool) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        for name in NEW_TRIGGERS:
            cursor.execute(f"ALTER TABLE imports_urlmetric {'ENABLE' if enabled else 'DISABLE'} TRIGGER {name}")


def one_case(org, *, with_exports: bool, enabled: bool, args) -> tuple[float, float]:
    from imports.models import Import
    from seoinsight.models import Site, SiteTarget

    site = Site.objects.create(org=org, domain=f"bench{Site.objects.count()}.example")
    target = SiteTarget.objects.create(site=site, url_prefix=f"https://{site.domain}/")
    first, second, export = (Import.objects.create(org=org, site_target=target, kind="csv", uid=f"{target.pk}-{n}")
                             for n in range(3))
    triggers(True)  # the exports, as they were written: counted
    if with_exports:
        last = FIRST + timedelta(days=args.days - 1)
        write(target.pk, export.pk, long_rows(args.pages, last - timedelta(days=27), last), args.batch)
        write(target.pk, export.pk, long_rows(args.pages, last - timedelta(days=89), last), args.batch)
    triggers(enabled)
    try:
        inserted = write(target.pk, first.pk, records(args.pages, args.days, 1), args.batch)
        replaced = write(target.pk, second.pk, records(args.pages, args.days, 2), args.batch)
    finally:
        triggers(True)
    return inserted, replaced


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--days", type=int, default=100)
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with app_bench_database(BENCH_DB, "counted-once-bench-") as (_server, _url, _media):
        from seoinsight.models import Org

        from django.db import connection

        org = Org.objects.create(id="bench", name="bench")
        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            version = "PostgreSQL " + cursor.fetchone()[0]
        results: dict[tuple, list] = {}
        for _ in range(args.repeats):
            for with_exports in (False, True):
                for enabled in (False, True):
                    results.setdefault((with_exports, enabled), []).append(
                        one_case(org, with_exports=with_exports, enabled=enabled, args=args))
        print(headline("counted-once triggers: the cost to an import", version))
        rows = args.pages * args.days
        print(f"{rows:,} daily rows per import ({args.pages:,} pages x {args.days} days), batches of {args.batch:,}; "
              f"median of {args.repeats}")
        print(f"{'target holds':<34}{'triggers':<10}{'insert s':>10}{'replace s':>11}")
        for (with_exports, enabled), runs in results.items():
            held = "daily rows only" if not with_exports else "a 28- and a 90-day export too"
            print(f"{held:<34}{'on' if enabled else 'off':<10}{statistics.median(r[0] for r in runs):>10.2f}"
                  f"{statistics.median(r[1] for r in runs):>11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
