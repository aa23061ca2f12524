"""A worker killed mid-import: the next one resumes from the checkpoint, counts identical to a clean run."""


import pytest

from imports.models import Import, ImportStatus, UrlMetric
from jobs import queue
from jobs.models import Job, JobStatus
from tests.factories import ImportFactory, SiteTargetFactory
from tests.imports.files import write_csv
from tests.support.processes import run_burst, runjobs, wait_for

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

ROWS = 30_000


@pytest.fixture
def target_domain():
    return "shop.example"


def export_rows():
    rows = [["Page", "Clicks", "Impressions", "CTR", "Position", "Date"]]
    for n in range(ROWS):
        if n % 1000 == 7:
            rows.append([f"https://shop.example/p{n}", "n/a", "1", "1%", "1", "2026-11-01"])  # a bad row
        elif n % 1000 == 8:
            rows.append([f"https://other.example/p{n}", "1", "1", "1%", "1", "2026-11-01"])  # out of scope
        else:
            # every URL twice (two dates), and a repeated row every 500 (an update within the file)
            rows.append([f"https://shop.example/p{n // 2}", str(n), "100", "5%", "2,5",
                         f"2026-11-0{1 + n % 2}" if n % 500 else "2026-11-01"])
    return rows


def counts(imp):
    imp.refresh_from_db()
    return imp.read, imp.inserted, imp.updated, imp.skipped, imp.errors


def test_kill_9_mid_import_resumes_with_identical_counts(processes, media, tmp_path):
    path = write_csv(tmp_path, "big.csv", export_rows())

    # The reference: the same file imported cleanly into another target, in-process.
    clean_target = SiteTargetFactory(url_prefix="https://shop.example/", site__domain="shop.example")
    clean = ImportFactory(site_target=clean_target, path=path)
    run_burst()  # the import and its map_reconcile, so the victim starts on the import
    assert Import.objects.get(pk=clean.pk).status == ImportStatus.DONE

    target = SiteTargetFactory(url_prefix="https://shop.example/", site__domain="shop.example", site__org__id="org-r")
    imp = ImportFactory(site_target=target, path=path)
    env = {"MEDIA_ROOT": media, "IMPORT_BATCH_SIZE": 500}
    victim = processes(runjobs, **env)

    def checkpoint():
        progress = Job.objects.get(pk=imp.job_id).progress or {}
        return progress.get("done", 0)

    wait_for(lambda: checkpoint() >= 5000, timeout=60, message="the import to pass row 5000")
    victim.kill9()
    done_at_kill = checkpoint()
    assert done_at_kill < ROWS, "the import finished before the kill: make the file bigger"

    rescuer = processes(runjobs, **env)
    # The Import is marked done by the handler, its job by the worker just after: wait for both.
    wait_for(lambda: Import.objects.get(pk=imp.pk).status == ImportStatus.DONE
             and Job.objects.get(pk=imp.job_id).status == JobStatus.DONE, timeout=90,
             message="the resumed import to finish")
    # Its map_reconcile too: a worker stopped in the middle of it holds the test's teardown (its flush) up.
    wait_for(lambda: reconciled(target), timeout=90, message="the resumed import's map_reconcile to finish")

    job = Job.objects.get(pk=imp.job_id)
    assert job.attempts == 2
    assert f"import={imp.pk} resuming after row" in rescuer.output()
    assert counts(imp) == counts(clean)
    assert UrlMetric.objects.filter(site_target=target).count() == UrlMetric.objects.filter(
        site_target=clean_target).count()
    assert job.report == Job.objects.get(pk=clean.job_id).report


def unlinked(target):
    return UrlMetric.objects.filter(site_target=target, page__isnull=True).count()


def reconciled(target):
    return Job.objects.filter(type="map_reconcile", payload__site_target_id=target.pk, status=JobStatus.DONE).exists()


def test_an_import_failed_by_the_operator_midway_still_gets_its_rows_linked(processes, target, media, tmp_path):
    imp = ImportFactory(site_target=target, path=write_csv(tmp_path, "big.csv", export_rows()))
    processes(runjobs, MEDIA_ROOT=media, IMPORT_BATCH_SIZE=500)

    wait_for(lambda: (Job.objects.get(pk=imp.job_id).progress or {}).get("done", 0) >= 2000, timeout=60,
             message="the import to pass row 2000")
    assert queue.mark_failed([imp.job_id], "stopped by the operator") == [imp.job_id]

    wait_for(lambda: reconciled(target), timeout=60, message="a map_reconcile of the failed import's rows")
    assert Import.objects.get(pk=imp.pk).status == ImportStatus.FAILED
    assert UrlMetric.objects.filter(source_import=imp).exists()
    assert unlinked(target) == 0


def test_an_import_that_exhausts_its_attempts_still_gets_its_rows_linked(processes, target, media, tmp_path):
    """Three workers killed mid-import: the sweep fails it for good, and what it wrote is linked all the same."""
    imp = ImportFactory(site_target=target, path=write_csv(tmp_path, "big.csv", export_rows() + export_rows()[1:]))
    env = {"MEDIA_ROOT": media, "IMPORT_BATCH_SIZE": 500}

    def checkpoint():
        return (Job.objects.get(pk=imp.job_id).progress or {}).get("done", 0)

    for attempt in (1, 2, 3):
        reached = checkpoint()
        victim = processes(runjobs, **env)
        wait_for(lambda attempt=attempt, reached=reached: Job.objects.get(pk=imp.job_id).attempts == attempt
                 and checkpoint() > reached,
                 timeout=60, message=f"attempt {attempt} to commit a batch")
        victim.kill9()
    assert Import.objects.get(pk=imp.pk).status == ImportStatus.RUNNING

    processes(runjobs, **env)  # its sweep fails the job: no attempts left
    wait_for(lambda: reconciled(target), timeout=60, message="a map_reconcile of the failed import's rows")
    job = Job.objects.get(pk=imp.job_id)
    assert job.status == JobStatus.FAILED and "max attempts" in job.error
    assert Import.objects.get(pk=imp.pk).status == ImportStatus.FAILED
    assert unlinked(target) == 0
