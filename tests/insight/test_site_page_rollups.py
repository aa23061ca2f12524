"""The site page's precomputed figures (migration 0006) against the metric rows they sum, on the real PostgreSQL.

The day sums, kept by triggers, equal the rows' own sums (added up here, in Python) after every
kind of write: rows inserted, changed, moved to another day, relinked to their page, their import
deleted, rows deleted, a target deleted, the table truncated; an import updating rows; two imports
into one target at once on real worker processes; and the migration's fill of rows already there.
The precomputed top pages are read only while current: a change committed after or during their
refresh sends the page back to the rows, with one refresh queued per target, which the job then
makes current. On data of every shape, both paths give the same figures.
"""

import importlib
import random
import threading
from collections import defaultdict
from datetime import date, timedelta
from decimal import Decimal, localcontext

import pytest
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from imports import ingest
from imports.models import UrlMetric
from insight.sitepage import cache, figures, listing
from jobs.models import Job, JobStatus
from seoinsight import periods
from seoinsight.models import Page
from seoinsight.periods import Period
from tests.factories import ImportFactory, SiteTargetFactory
from tests.imports.files import write_csv
from tests.insight.test_site_page import UrlMetricFactory
from tests.support.processes import run_burst, runjobs, wait_for

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]

MIGRATION = importlib.import_module("imports.migrations.0006_site_page_rollups")
FIRST = date(2026, 5, 1)
SUMMED = ("rows", "clicks", "clicks_rows", "impressions", "impressions_rows", "ctr_clicks", "ctr_impressions",
          "ctr_rows", "position_sum", "position_weight", "position_rows")


def as_numeric(value: float) -> Decimal:
    """A float8 as PostgreSQL casts it to numeric: 15 significant digits."""
    return Decimal(format(value, ".15g"))


def summed_rows(targets: list[int]) -> dict:
    """Per (target, row period, import): the sums the day sums must hold, from the metric rows themselves."""
    sums = defaultdict(lambda: dict.fromkeys(SUMMED, 0))
    with localcontext() as context:
        context.prec = 60
        for m in UrlMetric.objects.filter(site_target_id__in=targets).values():
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
    return {key: tuple(s[name] for name in SUMMED) for key, s in sums.items()}


def day_sums(targets: list[int]) -> dict:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT site_target_id, period_start, period_end, import_id, {', '.join(SUMMED)} "
                       "FROM imports_sitepage_day_sums WHERE site_target_id = ANY(%s)", [targets])
        return {tuple(row[:4]): tuple(row[4:]) for row in cursor.fetchall()}


def versions(targets: list[int]) -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT site_target_id, version FROM imports_sitepage_versions WHERE site_target_id = ANY(%s)",
                       [targets])
        return dict(cursor.fetchall())


def assert_day_sums_match(*ids: int):
    targets = list(ids)
    expected = summed_rows(targets)
    assert day_sums(targets) == expected
    assert set(versions(targets)) >= {key[0] for key in expected}


def random_rows(target, imports, seed: int, urls: int = 12, days: int = 40):
    """Daily rows of ``urls`` pages, with unknown figures here and there, and a few rows covering a week."""
    rng = random.Random(seed)

    def maybe(value):
        return None if rng.random() < 0.15 else value

    rows = []
    for n in range(urls):
        url = f"https://acme.example/p{n}"
        for k in range(days):
            if rng.random() < 0.1:
                continue
            impressions = maybe(rng.choice([0, rng.randint(1, 5000)]))
            rows.append(UrlMetric(site_target=target, url=url, url_normalized=url,
                                  period_start=FIRST + timedelta(days=k), period_end=FIRST + timedelta(days=k),
                                  clicks=maybe(rng.randint(0, 300)), impressions=impressions,
                                  position=maybe(round(rng.uniform(1, 60), 3)),
                                  position_weight=maybe(float(impressions or 1)), source_import=rng.choice(imports)))
        if n % 4 == 0:
            start = FIRST + timedelta(days=rng.randint(0, days - 7))
            rows.append(UrlMetric(site_target=target, url=url, url_normalized=url, period_start=start,
                                  period_end=start + timedelta(days=6), clicks=rng.randint(0, 900),
                                  impressions=rng.randint(1, 9000), position=rng.uniform(1, 30),
                                  source_import=rng.choice(imports)))
    UrlMetric.objects.bulk_create(rows)


@pytest.fixture
def two_targets(target):
    """``target`` and a second target of its site, each with random rows from two imports."""
    french = SiteTargetFactory(site=target.site, url_prefix="https://acme.example/fr/")
    for seed, each in enumerate((target, french)):  # the same URLs in both, and a few in the second only
        random_rows(each, [ImportFactory(site_target=each, done=True) for _ in range(2)] + [None], seed,
                    urls=12 + 4 * seed)
    return target, french


# --- the day sums after every kind of write ---------------------------------------------------

def change_figures(target, french):
    UrlMetric.objects.filter(site_target=target, url_normalized__endswith="p1").update(clicks=7, position=None)
    UrlMetric.objects.filter(site_target=french, period_start__lt=FIRST + timedelta(days=5)).update(impressions=None)


def move_a_page_a_year_on(target, french):
    year = timedelta(days=365)
    UrlMetric.objects.filter(site_target=target, url_normalized__endswith="p2").update(
        period_start=F("period_start") + year, period_end=F("period_end") + year)


def link_pages(target, french):
    """map_reconcile's update: no figure changes, so no version moves either."""
    before = versions([target.pk, french.pk])
    page = Page.objects.create(site_target=target, url="https://acme.example/p3", url_normalized="https://acme.example/p3")
    assert UrlMetric.objects.filter(site_target=target, url_normalized=page.url).update(page=page)
    assert versions([target.pk, french.pk]) == before


def delete_an_import(target, french):
    UrlMetric.objects.filter(site_target=target).exclude(source_import=None).first().source_import.delete()


def delete_rows(target, french):
    UrlMetric.objects.filter(site_target=french, clicks__gt=150).delete()


def delete_a_target(target, french):
    deleted = french.pk
    cache.refresh(french, [Period(FIRST, FIRST + timedelta(days=6))])
    french.delete()
    assert day_sums([deleted]) == {}
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM imports_sitepage_url_sums WHERE site_target_id = %s", [deleted])
        assert cursor.fetchone()[0] == 0  # its precomputed top pages go with it


def truncate(target, french):
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the test's transaction has deferred FK checks pending
        cursor.execute("TRUNCATE imports_urlmetric")
    assert day_sums([target.pk, french.pk]) == {} and versions([target.pk, french.pk]) == {}


@pytest.mark.parametrize("write", [change_figures, move_a_page_a_year_on, link_pages, delete_an_import, delete_rows,
                                   delete_a_target, truncate])
def test_the_day_sums_are_the_rows_sums_after_every_kind_of_write(two_targets, write):
    ids = [target.pk for target in two_targets]
    assert_day_sums_match(*ids)
    write(*two_targets)
    assert_day_sums_match(*ids)


def test_an_import_updating_rows_moves_them_to_its_own_day_sums(target):
    first, second = (ImportFactory(site_target=target, done=True) for _ in range(2))

    def record(n: int, clicks: int | None, position: float | None = 4.0, impressions: int = 100):
        url = f"https://acme.example/p{n}"
        return (url, url, FIRST, FIRST, clicks, impressions, None, position,
                ingest.position_weight(position, impressions), 1)

    def upsert(imp, *records):
        return ingest.upsert(target.pk, imp.pk, {(r[1], r[2], r[3]): r for r in records})

    assert upsert(first, *(record(n, n) for n in range(6))) == (6, 0, 0)
    assert upsert(first, record(0, 5, None, 20)) == (0, 0, 1)  # the same import again: folded into its row
    assert upsert(second, record(1, 50), record(2, None), record(9, 9)) == (1, 2, 0)  # replaced: now the second's

    assert_day_sums_match(target.pk)
    rows = {key[3]: sums[0] for key, sums in day_sums([target.pk]).items()}
    assert rows == {first.pk: 4, second.pk: 3}


def test_the_migration_fills_the_day_sums_of_the_rows_already_there(two_targets):
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM imports_sitepage_day_sums; DELETE FROM imports_sitepage_versions")
        for statement in MIGRATION.FILL:
            cursor.execute(statement)
    assert_day_sums_match(*(target.pk for target in two_targets))


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_two_imports_into_one_target_at_once_keep_the_day_sums_exact(processes, target, media, tmp_path):
    header = ["Page", "Clicks", "Impressions", "CTR", "Position", "Date"]
    days = [f"2026-11-0{n}" for n in range(1, 5)]
    files = []
    for seed in (1, 2):  # the same keys, each file in an order of its own: every batch meets the other import's
        keys = [(n, day) for n in range(3000) for day in days]
        random.Random(seed).shuffle(keys)
        files.append(write_csv(tmp_path, f"export{seed}.csv", [header] + [
            [f"https://acme.example/p{n}", str(seed * n % 97), str(100 + n), "", f"{1 + n % 30},5", day]
            for n, day in keys]))
    imports = [ImportFactory(site_target=target, path=path) for path in files]
    with transaction.atomic(), connection.cursor() as cursor:
        # Both workers claim their import and then wait at their first write of metric rows: they write at once,
        # however slowly a busy machine starts the second.
        cursor.execute("LOCK TABLE imports_urlmetric IN SHARE MODE")
        workers = [processes(runjobs, MEDIA_ROOT=media, IMPORT_BATCH_SIZE=300) for _ in range(2)]

        def both_waiting():
            cursor.execute("SELECT count(*) FROM pg_locks WHERE relation = 'imports_urlmetric'::regclass AND NOT granted")
            return cursor.fetchone()[0] == 2

        wait_for(both_waiting, timeout=120, message="both imports waiting to write their first rows")

    wait_for(lambda: not Job.objects.filter(status__in=[JobStatus.QUEUED, JobStatus.RUNNING]).exists(),
             timeout=240, message="both imports and their map updates to finish")

    runs = Job.objects.filter(pk__in=[imp.job_id for imp in imports])
    assert {run.status for run in runs} == {JobStatus.DONE}
    assert max(run.started_at for run in runs) < min(run.finished_at for run in runs)  # they did run at once
    assert UrlMetric.objects.filter(site_target=target).count() == 3000 * len(days)
    assert_day_sums_match(target.pk)
    for worker in workers:
        assert "deadlock" not in worker.output()


# --- the precomputed top pages: read only while current ------------------------------------------

def the_page(client, site, **params):
    response = client.get(f"/imports/sites/{site.pk}/", params)
    assert response.status_code == 200
    return response


def clicks_shown(response) -> str:
    return next(row["current"] for row in response.context["totals"] if row["name"] == "clicks")


def queued_refreshes() -> list:
    return sorted(Job.objects.filter(type=cache.JOB_TYPE, status=JobStatus.QUEUED)
                  .values_list("payload__site_target_id", flat=True))


def recent(target, clicks: int, url: str = "https://acme.example/a", days_ago: int = 2):
    day = timezone.localdate() - timedelta(days=days_ago)
    return UrlMetricFactory(site_target=target, url=url, period_start=day, clicks=clicks)


def test_a_change_after_the_refresh_sends_the_page_back_to_the_rows_until_the_job_refreshes(client, member,
                                                                                            two_targets):
    target, french = two_targets
    recent(target, 10)
    first = the_page(client, target.site, period="28d")
    assert (first.context["precomputed"], queued_refreshes()) == (False, [target.pk, french.pk])
    the_page(client, target.site, period="28d")
    assert queued_refreshes() == [target.pk, french.pk]  # one queued per target

    run_burst()
    fresh = the_page(client, target.site, period="28d")
    assert fresh.context["precomputed"] is True and queued_refreshes() == []
    assert [row["url"] for row in fresh.context["pages"]] == [row["url"] for row in first.context["pages"]]

    recent(target, 5, url="https://acme.example/b")  # committed after the refresh
    changed = the_page(client, target.site, period="28d")
    assert changed.context["precomputed"] is False and queued_refreshes() == [target.pk]
    assert clicks_shown(changed) == "15"
    assert [row["url"] for row in changed.context["pages"]] == ["https://acme.example/a", "https://acme.example/b"]

    run_burst()
    again = the_page(client, target.site, period="28d")
    assert again.context["precomputed"] is True and clicks_shown(again) == "15"
    assert [row["url"] for row in again.context["pages"]] == [row["url"] for row in changed.context["pages"]]


def test_a_custom_period_is_summed_from_the_rows_and_queues_nothing(client, member, target):
    recent(target, 3)
    today = timezone.localdate()
    response = the_page(client, target.site, period="custom", **{"from": str(today - timedelta(days=9)),
                                                                  "to": str(today)})
    assert response.context["precomputed"] is False and queued_refreshes() == []
    assert clicks_shown(response) == "3"
    assert "added up from every row" in response.content.decode()


@pytest.mark.django_db(transaction=True)
def test_a_change_committed_while_the_refresh_reads_leaves_its_sums_unused(client, member, target):
    recent(target, 10)
    choice = the_page(client, target.site, period="7d").context["choice"]

    def change():
        try:
            recent(target, 90, url="https://acme.example/late")
        finally:
            connection.close()

    with figures.snapshot(writes=True):
        figures.newest_day([target.pk], timezone.localdate())  # the refresh's snapshot is taken
        writer = threading.Thread(target=change)
        writer.start()
        writer.join()
        cache.refresh(target, [choice.current])  # sums of the old snapshot, with its version

    response = the_page(client, target.site, period="7d")
    assert response.context["precomputed"] is False
    assert clicks_shown(response) == "100"
    assert "https://acme.example/late" in [row["url"] for row in response.context["pages"]]


def test_the_refresh_of_a_target_deleted_since_does_nothing(target):
    deleted = target.pk
    cache.refresh_later(target.site, [deleted])
    target.delete()
    run_burst()
    job = Job.objects.get(type=cache.JOB_TYPE)
    assert (job.status, job.report) == (JobStatus.DONE, {"site_target_id": deleted, "periods": []})


def test_the_refresh_precomputes_every_presets_period_for_the_site_and_for_the_target_alone(two_targets):
    target, french = two_targets
    today = timezone.localdate()
    recent(target, 1, days_ago=1)
    recent(french, 1, days_ago=4)

    done = cache.refresh(french)

    assert done == periods.preset_periods(today, [today - timedelta(days=1), today - timedelta(days=4)])
    for period in done:
        assert figures.stale_targets([french.pk], periods.Choice("custom", period, period.previous())) == []


# --- both paths give the same figures -----------------------------------------------------------

def same(a, b) -> bool:
    """Equal, floats to 12 significant digits: the two paths add the positions up in other orders."""
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=1e-12)
    if hasattr(a, "__dataclass_fields__"):
        return type(a) is type(b) and all(same(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.mark.parametrize(("start", "end"), [
    (FIRST + timedelta(days=20), FIRST + timedelta(days=39)),  # the rows' last 20 days against the 20 before
    (FIRST + timedelta(days=7), FIRST + timedelta(days=13)),  # a week: week-long rows cross its edges
    (FIRST + timedelta(days=33), FIRST + timedelta(days=33)),
    (FIRST + timedelta(days=60), FIRST + timedelta(days=70)),  # after the data
])
def test_the_precomputed_figures_are_the_rows_figures(monkeypatch, two_targets, start, end):
    target, french = two_targets
    targets = [target.pk, french.pk]
    choice = periods.Choice("custom", Period(start, end), Period(start, end).previous())
    for each in (target, french):
        cache.refresh(each, [choice.current])

    def read(precomputed: bool):
        monkeypatch.setattr(figures, "PRECOMPUTED", precomputed)
        with figures.snapshot():
            cached = not figures.stale_targets(targets, choice)
            found = {"figures": [figures.figures(t, choice) for t in (targets, [french.pk])]}
            for sort in (listing.sort_value(column, first) for column in listing.ORDERS for first in (True, False)):
                for search, size in (("", listing.PAGE_SIZE), ("p1", None), ("", 3)):
                    found[sort, search, size] = figures.top_pages(targets, choice, sort=sort, search=search,
                                                                  page_size=size, cached=cached)
        return cached, found

    (rows_cached, rows), (precomputed_cached, precomputed) = read(False), read(True)

    assert (rows_cached, precomputed_cached) == (False, True)
    assert rows.keys() == precomputed.keys()
    for key in rows:
        assert same(rows[key], precomputed[key]), key
