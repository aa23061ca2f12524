"""What hostile input costs one web request: issue 35's files and addresses, each beside an ordinary one of its kind.

    .venv/bin/python -m bench.hostile [--runs 5] [--only upload|site]

Not a test: it prints figures and exits 0 unless something crashed. In a throw-away database
(``seoinsight_bench_hostile``), through Django's test client in this process with DEBUG off, as a member
of the org: each request ``--runs`` times (after one warm-up), then once more under tracemalloc for its
peak of Python memory. The hostile cases are the review's: an XLSX whose shared strings unpack to 60 MB,
a ZIP of 200,000 files, a CSV header of 110,000 columns, a custom period of 5,000 years, a page number past
a bigint. Each is set against an ordinary request of its kind measured in the same run (a Search Console
export of 1,000 pages, the last 28 days): a bounded request costs about what an ordinary one does.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import NamedTuple

from bench.common import app_bench_database, connect, headline, server_version

BENCH_DB = "seoinsight_bench_hostile"
PAGES = 1000  # rows of the ordinary exports (Search Console's UI exports at most 1,000)
PERIOD = {"period_start": "2026-09-01", "period_end": "2026-11-30"}


def files(directory: Path) -> list[tuple[str, str, Path, Path]]:
    """(label, field name, ordinary file, hostile file) for each upload case."""
    from tests.imports import files as make

    pages = [["Top pages", "Clicks", "Impressions", "CTR", "Position"]] + [
        [f"https://shop.example/p/{n}", n % 50, 1000 + n, "1.2%", 7.5] for n in range(PAGES)]
    ordinary_xlsx = make.write_xlsx(directory, "Pages.xlsx", {"Pages": pages})
    ordinary_zip = make.write_tables_zip(directory, "export.zip", {"Pages": pages})
    ordinary_csv = make.write_bytes(directory, "Pages.csv", make.csv_text(pages).encode())
    # <si><t>a</t></si> is 17 bytes: 3,600,000 of them are 61 MB unpacked, about 0.15 MB packed.
    bomb = make.write_shared_strings_bomb(directory, "bomb.xlsx", pages[:2], filler=3_600_000)
    many = make.write_many_members_zip(directory, "many.zip", 200_000)
    wide = make.write_bytes(directory, "wide.csv", (",".join(["Top pages"] + [f"c{n}" for n in range(110_000)])
                                                    + "\r\nhttps://shop.example/,1\r\n").encode())
    return [("upload: .xlsx, shared strings unpacking to 61 MB", "xlsx", ordinary_xlsx, bomb),
            ("upload: .zip of 200,000 files", "zip", ordinary_zip, many),
            ("upload: .csv, a header of 110,000 columns", "csv", ordinary_csv, wide)]


SITE_CASES = [
    ("site page: custom period 5001-01-01 → 9999-12-31", "period=custom&from=5001-01-01&to=9999-12-31"),
    ("site page: custom period 0001-01-01 → 0001-12-31", "period=custom&from=0001-01-01&to=0001-12-31"),
    ("site page: custom period of 26 years", "period=custom&from=2000-01-01&to=2025-12-31"),
    ("site page: page=99999999999999999999", "page=99999999999999999999"),
]


class Timed(NamedTuple):
    seconds: float  # the median
    peak_bytes: int | None  # Python memory at the request's peak (tracemalloc); None when not measured
    status: int


def timed(request, runs: int, memory: bool) -> Timed:
    """``request()`` ``runs`` times (after one warm-up when more than one), then once under tracemalloc."""
    if runs > 1:
        request()
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        status = request()
        seconds.append(time.perf_counter() - started)
    peak = None
    if memory:
        tracemalloc.start()
        request()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return Timed(statistics.median(seconds), peak, status)


def upload(client, target_id: int, path: Path):
    from django.core.files.uploadedfile import SimpleUploadedFile

    def request() -> int:
        return client.post("/imports/", {"file": SimpleUploadedFile(path.name, path.read_bytes()),
                                         "site_target": target_id, **PERIOD}, secure=True).status_code
    return request


def get(client, path: str):
    def request() -> int:
        return client.get(path, secure=True).status_code
    return request


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed requests per case (default: 5)")
    parser.add_argument("--only", choices=("upload", "site"), help="only the uploads, or only the site page")
    parser.add_argument("--no-memory", action="store_true", help="skip the run under tracemalloc (slow on a code "
                                                                   "that inflates what it reads)")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    with app_bench_database(BENCH_DB, "hostile-bench-") as (server, _url, _media), \
            tempfile.TemporaryDirectory(prefix="hostile-bench-files-") as directory:
        from django.contrib.auth import get_user_model
        from django.test import Client

        from seoinsight.models import Membership, Org, Site, SiteTarget

        org = Org.objects.create(id="bench", name="Bench")
        site = Site.objects.create(org=org, domain="shop.example")
        target = SiteTarget.objects.create(site=site, url_prefix="https://shop.example/")
        user = get_user_model().objects.create_user("bench", password=uuid.uuid4().hex)
        Membership.objects.create(user=user, org=org)
        # A 500 is a figure here (the code before the bounds answers some cases so), not a crash.
        client = Client(HTTP_HOST="127.0.0.1", raise_request_exception=False)
        client.force_login(user)
        with connect(server, BENCH_DB) as db:
            version = server_version(db)
        before = os.getloadavg()[0]
        memory = not args.no_memory
        rows = []
        if args.only in (None, "upload"):
            print("writing the files ...", flush=True)
            for label, _kind, ordinary, hostile in files(Path(directory)):
                print(f"timing: {label} ...", flush=True)
                base = timed(upload(client, target.pk, ordinary), args.runs, memory)
                rows.append((label, f"{hostile.stat().st_size / 1e6:.2f} MB file", base,
                             timed(upload(client, target.pk, hostile), args.runs, memory)))
        if args.only in (None, "site"):
            page = f"/imports/sites/{site.pk}/"
            base = timed(get(client, f"{page}?period=28d"), args.runs, memory)
            for label, query in SITE_CASES:
                print(f"timing: {label} ...", flush=True)
                rows.append((label, "", base, timed(get(client, f"{page}?{query}"), args.runs, memory)))
        after = os.getloadavg()[0]
    print()
    print(headline("hostile input", version))
    print(f"load average {before:.2f} before, {after:.2f} after; {args.runs} timed run(s) per case, medians")
    print()
    print(f"{'case':<52}{'size':>14}{'ordinary':>11}{'hostile':>12}{'ratio':>9}{'answer':>7}{'peak MB':>9}"
          f"{'ordinary':>9}")
    print("-" * 123)
    for label, size, base, hostile in rows:
        peaks = "".join(f"{'-' if peak is None else f'{peak / 1e6:.1f}':>9}"
                        for peak in (hostile.peak_bytes, base.peak_bytes))
        print(f"{label:<52}{size:>14}{base.seconds * 1000:>9.1f}ms{hostile.seconds * 1000:>10.1f}ms"
              f"{hostile.seconds / base.seconds:>8.2f}x{hostile.status:>7}{peaks}")
    print()
    print("ratio: the hostile request's median time over the ordinary one's (a 1,000-page export of the same "
          "format; the last 28 days); answer: its status; peak MB: Python memory at the request's peak "
          "(tracemalloc), hostile then ordinary, the test client's copy of the upload included.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
