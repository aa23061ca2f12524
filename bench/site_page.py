"""Site page benchmark: the server time of /imports/sites/<id>/ on 5,000,000 metric rows, per period.

    .venv/bin/python -m bench.site_page [--urls 10000] [--days 250] [--runs 9] [--stale-runs 3]

Not a test: it prints figures and exits 0 unless something crashed. In a throw-away database
(``seoinsight_bench_site_page``) on the app's server: one site with two targets of ``--urls`` pages
each, a row per page and day for ``--days`` days ending yesterday (2 x 10,000 x 250 = 5,000,000
rows), written by one import per target and 10 days and linked to their pages as map_reconcile
leaves them; plus another org's site of 2,000 pages over the same days, which the page must not
read. Generated in SQL (generate_series; migration 0006's triggers keep the day sums as it goes),
then the ``refresh_site_page`` job's work is done for both targets (timed: the precomputed top
pages of every preset), then vacuumed and analyzed as autovacuum leaves a table after an import
(index-only scans need the visibility map).

Each view is requested ``--runs`` times (after one warm-up) through Django's test client in this
process, with DEBUG off: the whole request (session, middleware, the view's statements, the
template). Printed: median and p95 against the goal, each statement's median, the rest (Python and
the template), and the main scans of the heavy statements from EXPLAIN (ANALYZE, BUFFERS). Then the
presets again ``--stale-runs`` times with the precomputed top pages out of date (as on the first
view after an import, before its refresh has run): the top pages are summed from the rows.
The load average is printed before and after: a busy machine slows every figure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from datetime import timedelta

from bench.common import app_bench_database, connect, headline, server_version, settle, table, time_view, verdict

BENCH_DB = "seoinsight_bench_site_page"
GOAL_MS = 300  # the page's server time (issue 24)
IMPORT_DAYS = 10  # days per generated import
RIVAL_URLS = 2000
HISTORY_URL = "https://shop.example/products/item-4"  # a page PAGES makes, for the history view

# The views timed: a label and the query string.
VIEWS = [
    ("last 7 days", "period=7d"),
    ("last 28 days", "period=28d"),
    ("last 90 days", "period=90d"),
    ("last month", "period=month"),
    ("last 28 days, sorted by change", "period=28d&sort=-change"),
    ("last 28 days, a search", "period=28d&q=guides"),
    ("last 28 days, a page's history", "period=28d&url={url}"),
    ("last 28 days, CSV (every page)", "period=28d&format=csv"),
]
# The presets again, their top pages out of date.
STALE_VIEWS = [(label, query) for label, query in VIEWS if query.startswith("period=") and "&" not in query]

# Rows as imports leave them: a page's reach follows a long tail (the first pages get most of the
# impressions), a weekly rhythm, noise; clicks fall with the position. %(targets)s, %(imports)s
# (each target's imports, IMPORT_DAYS days each, in day order) and %(first)s (the first day).
FILL = """
INSERT INTO imports_urlmetric (site_target_id, url, url_normalized, period_start, period_end, clicks, impressions,
                               ctr, position, position_weight, source_rows, import_id, page_id, updated_at)
SELECT p.site_target_id, p.url, p.url_normalized, d.day, d.day, f.clicks, f.impressions,
       f.clicks::float8 / f.impressions, f.position, f.impressions, 1,
       (%(imports)s::bigint[])[(t.ord - 1) * %(per_target)s + d.n / %(import_days)s + 1], p.id, now()
FROM generate_series(0, %(days)s - 1) AS g (n)
CROSS JOIN LATERAL (SELECT g.n, %(first)s::date + g.n AS day) AS d
CROSS JOIN unnest(%(targets)s::bigint[]) WITH ORDINALITY AS t (id, ord)
JOIN seoinsight_page AS p ON p.site_target_id = t.id
CROSS JOIN LATERAL (
    SELECT greatest(1, (40000 / (p.id %% 10000 + 1) ^ 0.8
                        * CASE WHEN extract(isodow FROM d.day) >= 6 THEN 0.7 ELSE 1 END
                        * (0.6 + random() * 0.8))::bigint) AS impressions,
           1 + (p.id %% 40) + random() * 3 AS position
) AS b
CROSS JOIN LATERAL (SELECT b.impressions, b.position,
                           floor(b.impressions * 0.3 / b.position * random())::bigint AS clicks) AS f
ORDER BY d.n, p.id
"""
PAGES = """
INSERT INTO seoinsight_page (site_target_id, url, url_normalized, created_at)
SELECT t.id, u.url, u.url, now()
FROM unnest(%(targets)s::bigint[]) AS t (id)
JOIN seoinsight_sitetarget AS st ON st.id = t.id
CROSS JOIN generate_series(1, %(urls)s) AS n
CROSS JOIN LATERAL (SELECT st.url_prefix || (ARRAY['products', 'blog', 'guides', 'category'])[n %% 4 + 1]
                           || '/item-' || n || CASE WHEN n %% 7 = 0 THEN '/' ELSE '' END AS url) AS u
"""


def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


# -- the data ------------------------------------------------------------------------------------

def build(args) -> dict:
    """The orgs, sites, targets, imports and pages through the ORM; the metric rows in SQL. Returns ids and counts."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.utils import timezone

    from imports.models import Import, ImportKind, ImportOrigin, ImportStatus
    from seoinsight.models import Membership, Org, Site, SiteTarget

    last = timezone.localdate() - timedelta(days=1)
    first = last - timedelta(days=args.days - 1)
    org = Org.objects.create(id="bench", name="Bench")
    site = Site.objects.create(org=org, domain="shop.example")
    targets = [SiteTarget.objects.create(site=site, url_prefix=prefix)
               for prefix in ("https://shop.example/", "https://shop.example/fr/")]
    rival = Org.objects.create(id="rival", name="Rival")
    rival_target = SiteTarget.objects.create(site=Site.objects.create(org=rival, domain="rival.example"),
                                             url_prefix="https://rival.example/")
    user = get_user_model().objects.create_user("bench", password=uuid.uuid4().hex)
    Membership.objects.create(user=user, org=org)

    per_target = -(-args.days // IMPORT_DAYS)
    seconds = {}
    for ids, urls in (([t.pk for t in targets], args.urls), ([rival_target.pk], RIVAL_URLS)):
        imports = []
        for target_id in ids:
            target = SiteTarget.objects.select_related("site").get(pk=target_id)
            for k in range(per_target):
                start = first + timedelta(days=k * IMPORT_DAYS)
                imports.append(Import.objects.create(
                    org_id=target.site.org_id, site_target=target, kind=ImportKind.API, origin=ImportOrigin.API,
                    status=ImportStatus.DONE, uid=uuid.uuid4().hex, period_start=start,
                    period_end=min(last, start + timedelta(days=IMPORT_DAYS - 1)), finished_at=timezone.now()).pk)
        started = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute(PAGES, {"targets": ids, "urls": urls})
            cursor.execute(FILL, {"targets": ids, "imports": imports, "per_target": per_target,
                                  "import_days": IMPORT_DAYS, "days": args.days, "first": first})
        seconds[len(ids)] = time.perf_counter() - started
        print(f"  {len(ids) * urls * args.days:,} rows in {seconds[len(ids)]:.0f} s", flush=True)
    return {"site": site.pk, "targets": targets, "user": user, "rows": 2 * args.urls * args.days,
            "rival_rows": RIVAL_URLS * args.days, "url": HISTORY_URL, "fill_seconds": sum(seconds.values())}


def refresh(targets) -> list[float]:
    """What the refresh_site_page job does for each target: seconds per target."""
    from insight.sitepage import cache

    spent = []
    for target in targets:
        started = time.perf_counter()
        cache.refresh(target)
        spent.append(time.perf_counter() - started)
    return spent


def outdate(db) -> None:
    """Every target's data version moved on, as an import's first batch moves it: the precomputed top pages are stale."""
    db.execute("UPDATE imports_sitepage_versions SET version = nextval('imports_sitepage_version_seq')")


# -- timing --------------------------------------------------------------------------------------

STATEMENTS = ("NEWEST_DAY", "DAY_FIGURES", "DAY_EDGE_ROWS", "STALE_TARGETS", "TOP_PAGES_CACHED", "FIGURES",
              "EDGE_ROWS", "TOP_PAGES", "TOP_PAGES_ALL_PREVIOUS")
OTHER = "other"  # the session, the user, the site and its targets, the imports shown


def statement_name(sql_text: str) -> str:
    """Which of insight.sitepage.sql's statements ran: each one's first line names it."""
    first = sql_text.lstrip().split("\n", 1)[0]
    return first.removeprefix("-- sitepage.") if first.startswith("-- sitepage.") else OTHER


def main_scans(site_id: int, query: str, top: str) -> list[str]:
    """The heavy statements of a view, EXPLAIN (ANALYZE, BUFFERS): each one's scans, rows and buffers.

    ``top``: the top pages' statement (TOP_PAGES_CACHED, or TOP_PAGES when they are summed from the rows).
    """
    from django.db import connection
    from django.utils import timezone

    from seoinsight import periods

    from insight.sitepage import figures, listing, sql
    from seoinsight.models import SiteTarget

    params_of = dict(pair.split("=", 1) for pair in query.split("&"))
    targets = list(SiteTarget.objects.filter(site_id=site_id).order_by("pk").values_list("pk", flat=True))
    newest = figures.newest_day(targets, timezone.localdate())
    choice = periods.choose(params_of.get("period"), today=timezone.localdate(), newest=newest)
    params = figures.statement_params(targets, choice, url=None, pattern="%", limit=listing.PAGE_SIZE, offset=0)
    lines = []
    for name in ("DAY_FIGURES", top):
        statement = getattr(sql, name).format(order=listing.order_by("-clicks"), search="")
        with figures.snapshot(), connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, params)
            plan = cursor.fetchone()[0][0]
        lines.append(f"    {name}: {plan['Execution Time']:.1f} ms under EXPLAIN ANALYZE")
        lines += [f"      {scan}" for scan in scans(plan["Plan"])]
    return lines


def scans(node: dict) -> list[str]:
    """Each scan node of a plan: how, on what, rows read (all workers), heap fetches, buffers."""
    found = []
    if "Scan" in node["Node Type"] and "Relation Name" in node:
        loops = node.get("Actual Loops", 1)
        fetches = node.get("Heap Fetches")
        parallel = f"Parallel, {loops} processes: " if node.get("Parallel Aware") else ""
        found.append(f"{parallel}{node['Node Type']} using {node.get('Index Name', '(table)')}: "
                     f"{node['Actual Rows'] * loops:,} rows"
                     + (f", {fetches:,} heap fetches" if fetches is not None else "")
                     + f", buffers hit {node.get('Shared Hit Blocks', 0):,} read {node.get('Shared Read Blocks', 0):,}")
    for child in node.get("Plans", []):
        found += scans(child)
    return found


# -- report ----------------------------------------------------------------------------------------

def timing_lines(results: dict, views) -> list[str]:
    """Per view: median / p95 against the goal, then where its median went, statement by statement."""
    row, head = table(40, 22, 110)
    lines = [*head]
    for label, _ in views:
        totals = [t * 1000 for t in results[label]["totals"]]
        median, p95 = statistics.median(totals), percentile(totals, 95)
        lines.append(row(f"{label}", f"{median:6.0f} / {p95:4.0f} ms", "",
                         f"median < {GOAL_MS} ms  {verdict(median < GOAL_MS)}"))
    lines += ["", "where the time goes, median ms per request: each statement of insight.sitepage.sql that ran "
                  "(other: the session, user, site, targets, imports shown, the job queued), the rest (Python, the "
                  "template):"]
    for label, _ in views:
        result = results[label]
        cells, spent = [], 0.0
        for name in (*STATEMENTS, OTHER):
            values = result["statements"].get(name)
            if values:
                value = statistics.median(values) * 1000
                spent += value
                cells.append(f"{name} {value:.1f}")
        rest = statistics.median(result["totals"]) * 1000 - spent
        lines.append(f"  {label:<34}" + ", ".join(cells) + f", rest {rest:.1f}")
    return lines


def report(results: dict, stale: dict, args, version: str, data: dict, load: tuple, explains: dict) -> str:
    lines = [
        headline("site page", version),
        f"{data['rows']:,} metric rows of one site (2 targets x {args.urls:,} pages x {args.days} days, daily) "
        f"+ {data['rival_rows']:,} of another org's site; filled in {data['fill_seconds']:.0f} s (triggers included)",
        "refresh_site_page (every preset's top pages of one target): "
        + ", ".join(f"{seconds:.1f} s" for seconds in data["refresh_seconds"]),
        f"{args.runs} runs per view after a warm-up, through the test client (DEBUG off); "
        f"load average {load[0]:.2f} before, {load[1]:.2f} after ({os.cpu_count()} CPUs)",
        "",
        "top pages precomputed and current (every view after the refresh):",
        *timing_lines(results, VIEWS),
        "",
        f"top pages out of date ({args.stale_runs} runs: the first views after an import, until its refresh has run; "
        "summed from the rows, a refresh queued):",
        *timing_lines(stale, STALE_VIEWS),
        "",
        "the main scans (EXPLAIN (ANALYZE, BUFFERS); timing under EXPLAIN is slower than plain):",
    ]
    for label, explained in explains.items():
        lines.append(f"  {label}")
        lines += explained
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--urls", type=int, default=10_000, help="pages per target, two targets (default: 10000)")
    parser.add_argument("--days", type=int, default=250, help="days of daily rows (default: 250)")
    parser.add_argument("--runs", type=int, default=9, help="timed requests per view (default: 9)")
    parser.add_argument("--stale-runs", type=int, default=3,
                        help="timed requests per preset with the top pages out of date (default: 3)")
    args = parser.parse_args()
    if args.urls < 100 or args.days < 200 or args.runs < 3 or args.stale_runs < 3:
        parser.error("--urls must be at least 100, --days at least 200 (two 90-day periods), "
                     "--runs and --stale-runs at least 3")

    with app_bench_database(BENCH_DB, "site-page-bench-") as (server, _url, _media):
        from django.test import Client

        print(f"generating {2 * args.urls * args.days + RIVAL_URLS * args.days:,} rows ...", flush=True)
        data = build(args)
        with connect(server, BENCH_DB) as db:
            version = server_version(db)
            settle(db, "imports_urlmetric")
            print("refreshing the precomputed top pages ...", flush=True)
            data["refresh_seconds"] = refresh(data["targets"])
            settle(db)
            client = Client(HTTP_HOST="127.0.0.1")
            client.force_login(data["user"])
            before = os.getloadavg()[0]
            results, stale = {}, {}
            for label, query in VIEWS:
                print(f"timing: {label} ...", flush=True)
                path = f"/imports/sites/{data['site']}/?{query.format(url=data['url'])}"
                results[label] = time_view(client, path, args.runs, statement_name)
            explains = {label: main_scans(data["site"], query, "TOP_PAGES_CACHED")
                        for label, query in VIEWS if query in ("period=28d", "period=90d")}
            outdate(db)
            for label, query in STALE_VIEWS:
                print(f"timing, top pages out of date: {label} ...", flush=True)
                stale[label] = time_view(client, f"/imports/sites/{data['site']}/?{query}", args.stale_runs, statement_name)
            explains["last 90 days, top pages out of date"] = main_scans(data["site"], "period=90d", "TOP_PAGES")
            after = os.getloadavg()[0]
    print()
    print(report(results, stale, args, version, data, (before, after), explains))
    return 0


if __name__ == "__main__":
    sys.exit(main())
