"""Portfolio benchmark: the server time of /imports/sites/ for 200 sites of 16 months of daily rows (4.8 M rows).

    .venv/bin/python -m bench.portfolio [--sites 200] [--pages 50] [--days 487] [--runs 9]

Not a test: it prints figures and exits 0 unless something crashed. In a throw-away database
(``seoinsight_bench_portfolio``) on the app's server: one org with ``--sites`` sites of one target each,
``--pages`` pages each, a row per page and day for ``--days`` days ending yesterday (200 x 50 x 487 =
4,870,000 rows), written by one import per site and 10 days; one site in ten falls by half over its last
three weeks (what the default order puts first), one has no data; plus another org's site over the same days,
which the page must not read. Generated in SQL (generate_series), a batch of sites per statement, so the day
sums' triggers (migrations 0006 and 0011) keep them as imports do; then vacuumed and analyzed.

Each view is requested ``--runs`` times (after one warm-up) through Django's test client in this process,
DEBUG off: the whole request. Printed: median and p95 against the goal, then where the median went:
each named statement (``-- portfolio.FIGURES``…), the other queries (session, user, org, alerts, imports,
mailboxes, notes) and the rest (Python, the template).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
import uuid
from datetime import date, timedelta

from bench import common
from bench.common import app_bench_database, connect, headline, server_version, settle, table, verdict

BENCH_DB = "seoinsight_bench_portfolio"
GOAL_MS = 300  # the portfolio's server time (issue 36 §2)
IMPORT_DAYS = 10  # days per generated import
SITES_PER_STATEMENT = 20  # rows of this many sites per INSERT: the triggers' transition tables stay small

# The views timed: a label and the query string.
VIEWS = [
    ("default (last 28 days, largest fall first)", ""),
    ("last 90 days", "period=90d"),
    ("last 28 days against a year before", "compare=year"),
]

# Rows as imports leave them: a page's reach follows a long tail and a weekly rhythm, with noise; clicks fall
# with the position; a site with ``falls`` loses half its reach over its last 21 days. %(targets)s with
# %(falls)s (per target), %(imports)s (each target's imports, IMPORT_DAYS days each, in day order).
FILL = """
INSERT INTO imports_urlmetric (site_target_id, url, url_normalized, period_start, period_end, clicks, impressions,
                               ctr, position, position_weight, source_rows, import_id, updated_at)
SELECT t.id, u.url, u.url, d.day, d.day, f.clicks, f.impressions, f.clicks::float8 / f.impressions, f.position,
       f.impressions, 1, (%(imports)s::bigint[])[(t.ord - 1) * %(per_target)s + d.n / %(import_days)s + 1], now()
FROM unnest(%(targets)s::bigint[], %(falls)s::boolean[]) WITH ORDINALITY AS t (id, falls, ord)
CROSS JOIN generate_series(0, %(days)s - 1) AS g (n)
CROSS JOIN LATERAL (SELECT g.n, %(first)s::date + g.n AS day) AS d
CROSS JOIN generate_series(1, %(pages)s) AS p (n)
CROSS JOIN LATERAL (SELECT 'https://site-' || t.id || '.example/page-' || p.n AS url) AS u
CROSS JOIN LATERAL (
    SELECT greatest(1, (3000 / p.n ^ 0.8
                        * CASE WHEN extract(isodow FROM d.day) >= 6 THEN 0.7 ELSE 1 END
                        * CASE WHEN t.falls AND d.n >= %(days)s - 21 THEN 0.5 ELSE 1 END
                        * (0.6 + random() * 0.8))::bigint) AS impressions,
           1 + p.n %% 30 + random() * 3 AS position
) AS b
CROSS JOIN LATERAL (SELECT b.impressions, b.position,
                           floor(b.impressions * 0.3 / b.position * random())::bigint AS clicks) AS f
ORDER BY t.id, d.n, p.n
"""


def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


# -- the data ------------------------------------------------------------------------------------

def build(sites: int, pages: int, days: int, last: date) -> dict:
    """The orgs, sites, targets, imports and a member through the ORM; the metric rows in SQL.

    ``last``: the newest day with data. Returns the member, the row count and the seconds the rows took.
    """
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.utils import timezone

    from imports.models import Import, ImportKind, ImportOrigin, ImportStatus
    from seoinsight.models import Membership, Org, Site, SiteTarget

    first = last - timedelta(days=days - 1)
    org = Org.objects.create(id="bench", name="Bench agency")
    rival = Org.objects.create(id="rival", name="Rival")
    targets = []
    for n in range(sites):
        site = Site.objects.create(org=org, domain=f"client-{n:03d}.example")
        targets.append(SiteTarget.objects.create(site=site, url_prefix=f"https://client-{n:03d}.example/"))
    rival_target = SiteTarget.objects.create(site=Site.objects.create(org=rival, domain="rival.example"),
                                             url_prefix="https://rival.example/")
    user = get_user_model().objects.create_user("bench", password=uuid.uuid4().hex)
    Membership.objects.create(user=user, org=org)

    # The last site has no data; one in ten falls.
    filled = [(t, n % 10 == 3, org.pk) for n, t in enumerate(targets[:-1])] + [(rival_target, False, rival.pk)]
    per_target = -(-days // IMPORT_DAYS)
    started, rows = time.perf_counter(), 0
    for at in range(0, len(filled), SITES_PER_STATEMENT):
        batch = filled[at:at + SITES_PER_STATEMENT]
        imports = Import.objects.bulk_create([
            Import(org_id=org_id, site_target=target, kind=ImportKind.API, origin=ImportOrigin.API,
                   status=ImportStatus.DONE, uid=uuid.uuid4().hex, period_start=first + timedelta(days=k * IMPORT_DAYS),
                   period_end=min(last, first + timedelta(days=(k + 1) * IMPORT_DAYS - 1)),
                   finished_at=timezone.now())
            for target, _, org_id in batch for k in range(per_target)])
        with connection.cursor() as cursor:
            cursor.execute(FILL, {"targets": [t.pk for t, _, _ in batch], "falls": [f for _, f, _ in batch],
                                  "imports": [imp.pk for imp in imports], "per_target": per_target,
                                  "import_days": IMPORT_DAYS, "days": days, "first": first, "pages": pages})
            rows += cursor.rowcount
        print(f"  {rows:,} rows, {time.perf_counter() - started:.0f} s", flush=True)
    return {"user": user, "rows": rows, "fill_seconds": time.perf_counter() - started}


# -- timing --------------------------------------------------------------------------------------

OTHER = "other"  # the session, the user, the org, alerts, imports, mailboxes, notes


def statement_name(sql_text: str) -> str:
    """Which named statement ran (its first line ``-- portfolio.FIGURES``); OTHER for the ORM's queries."""
    first = sql_text.lstrip().split("\n", 1)[0]
    return first.removeprefix("-- ").split(":")[0].strip() if first.startswith("-- ") else OTHER


def time_view(client, path: str, runs: int) -> dict:
    """``runs`` timed requests after one warm-up (``bench.common.time_view``), with the sites the page listed."""
    result = common.time_view(client, path, runs, statement_name)
    # Read off the HTML: outside the test runner the client keeps no template context.
    listed = re.findall(r'<tr data-site="([^"]*)"', result.pop("last").content.decode())
    return {**result, "sites": len(listed), "first": listed[0] if listed else ""}


def measure(user, runs: int) -> dict:
    """Every view of VIEWS timed for ``user``: label -> time_view's result."""
    from django.test import Client

    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    results = {}
    for label, query in VIEWS:
        print(f"timing: {label} ...", flush=True)
        results[label] = time_view(client, f"/imports/sites/?{query}", runs)
    return results


# -- report ----------------------------------------------------------------------------------------

def timing_lines(results: dict) -> list[str]:
    """Per view: median / p95 against the goal, then where its median went, statement by statement."""
    row, head = table(46, 22, 110)
    lines = [*head]
    for label, _ in VIEWS:
        totals = [t * 1000 for t in results[label]["totals"]]
        median, p95 = statistics.median(totals), percentile(totals, 95)
        lines.append(row(label, f"{median:6.0f} / {p95:4.0f} ms", "", f"median < {GOAL_MS} ms  "
                                                                        f"{verdict(median < GOAL_MS)}"))
    lines += ["", "where the time goes, median ms per request: each named statement, the other queries (session, "
                  "user, org, alerts, imports, mailboxes, notes), the rest (Python, the template):"]
    for label, _ in VIEWS:
        result = results[label]
        cells, spent = [], 0.0
        for name in sorted(result["statements"], key=lambda n: (n == OTHER, n)):
            value = statistics.median(result["statements"][name]) * 1000
            spent += value
            cells.append(f"{name} {value:.1f}")
        rest = statistics.median(result["totals"]) * 1000 - spent
        lines.append(f"  {label:<46}" + ", ".join(cells) + f", rest {rest:.1f}  "
                     f"({result['sites']} sites listed, first: {result['first']})")
    return lines


def report(results: dict, args, version: str, data: dict, load: tuple) -> str:
    return "\n".join([
        headline("portfolio", version),
        f"{data['rows']:,} metric rows: {args.sites} sites x {args.pages} pages x {args.days} days, daily "
        f"(one site without data), and another org's site; filled in {data['fill_seconds']:.0f} s (triggers included)",
        f"{args.runs} runs per view after a warm-up, through the test client (DEBUG off); "
        f"load average {load[0]:.2f} before, {load[1]:.2f} after ({os.cpu_count()} CPUs)",
        "",
        *timing_lines(results),
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, default=200, help="sites of the org (default: 200)")
    parser.add_argument("--pages", type=int, default=50, help="pages per site (default: 50)")
    parser.add_argument("--days", type=int, default=487, help="days of daily rows, 16 months (default: 487)")
    parser.add_argument("--runs", type=int, default=9, help="timed requests per view (default: 9)")
    args = parser.parse_args(argv)
    if args.sites < 2 or args.pages < 1 or args.days < 400 or args.runs < 1:
        parser.error("--sites must be at least 2, --pages at least 1, --days at least 400 (28 days and the same a "
                     "year before), --runs at least 1")

    with app_bench_database(BENCH_DB, "portfolio-bench-") as (server, _url, _media):
        from django.utils import timezone

        print(f"generating {(args.sites - 1 + 1) * args.pages * args.days:,} rows ...", flush=True)
        data = build(args.sites, args.pages, args.days, timezone.localdate() - timedelta(days=1))
        with connect(server, BENCH_DB) as db:
            version = server_version(db)
            settle(db)
            before = os.getloadavg()[0]
            results = measure(data["user"], args.runs)
            after = os.getloadavg()[0]
    print()
    print(report(results, args, version, data, (before, after)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
