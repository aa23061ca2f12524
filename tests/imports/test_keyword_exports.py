"""Files with several rows per URL and period: rank-tracker keyword exports, breakdowns, repeated rows.

Every such row is added to the first one of its URL and period, within a batch
(``ingest.fold``) and across batches (the upsert), and counted as a duplicate.
"""

import random
from datetime import date

import pytest

from imports import ingest
from imports.models import ImportStatus, UrlMetric
from jobs.models import Job
from tests.factories import ImportFactory, UserFactory
from tests.imports.files import write_csv
from tests.support.processes import run_burst

PREFIX = "https://shop.example/"
PERIOD = (date(2026, 11, 1), date(2026, 11, 30))
DAY = date(2026, 11, 1)
SEMRUSH = ["Keyword", "Position", "Previous position", "Search Volume", "Keyword Difficulty", "CPC", "URL",
           "Traffic", "Traffic (%)", "Timestamp"]


pytestmark = pytest.mark.usefixtures("media")


@pytest.fixture
def target_domain():
    return "shop.example"


def run_import(target, path, **options):
    imp = ImportFactory(site_target=target, path=path, **options)
    run_burst()
    imp.refresh_from_db()
    assert imp.status == ImportStatus.DONE, imp.error
    return imp, Job.objects.get(pk=imp.job_id).report


def semrush_export(tmp_path, urls=10, keywords=5, seed=1):
    """One row per keyword and URL, shuffled as a tracker sorts them (by keyword); returns (path, positions)."""
    rnd = random.Random(seed)
    positions = {f"{PREFIX}p{u}": [rnd.randint(1, 100) for _ in range(keywords)] for u in range(urls)}
    rows = [[f"keyword {u}-{k}", str(position), "12", "1900", "41", "0.85", url, "33", "0.4", "2026-11-30"]
            for u, (url, ranks) in enumerate(positions.items()) for k, position in enumerate(ranks)]
    rnd.shuffle(rows)
    return write_csv(tmp_path, "semrush.csv", [SEMRUSH, *rows]), positions


@pytest.mark.parametrize("batch_size", [5000, 7])
def test_a_semrush_keyword_export_is_one_metric_per_url_with_the_mean_position(target, tmp_path, settings,
                                                                                batch_size):
    settings.IMPORT_BATCH_SIZE = batch_size  # 7: a URL's keywords fall in several batches
    path, positions = semrush_export(tmp_path)

    imp, report = run_import(target, path, period=PERIOD)

    assert (imp.read, imp.inserted, imp.updated, imp.errors) == (50, 10, 0, 0)
    assert report["duplicates"] == 40
    assert report["notes"][ingest.KEYWORD_NOTE] == 40
    assert "position weighted by impressions (a plain mean without them)" in ingest.KEYWORD_NOTE
    stored = {m.url_normalized: m for m in UrlMetric.objects.filter(site_target=target)}
    assert set(stored) == set(positions)
    for url, ranks in positions.items():
        assert stored[url].position == pytest.approx(sum(ranks) / len(ranks)), url
        assert stored[url].source_rows == len(ranks)
        assert (stored[url].clicks, stored[url].impressions, stored[url].ctr) == (None, None, None)


def test_the_import_page_says_the_keyword_rows_were_added_up(target, tmp_path, client):
    client.force_login(UserFactory(org=target.site.org))
    path, _ = semrush_export(tmp_path)
    imp, _ = run_import(target, path, period=PERIOD)

    page = client.get(f"/imports/{imp.pk}/").content.decode()

    assert "keyword export: its rows are added up per URL and period" in page
    assert ">40<" in page  # how many rows were added to an earlier one


def test_importing_a_keyword_export_again_replaces_its_figures_instead_of_adding(target, tmp_path, settings):
    settings.IMPORT_BATCH_SIZE = 7
    path, positions = semrush_export(tmp_path)
    run_import(target, path, period=PERIOD)

    again, report = run_import(target, path, period=PERIOD)

    assert (again.inserted, again.updated, report["duplicates"]) == (0, 10, 40)
    for metric in UrlMetric.objects.filter(site_target=target):
        ranks = positions[metric.url_normalized]
        assert metric.position == pytest.approx(sum(ranks) / len(ranks))
        assert metric.source_rows == len(ranks) and metric.source_import_id == again.pk


@pytest.mark.parametrize("batch_size", [5000, 3])
def test_a_breakdown_by_query_adds_up_clicks_and_impressions_and_weights_position(target, tmp_path, settings,
                                                                                    batch_size):
    settings.IMPORT_BATCH_SIZE = batch_size
    header = ["Landing page", "Query", "Date", "Clicks", "Impressions", "CTR", "Position"]
    rows = [
        [PREFIX + "a", "shoes", "2026-11-01", "10", "100", "10%", "2"],
        [PREFIX + "b", "shoes", "2026-11-01", "1", "50", "2%", "9"],
        [PREFIX + "a", "red shoes", "2026-11-01", "5", "300", "1,67%", "6"],
        [PREFIX + "a", "shoes", "2026-11-02", "7", "70", "10%", "3"],
        [PREFIX + "a", "cheap shoes", "2026-11-01", "0", "600", "0%", "11"],
    ]

    imp, report = run_import(target, write_csv(tmp_path, "by-query.csv", [header, *rows]))

    assert (imp.read, imp.inserted, report["duplicates"]) == (5, 3, 2)
    assert report["notes"] == {ingest.KEYWORD_NOTE: 2}
    a = UrlMetric.objects.get(url_normalized=PREFIX + "a", period_start=DAY)
    assert (a.clicks, a.impressions, a.source_rows) == (15, 1000, 3)
    assert a.ctr == pytest.approx(15 / 1000)
    assert a.position == pytest.approx((2 * 100 + 6 * 300 + 11 * 600) / 1000)
    b = UrlMetric.objects.get(url_normalized=PREFIX + "b")
    assert (b.clicks, b.impressions, b.position, b.source_rows) == (1, 50, 9, 1)
    assert b.ctr == pytest.approx(0.02)  # a single row keeps the CTR the file gave


@pytest.mark.parametrize("batch_size", [5000, 2])
def test_repeated_rows_in_a_plain_export_are_counted_as_duplicates(target, tmp_path, settings, batch_size):
    settings.IMPORT_BATCH_SIZE = batch_size
    header = ["Page", "Clicks", "Impressions", "Position", "Date"]
    rows = [
        [PREFIX + "a", "4", "40", "3", "2026-11-01"],
        [PREFIX + "b", "1", "10", "5", "2026-11-01"],
        [PREFIX + "a", "6", "60", "8", "2026-11-01"],  # repeats a on the 1st
        [PREFIX + "a", "2", "20", "1", "2026-11-02"],  # another day: a row of its own
        ["https://elsewhere.example/x", "1", "1", "1", "2026-11-01"],
        [PREFIX + "b", "x", "10", "5", "2026-11-01"],  # a bad row is an error, not a duplicate
    ]

    imp, report = run_import(target, write_csv(tmp_path, "export.csv", [header, *rows]))

    assert (imp.read, imp.inserted, imp.updated, imp.skipped, imp.errors) == (6, 3, 0, 1, 1)
    assert report["duplicates"] == 1 and report["notes"] == {ingest.DUPLICATE_NOTE: 1}
    assert imp.read == imp.inserted + imp.updated + report["duplicates"] + imp.skipped + imp.errors
    a = UrlMetric.objects.get(url_normalized=PREFIX + "a", period_start=DAY)
    assert (a.clicks, a.impressions, a.source_rows) == (10, 100, 2)
    assert a.position == pytest.approx((3 * 40 + 8 * 60) / 100)


def record(clicks, impressions, ctr, position, rows=1, url="https://shop.example/a"):
    return (url, url, DAY, DAY, clicks, impressions, ctr, position, ingest.position_weight(position, impressions),
            rows)


@pytest.mark.parametrize("kept, row, expected", [
    # (clicks, impressions, ctr, position) -> the same four after folding
    ((10, 100, 0.1, 2.0), (5, 300, 0.0167, 6.0), (15, 400, 15 / 400, 5.0)),
    ((None, None, None, 4.0), (None, None, None, 8.0), (None, None, None, 6.0)),  # no impressions: a plain mean
    ((None, None, None, None), (None, None, None, 8.0), (None, None, None, 8.0)),  # a rank unknown on one side
    ((3, None, None, 4.0), (None, None, None, None), (3, None, None, 4.0)),
    ((0, 0, None, 3.0), (0, 0, None, 5.0), (0, 0, None, 4.0)),  # zero impressions: weight 1 each
    ((2, 50, 0.04, None), (1, 50, 0.02, None), (3, 100, 0.03, None)),
])
def test_fold(kept, row, expected):
    folded = ingest.fold(record(*kept), record(*row))
    clicks, impressions, ctr, position = folded[4:8]
    assert (clicks, impressions) == expected[:2]
    assert ctr == (pytest.approx(expected[2]) if expected[2] is not None else None)
    assert position == (pytest.approx(expected[3]) if expected[3] is not None else None)
    assert folded[9] == 2


def test_folding_is_the_same_in_any_grouping():
    """Three rows folded as (a+b)+c or a+(b+c) (another batch split) give one result."""
    a, b, c = record(10, 100, 0.1, 2.0), record(None, None, None, 9.0), record(5, 300, None, 6.0)
    left, right = ingest.fold(ingest.fold(a, b), c), ingest.fold(a, ingest.fold(b, c))
    assert left[4:6] == right[4:6] == (15, 400)
    assert left[7] == pytest.approx(right[7]) == pytest.approx((2 * 100 + 9 * 1 + 6 * 300) / 401)
    assert left[8] == right[8] == 401.0
