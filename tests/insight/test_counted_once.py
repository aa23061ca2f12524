"""Each day of a page counts once (issue 36 §1.1), against the raw rows on the real PostgreSQL.

A site with daily rows and rows covering 28 or 90 days of the same pages (a Search Console ZIP's
*Pages* table): where a daily row of a page exists for a day, the page's rows covering several days
that hold that day are left out. The rule is written again here, in Python (``counted``), and every
figure the page shows — totals, chart points, top pages, the CSV, a page's history, the previous
period — equals a sum over the rows it keeps, from the rows and from the precomputed sums alike,
whichever import came first; removing the daily rows brings the long ones back. The sums the
triggers keep (migration 0011) equal a recomputation from scratch after random writes, and after
two imports into one target at once on real worker processes.
"""

import csv
import importlib
import io
import random
from collections import defaultdict
from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Value
from django.db.models.functions import Concat

from imports.models import UrlMetric
from insight.sitepage import cache, figures, sql
from insight.sitepage import counted as counted_text
from jobs.models import Job, JobStatus
from seoinsight import periods
from seoinsight.periods import Period
from tests.factories import ImportFactory, SiteTargetFactory
from tests.imports.files import write_csv
from tests.insight.test_site_page import site  # noqa: F401 (the fixture: rows, then precomputed)
from tests.insight.test_site_page_rollups import SUMMED, as_numeric
from tests.support.processes import runjobs, wait_for

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]

MIGRATION = importlib.import_module("imports.migrations.0011_sitepage_counted_once")
SHOWN = Period(date(2026, 5, 1), date(2026, 5, 28))
BEFORE = SHOWN.previous()  # 2026-04-03 → 04-30
URL = "https://acme.example/{}".format


# --- the rule, written again ---------------------------------------------------------------------

def raw_rows(targets: list[int]) -> list[dict]:
    return list(UrlMetric.objects.filter(site_target_id__in=targets).values())


def counted(rows: list[dict]) -> list[dict]:
    """The rows the rule keeps: daily ones, and those covering several days none of which a daily row of
    the same page (site target, url_normalized) has."""
    daily = defaultdict(set)
    for r in rows:
        if r["period_start"] == r["period_end"]:
            daily[(r["site_target_id"], r["url_normalized"])].add(r["period_start"])
    kept = []
    for r in rows:
        days = daily[(r["site_target_id"], r["url_normalized"])]
        span = {r["period_start"] + timedelta(days=n) for n in range((r["period_end"] - r["period_start"]).days + 1)}
        if r["period_start"] == r["period_end"] or not span & days:
            kept.append(r)
    return kept


def inside(rows: list[dict], period: Period) -> list[dict]:
    return [r for r in rows if r["period_start"] >= period.start and r["period_end"] <= period.end]


def total(rows: list[dict], column: str) -> int | None:
    values = [r[column] for r in rows if r[column] is not None]
    return sum(values) if values else None


def per_url(rows: list[dict]) -> dict[str, int | None]:
    grouped = defaultdict(list)
    for r in rows:
        grouped[r["url_normalized"]].append(r)
    return {url: total(group, "clicks") for url, group in grouped.items()}


def per_period(rows: list[dict]) -> dict[Period, tuple]:
    grouped = defaultdict(list)
    for r in rows:
        grouped[Period(r["period_start"], r["period_end"])].append(r)
    return {p: (total(g, "clicks"), total(g, "impressions"), len(g)) for p, g in grouped.items()}


# --- the data: daily rows and a ZIP's 28- and 90-day rows of the same pages ----------------------

def days(period: Period) -> list[date]:
    return [period.start + timedelta(days=n) for n in range(period.days)]


def daily_rows(target, imp) -> list[UrlMetric]:
    """Page a daily on every day of both periods; b on three days of the one shown; d in the previous one only."""
    spans = {"a": days(SHOWN) + days(BEFORE), "b": [date(2026, 5, 10), date(2026, 5, 11), date(2026, 5, 12)],
             "d": days(BEFORE)}
    return [UrlMetric(site_target=target, url=URL(page), url_normalized=URL(page), period_start=day, period_end=day,
                      clicks=3 + n % 5, impressions=40 + n, position=2.5, position_weight=float(40 + n),
                      source_import=imp)
            for page, each in spans.items() for n, day in enumerate(each)]


def long_rows(target, imp, period: Period, clicks: int) -> list[UrlMetric]:
    """One row per page a, b, c, d covering ``period``, as a Search Console export's *Pages* table."""
    return [UrlMetric(site_target=target, url=URL(page), url_normalized=URL(page), period_start=period.start,
                      period_end=period.end, clicks=clicks * (n + 1), impressions=1000 * (n + 1), position=7.0,
                      position_weight=float(1000 * (n + 1)), source_import=imp)
            for n, page in enumerate("abcd")]


# The 90-day export crosses the period shown: counted in neither, as before.
NINETY = Period(date(2026, 3, 1), date(2026, 5, 29))


@pytest.fixture
def mixed(target):
    """Returns a function writing the daily import and the ZIP's rows into ``target``, in the order asked."""
    daily_import = ImportFactory(site_target=target, done=True, filename="daily.csv")
    zip_import = ImportFactory(site_target=target, done=True, filename="export.zip")

    def write(order: str):
        daily = daily_rows(target, daily_import)
        zipped = (long_rows(target, zip_import, SHOWN, 500) + long_rows(target, zip_import, BEFORE, 300)
                  + long_rows(target, zip_import, NINETY, 2000))
        for batch in ((daily, zipped) if order == "daily first" else (zipped, daily)):
            UrlMetric.objects.bulk_create(batch)  # one statement each, as an import's batch
        return daily_import, zip_import

    return write


def csv_of(client, the_site, **params) -> list[list[str]]:
    response = client.get(f"/imports/sites/{the_site.pk}/", {**params, "format": "csv"})
    assert response.status_code == 200
    return list(csv.reader(io.StringIO(response.content.decode(), newline="")))


def refresh_all(the_site):
    choice = periods.Choice("custom", SHOWN, BEFORE)
    for target in the_site.targets.all():
        cache.refresh(target, [choice.current])


def custom(period: Period = SHOWN) -> dict:
    return {"period": "custom", "from": period.start.isoformat(), "to": period.end.isoformat()}


def assert_page_follows_the_rule(client, the_site, target):
    """Every figure of the page and its CSV is a sum over the rows the rule keeps."""
    kept = counted(raw_rows([target.pk]))
    shown, before = inside(kept, SHOWN), inside(kept, BEFORE)
    choice = periods.Choice("custom", SHOWN, BEFORE)
    if figures.PRECOMPUTED:
        refresh_all(the_site)
        assert figures.stale_targets([target.pk], choice) == []

    result = figures.figures([target.pk], choice)
    assert (result.current.clicks, result.current.impressions, result.current.rows) == (
        total(shown, "clicks"), total(shown, "impressions"), len(shown))
    assert (result.previous.clicks, result.previous.impressions, result.previous.rows) == (
        total(before, "clicks"), total(before, "impressions"), len(before))
    assert {p: (s.clicks, s.impressions, s.rows) for p, s in result.points} == per_period(shown)

    response = client.get(f"/imports/sites/{the_site.pk}/", custom())
    assert response.status_code == 200
    assert response.context["precomputed"] is figures.PRECOMPUTED
    clicks = next(row for row in response.context["totals"] if row["name"] == "clicks")
    assert clicks["current"] == f"{total(shown, 'clicks'):,}"
    assert clicks["previous"] == f"{total(before, 'clicks'):,}"
    assert {row["url"]: row["clicks"] for row in response.context["pages"]} == {
        url: f"{c:,}" for url, c in per_url(shown).items()}
    assert {row["url"]: row["previous_clicks"] for row in response.context["pages"]} == {
        url: f"{per_url(before)[url]:,}" if url in per_url(before) else "—" for url in per_url(shown)}

    # The CSV: every page's clicks and previous clicks, as numbers.
    rows = csv_of(client, the_site, **custom())
    listed = {row[0]: row for row in rows if row and row[0] in per_url(kept)}
    assert {url: int(row[1]) for url, row in listed.items()} == per_url(shown)
    assert {url: int(row[5]) for url, row in listed.items() if row[5]} == {
        url: c for url, c in per_url(before).items() if url in per_url(shown)}

    # Each page's history, from its rows.
    for page in "abcd":
        history = figures.figures([target.pk], choice, url=URL(page))
        mine = [r for r in shown if r["url_normalized"] == URL(page)]
        theirs = [r for r in before if r["url_normalized"] == URL(page)]
        assert (history.current.clicks, history.current.rows) == (total(mine, "clicks"), len(mine))
        assert (history.previous.clicks, history.previous.rows) == (total(theirs, "clicks"), len(theirs))
        assert {p: (s.clicks, s.impressions, s.rows) for p, s in history.points} == per_period(mine)
    return response


@pytest.mark.parametrize("order", ["daily first", "long first"])
def test_every_figure_counts_each_day_of_a_page_once(client, member, site, target, mixed, order):  # noqa: F811
    daily_import, zip_import = mixed(order)
    response = assert_page_follows_the_rule(client, site, target)

    # The case at hand: pages a and b of the 28-day export are left out (daily rows cover some of their days),
    # c and d count; in the previous period a and d are left out. Nothing is counted twice.
    kept = counted(raw_rows([target.pk]))
    assert {r["url_normalized"] for r in inside(kept, SHOWN) if r["period_end"] > r["period_start"]} == {
        URL("c"), URL("d")}
    assert {r["url_normalized"] for r in inside(kept, BEFORE) if r["period_end"] > r["period_start"]} == {
        URL("b"), URL("c")}

    # The page says what it left out, and why.
    text = response.content.decode()
    left_out = response.context["left_out"]
    assert [(e["covered"].import_id, e["covered"].period, e["covered"].left_out, e["covered"].rows)
            for e in left_out] == [(zip_import.pk, NINETY, 3, 4), (zip_import.pk, BEFORE, 2, 4),
                                   (zip_import.pk, SHOWN, 2, 4)]
    text = " ".join(text.split())
    assert ("2 of the 4 pages of the 28-day export of 2026-05-01 → 2026-05-28 are not counted: daily rows of those "
            "pages cover some of its days.") in text
    assert "3 of the 4 pages of the 90-day export of 2026-03-01 → 2026-05-29 are not counted" in text
    # The 90-day rows cross the period's edge: those not left out are listed there, as before.
    assert [(e["covered"].import_id, e["covered"].rows) for e in response.context["edges"]] == [(zip_import.pk, 1)]


def test_a_page_history_and_search_follow_the_rule(client, member, site, target, mixed):  # noqa: F811
    mixed("daily first")
    response = client.get(f"/imports/sites/{site.pk}/", {**custom(), "url": URL("b"), "q": "acme"})
    assert response.status_code == 200
    mine = [r for r in inside(counted(raw_rows([target.pk])), SHOWN) if r["url_normalized"] == URL("b")]
    totals = {row["name"]: row["current"] for row in response.context["history"]["totals"]}
    assert totals["clicks"] == f"{total(mine, 'clicks'):,}"
    assert len(mine) == 3  # its three daily rows, not its 28-day row


def test_a_whole_export_left_out_is_named_as_such(client, member, target):
    """Every page of the 28-day export has daily rows: the export is not counted at all, and the page says so."""
    imp = ImportFactory(site_target=target, done=True, filename="pages.zip")
    UrlMetric.objects.bulk_create(long_rows(target, imp, SHOWN, 100))
    UrlMetric.objects.bulk_create([UrlMetric(site_target=target, url=URL(p), url_normalized=URL(p),
                                             period_start=date(2026, 5, 3), period_end=date(2026, 5, 3), clicks=1,
                                             impressions=2) for p in "abcd"])
    response = client.get(f"/imports/sites/{target.site.pk}/", custom())
    text = " ".join(response.content.decode().split())
    assert "The 28-day export of 2026-05-01 → 2026-05-28 is not counted: daily rows cover those days." in text
    assert next(row for row in response.context["totals"] if row["name"] == "clicks")["current"] == "4"


def test_removing_the_daily_rows_brings_the_long_rows_back(client, member, site, target, mixed):  # noqa: F811
    daily_import, zip_import = mixed("long first")
    # The daily import deleted: its rows stay (as an import deleted since), so do they shadow.
    daily_import.delete()
    assert_page_follows_the_rule(client, site, target)
    assert figures.figures([target.pk], periods.Choice("custom", SHOWN, BEFORE)).current.rows == 28 + 3 + 2

    # Page b's daily rows deleted: its 28-day row counts again; then every daily row.
    UrlMetric.objects.filter(url_normalized=URL("b"), period_start__gte=date(2026, 5, 10),
                             period_end__lte=date(2026, 5, 12)).delete()
    response = assert_page_follows_the_rule(client, site, target)
    assert [e["covered"].period for e in response.context["left_out"]] == [NINETY, BEFORE, SHOWN]
    UrlMetric.objects.filter(period_start=F("period_end")).delete()
    response = assert_page_follows_the_rule(client, site, target)
    assert response.context["left_out"] == []
    result = figures.figures([target.pk], periods.Choice("custom", SHOWN, BEFORE))
    assert result.current.clicks == 500 + 1000 + 1500 + 2000


# --- the sums the triggers keep ------------------------------------------------------------------

def shadowed_from_scratch(targets: list[int]) -> dict:
    """Per key, the sums of the rows covering several days that the rule leaves out: what 0011's table holds."""
    kept = {r["id"] for r in counted(raw_rows(targets))}
    sums = defaultdict(lambda: dict.fromkeys(SUMMED, 0))
    for m in raw_rows(targets):
        if m["id"] in kept:
            continue
        s = sums[(m["site_target_id"], m["period_start"], m["period_end"], m["source_import_id"])]
        clicks, impressions, position = m["clicks"], m["impressions"], m["position"]
        s["rows"] += 1
        if clicks is not None:
            s["clicks"] += clicks
            s["clicks_rows"] += 1
        if impressions is not None:
            s["impressions"] += impressions
            s["impressions_rows"] += 1
        if clicks is not None and impressions is not None:
            s["ctr_clicks"] += clicks
            s["ctr_impressions"] += impressions
            s["ctr_rows"] += 1
        if position is not None:
            weight = m["position_weight"] if m["position_weight"] is not None else float(impressions or 1)
            s["position_sum"] += as_numeric(position * weight)
            s["position_weight"] += as_numeric(weight)
            s["position_rows"] += 1
    return {key: tuple(Decimal(v) if not isinstance(v, int) else v for v in (s[n] for n in SUMMED))
            for key, s in sums.items()}


def table(name: str, targets: list[int]) -> dict:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT site_target_id, period_start, period_end, import_id, {', '.join(SUMMED)} "
                       f"FROM {name} WHERE site_target_id = ANY(%s)", [targets])
        return {tuple(row[:4]): tuple(row[4:]) for row in cursor.fetchall()}


def assert_sums_exact(targets: list[int]):
    assert table("imports_sitepage_shadowed_sums", targets) == shadowed_from_scratch(targets)
    # The view: the day sums less those, keys with nothing counted left out.
    days, shadowed = table("imports_sitepage_day_sums", targets), shadowed_from_scratch(targets)
    view = {}
    for key, sums in days.items():
        less = tuple(a - b for a, b in zip(sums, shadowed.get(key, (0,) * len(SUMMED)), strict=True))
        if less[0] > 0:
            view[key] = less
    assert table("imports_sitepage_counted_day_sums", targets) == view


def cached_top_pages(target) -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT url_normalized, rows, clicks, previous_clicks FROM imports_sitepage_url_sums "
                       "WHERE site_target_id = %s AND period_start = %s AND period_end = %s",
                       [target.pk, SHOWN.start, SHOWN.end])
        return {url: (rows, clicks, previous) for url, rows, clicks, previous in cursor.fetchall()}


def expected_top_pages(target) -> dict:
    kept = counted(raw_rows([target.pk]))
    shown, before = inside(kept, SHOWN), inside(kept, BEFORE)
    now, then = per_url(shown), per_url(before)
    rows = defaultdict(int)
    for r in shown:
        rows[r["url_normalized"]] += 1
    return {url: (rows[url], now.get(url), then.get(url)) for url in set(now) | set(then)}


def random_write(rng: random.Random, targets, imports):
    """One statement of a random kind: daily or long rows in, figures or periods changed, rows out."""
    target = rng.choice(targets)
    rows = UrlMetric.objects.filter(site_target=target)
    kind = rng.choice(["daily", "long", "update", "move", "relink", "url", "delete", "delete long"])
    if kind in ("daily", "long"):
        new = []
        for page in rng.sample("abcdefg", rng.randint(1, 5)):
            start = SHOWN.start - timedelta(days=rng.randint(0, 40))
            end = start if kind == "daily" else start + timedelta(days=rng.choice([6, 27]))
            new.append(UrlMetric(site_target=target, url=URL(page), url_normalized=URL(page), period_start=start,
                                 period_end=end, clicks=rng.choice([None, rng.randint(0, 99)]),
                                 impressions=rng.randint(0, 999), position=rng.choice([None, rng.uniform(1, 40)]),
                                 source_import=rng.choice(imports)))
        UrlMetric.objects.bulk_create(new, ignore_conflicts=True)
    elif kind == "update":
        rows.filter(pk__in=pick(rng, rows)).update(clicks=rng.randint(0, 50), source_import=rng.choice(imports))
    elif kind == "move":
        rows.filter(pk__in=pick(rng, rows.filter(period_start=F("period_end")))).update(
            period_start=F("period_start") + timedelta(days=400), period_end=F("period_end") + timedelta(days=400))
    elif kind == "relink":  # an import deleted: its rows' import set to NULL
        rows.filter(pk__in=pick(rng, rows)).update(source_import=None)
    elif kind == "url":  # a page's rows renamed: the figures stay, which rows shadow which changes
        rows.filter(pk__in=pick(rng, rows)).update(
            url_normalized=Concat(F("url_normalized"), Value(f"?moved{rng.randint(0, 10**9)}")))
    elif kind == "delete":
        rows.filter(pk__in=pick(rng, rows)).delete()
    else:
        rows.filter(pk__in=pick(rng, rows.exclude(period_start=F("period_end")))).delete()


def pick(rng, rows) -> list[int]:
    ids = list(rows.values_list("pk", flat=True))
    return rng.sample(ids, min(len(ids), rng.randint(1, 4)))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_kept_sums_equal_a_recomputation_after_random_writes(target, seed):
    rng = random.Random(seed)
    french = SiteTargetFactory(site=target.site, url_prefix="https://acme.example/fr/")
    targets = [target, french]
    imports = [ImportFactory(site_target=target, done=True) for _ in range(2)] + [None]
    for step in range(40):
        try:
            with transaction.atomic():
                random_write(rng, targets, imports)
        except IntegrityError:  # a row moved onto another's key: nothing written
            pass
        assert_sums_exact([t.pk for t in targets]), step
        if step % 10 == 9:
            # The precomputed top pages, computed now, are the rule's; a change after makes them stale.
            cache.refresh(target, [SHOWN])
            assert cached_top_pages(target) == expected_top_pages(target)
    with connection.cursor() as cursor:  # the migration's fill of the rows already there gives the same
        cursor.execute("DELETE FROM imports_sitepage_shadowed_sums")
        for statement in MIGRATION.FILL:
            cursor.execute(statement)
    assert_sums_exact([t.pk for t in targets])


def test_a_change_of_which_rows_are_left_out_makes_the_precomputed_top_pages_stale(target):
    """A daily row renamed to another page changes no day sum, but which long row counts: the version moves."""
    imp = ImportFactory(site_target=target, done=True)
    UrlMetric.objects.bulk_create(long_rows(target, imp, SHOWN, 10))
    UrlMetric.objects.create(site_target=target, url=URL("z"), url_normalized=URL("z"), period_start=SHOWN.start,
                             period_end=SHOWN.start, clicks=1, impressions=1)
    cache.refresh(target, [SHOWN])
    choice = periods.Choice("custom", SHOWN, BEFORE)
    assert figures.stale_targets([target.pk], choice) == []
    UrlMetric.objects.filter(url_normalized=URL("z")).update(url_normalized=URL("a"))
    assert figures.stale_targets([target.pk], choice) == [target.pk]
    assert_sums_exact([target.pk])
    cache.refresh(target, [SHOWN])
    assert cached_top_pages(target) == expected_top_pages(target)


def test_truncate_and_a_target_deleted_leave_no_shadowed_sums(target, mixed):
    mixed("daily first")
    assert table("imports_sitepage_shadowed_sums", [target.pk])
    target.delete()
    assert table("imports_sitepage_shadowed_sums", [target.pk]) == {}
    other = SiteTargetFactory()
    UrlMetric.objects.bulk_create(long_rows(other, None, SHOWN, 5))
    UrlMetric.objects.bulk_create(daily_rows(other, None))
    assert table("imports_sitepage_shadowed_sums", [other.pk])
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the test's transaction has deferred FK checks pending
        cursor.execute("TRUNCATE imports_urlmetric")
        cursor.execute("SELECT count(*) FROM imports_sitepage_shadowed_sums")
        assert cursor.fetchone()[0] == 0


def test_the_statements_leave_out_what_the_rule_leaves_out(target, mixed):
    """The SQL's own predicate (sql.COUNTED) keeps exactly the rows the rule here keeps."""
    mixed("daily first")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT m.id FROM imports_urlmetric AS m WHERE m.site_target_id = %(target)s AND {sql.COUNTED}",
                       {"target": target.pk, "targets": [target.pk], "previous_start": date(2020, 1, 1),
                        "end": date(2030, 1, 1)})
        assert {row[0] for row in cursor.fetchall()} == {r["id"] for r in counted(raw_rows([target.pk]))}


# --- two imports at once -------------------------------------------------------------------------

@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_a_daily_import_and_a_long_export_into_one_target_at_once_end_exact(processes, target, media, tmp_path):
    """Daily rows and a 28-day export of the same 2,000 pages, written at once by two workers in small batches:
    each batch of one meets rows of the other. The sums kept end as a recomputation gives them."""
    pages = [f"https://acme.example/p{n}" for n in range(2000)]
    daily_days = [SHOWN.start + timedelta(days=n) for n in (0, 9, 20)]
    header = ["Page", "Clicks", "Impressions", "CTR", "Position", "Date"]
    daily = [[page, str(n % 13), str(100 + n), "", "3,5", str(day)]
             for n, page in enumerate(pages) for day in daily_days if n % 3]  # a third of the pages: no daily rows
    random.Random(1).shuffle(daily)
    long = [["Page", "Clicks", "Impressions", "CTR", "Position"]] + [
        [page, str(n % 29), str(1000 + n), "", "6,5"] for n, page in enumerate(pages)]
    imports = [ImportFactory(site_target=target, path=write_csv(tmp_path, "daily.csv", [header] + daily)),
               ImportFactory(site_target=target, path=write_csv(tmp_path, "pages.csv", long),
                             period=(SHOWN.start, SHOWN.end))]
    with transaction.atomic(), connection.cursor() as cursor:
        # Both workers claim their import and then wait at their first write of metric rows: they write at once,
        # however slowly a busy machine starts the second.
        cursor.execute("LOCK TABLE imports_urlmetric IN SHARE MODE")
        workers = [processes(runjobs, MEDIA_ROOT=media, IMPORT_BATCH_SIZE=200) for _ in range(2)]

        def both_waiting():
            cursor.execute("SELECT count(*) FROM pg_locks WHERE relation = 'imports_urlmetric'::regclass AND NOT granted")
            return cursor.fetchone()[0] == 2

        wait_for(both_waiting, timeout=120, message="both imports waiting to write their first rows")
    wait_for(lambda: not Job.objects.filter(status__in=[JobStatus.QUEUED, JobStatus.RUNNING]).exists(),
             timeout=240, message="both imports to finish")

    runs = Job.objects.filter(pk__in=[imp.job_id for imp in imports])
    assert {run.status for run in runs} == {JobStatus.DONE}
    assert max(run.started_at for run in runs) < min(run.finished_at for run in runs)  # they did run at once
    assert UrlMetric.objects.filter(site_target=target).count() == len(daily) + len(pages)
    assert_sums_exact([target.pk])
    shadowed = table("imports_sitepage_shadowed_sums", [target.pk])
    assert [value[0] for value in shadowed.values()] == [len([n for n in range(2000) if n % 3])]
    for worker in workers:
        assert "deadlock" not in worker.output()


# --- what the page says (pure) -------------------------------------------------------------------

@pytest.mark.parametrize(("days", "left_out", "rows", "text"), [
    (28, 4, 4, "The 28-day export of P is not counted: daily rows cover those days."),
    (90, 1, 4, "1 of the 4 pages of the 90-day export of P is not counted: daily rows of that page cover some of "
               "its days."),
    (28, 1200, 1500, "1,200 of the 1,500 pages of the 28-day export of P are not counted: daily rows of those pages "
                     "cover some of its days."),
    (7, 1, 1, "The 7-day export of P is not counted: daily rows cover those days."),
])
def test_what_was_left_out_reads(days, left_out, rows, text):
    assert counted_text.left_out_text(days, "P", left_out, rows) == text


@pytest.mark.parametrize(("written", "held", "kept", "text"), [
    (900, 900, 900, "all 900 rows count"),
    (1, 1, 1, "its 1 row counts"),
    (900, 300, 300, "300 of 900 rows count: 600 replaced by a later import or deleted"),
    (900, 900, 880, "880 of 900 rows count: 20 left out, daily rows of the same pages cover their days"),
    (900, 300, 280, "280 of 900 rows count: 600 replaced by a later import or deleted; 20 left out, daily rows of "
                    "the same pages cover their days"),
    (0, 5, 5, "all 5 rows count"),  # rows counted before the import's counts: never a negative figure
])
def test_how_many_of_an_imports_rows_count_reads(written, held, kept, text):
    assert counted_text.kept_text(written, held, kept) == text
