"""import_csv and map_reconcile through the real worker loop and database."""

import threading
from datetime import date

import pytest
from django.db import connection

from imports import reconcile
from imports.models import Import, ImportStatus, UrlMetric
from jobs.models import Job, JobStatus
from seoinsight.models import Page
from tests.factories import ImportFactory, SiteTargetFactory
from tests.imports.files import write_csv
from tests.support.processes import run_burst

pytestmark = pytest.mark.usefixtures("media")


@pytest.fixture
def target_domain():
    return "shop.example"


ROWS = [
    ["Page", "Clicks", "Impressions", "CTR", "Position", "Date"],
    ["https://shop.example/a", "10", "100", "10%", "3.5", "2026-11-01"],
    ["https://SHOP.example:443/b#top", "1 234", "20 000", "6,17 %", "7,25", "02/11/2026"],
    ["https://elsewhere.example/c", "5", "50", "10%", "1", "2026-11-01"],
    ["https://shop.example/d", "lots", "50", "10%", "1", "2026-11-01"],
    ["https://shop.example/a", "11", "110", "10%", "3.4", "2026-11-02"],
]


def test_an_export_becomes_metrics_with_a_report(target, tmp_path):
    imp = ImportFactory(site_target=target, path=write_csv(tmp_path, "export.csv", ROWS))
    run_burst()

    imp.refresh_from_db()
    assert imp.status == ImportStatus.DONE, imp.error
    assert (imp.read, imp.inserted, imp.updated, imp.skipped, imp.errors) == (5, 3, 0, 1, 1)
    report = Job.objects.get(pk=imp.job_id).report
    assert report["skipped_reasons"] == {"outside the site target": 1}
    assert report["error_samples"][0]["row"] == 4 and "lots" in report["error_samples"][0]["reason"]

    b = UrlMetric.objects.get(url_normalized="https://shop.example/b")
    assert (b.clicks, b.impressions, b.period_start, b.period_end) == (1234, 20000, date(2026, 11, 2), date(2026, 11, 2))
    assert b.ctr == pytest.approx(0.0617) and b.position == pytest.approx(7.25)
    assert b.source_import_id == imp.pk


def test_reimporting_the_same_export_updates_instead_of_doubling(target, tmp_path):
    path = write_csv(tmp_path, "export.csv", ROWS)
    first = ImportFactory(site_target=target, path=path)
    run_burst()
    second = ImportFactory(site_target=target, path=path)
    run_burst()

    second.refresh_from_db()
    assert (second.inserted, second.updated) == (0, 3)
    assert UrlMetric.objects.filter(site_target=target).count() == 3
    assert set(UrlMetric.objects.values_list("source_import_id", flat=True)) == {second.pk}
    assert first.pk != second.pk


def test_a_successful_import_enqueues_map_reconcile_which_links_pages(target, tmp_path):
    imp = ImportFactory(site_target=target, path=write_csv(tmp_path, "export.csv", ROWS))
    run_burst()  # the import, then the reconcile it queued

    reconcile_job = Job.objects.get(type="map_reconcile")
    assert reconcile_job.status == JobStatus.DONE
    assert reconcile_job.org_id == imp.org_id
    assert reconcile_job.report == {"site_target_id": target.pk, "pages_created": 2, "metrics_linked": 3}
    assert not UrlMetric.objects.filter(page__isnull=True).exists()
    assert sorted(Page.objects.filter(site_target=target).values_list("url_normalized", flat=True)) == [
        "https://shop.example/a", "https://shop.example/b"]


def test_a_file_without_period_uses_the_period_given_at_upload(target, tmp_path):
    rows = [["URL", "Clics"], ["https://shop.example/x", "3"]]
    imp = ImportFactory(site_target=target, path=write_csv(tmp_path, "pages.csv", rows, delimiter=";"),
                        period=(date(2026, 10, 1), date(2026, 10, 31)))
    run_burst()
    metric = UrlMetric.objects.get()
    assert (metric.period_start, metric.period_end, metric.clicks) == (date(2026, 10, 1), date(2026, 10, 31), 3)
    assert Import.objects.get(pk=imp.pk).status == ImportStatus.DONE


def test_a_file_that_cannot_be_an_import_fails_job_and_import_alike(target, tmp_path):
    rows = [["Foo", "Bar"], ["1", "2"]]
    imp = ImportFactory(site_target=target, path=write_csv(tmp_path, "wrong.csv", rows))
    run_burst()
    imp.refresh_from_db()
    job = Job.objects.get(pk=imp.job_id)
    assert job.status == JobStatus.FAILED and imp.status == ImportStatus.FAILED
    assert "no URL column" in job.error and "Foo" in job.error
    assert imp.error == job.error
    assert not UrlMetric.objects.exists()


def test_a_file_without_dates_nor_period_fails_with_its_reason(target, tmp_path):
    imp = ImportFactory(site_target=target,
                        path=write_csv(tmp_path, "pages.csv", [["URL", "Clicks"], ["https://shop.example/x", "3"]]))
    run_burst()
    imp.refresh_from_db()
    assert imp.status == ImportStatus.FAILED
    assert "no Date column and no period" in imp.error


def test_reconcile_is_idempotent(target):
    UrlMetric.objects.create(site_target=target, url="https://shop.example/a", url_normalized="https://shop.example/a",
                             period_start=date(2026, 1, 1), period_end=date(2026, 1, 1))
    assert reconcile.reconcile(target.pk)["pages_created"] == 1
    again = reconcile.reconcile(target.pk)
    assert (again["pages_created"], again["metrics_linked"]) == (0, 0)


def test_reconcile_runs_concurrently_without_duplicates_or_errors(transactional_db):
    target = SiteTargetFactory()
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO imports_urlmetric (site_target_id, url, url_normalized, period_start, period_end, updated_at)
            SELECT %s, 'https://t.example/p' || (g %% 2000), 'https://t.example/p' || (g %% 2000),
                   DATE '2026-01-01' + (g / 2000), DATE '2026-01-01' + (g / 2000), now()
            FROM generate_series(0, 9999) AS g
            """,
            [target.pk],
        )
    results, errors = [], []

    def run():
        try:
            results.append(reconcile.reconcile(target.pk))
        except Exception as exc:  # the assertion below reports it
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sum(r["pages_created"] for r in results) == 2000
    assert sum(r["metrics_linked"] for r in results) == 10000
    assert Page.objects.filter(site_target=target).count() == 2000
    assert not UrlMetric.objects.filter(page__isnull=True).exists()
