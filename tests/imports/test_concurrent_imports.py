"""Several imports into one target at once, on real worker processes.

Files share their URLs in different orders, so two batches of different imports
write the same natural keys at the same moment; map_reconcile runs alongside.
"""

import random
import threading

import pytest
from django.db import connection

from imports.models import Import, ImportStatus, UrlMetric
from jobs.models import Job, JobStatus
from tests.factories import ImportFactory
from tests.imports.files import write_csv
from tests.support.processes import runjobs, wait_for

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

URLS = 4000
DAYS = ("2026-11-01", "2026-11-02")
HEADER = ["Page", "Clicks", "Impressions", "CTR", "Position", "Date"]


@pytest.fixture
def target_domain():
    return "shop.example"


def shuffled_export(tmp_path, name: str, seed: int):
    """Every URL on every day, in an order of its own."""
    keys = [(n, day) for n in range(URLS) for day in DAYS]
    random.Random(seed).shuffle(keys)
    rows = [HEADER] + [[f"https://shop.example/p{n}", str(seed), "100", "5%", "2,5", day] for n, day in keys]
    return write_csv(tmp_path, name, rows)


def finished(imports):
    statuses = set(Import.objects.filter(pk__in=[imp.pk for imp in imports]).values_list("status", flat=True))
    return statuses <= {ImportStatus.DONE, ImportStatus.FAILED}


def test_overlapping_imports_in_different_orders_all_succeed_and_every_row_gets_its_page(processes, target, media,
                                                                                        tmp_path):
    imports = [ImportFactory(site_target=target, path=shuffled_export(tmp_path, f"export{seed}.csv", seed))
               for seed in range(6)]
    env = {"MEDIA_ROOT": media, "IMPORT_BATCH_SIZE": 500}
    workers = [processes(runjobs, **env) for _ in range(3)]

    wait_for(lambda: finished(imports), timeout=240, message="the six imports to finish")
    wait_for(lambda: not Job.objects.filter(type="map_reconcile", status__in=[JobStatus.QUEUED, JobStatus.RUNNING])
             .exists(), timeout=60, message="map_reconcile to catch up")

    errors = {imp.pk: imp.error for imp in Import.objects.filter(pk__in=[i.pk for i in imports])
              if imp.status != ImportStatus.DONE}
    assert errors == {}
    assert UrlMetric.objects.filter(site_target=target).count() == URLS * len(DAYS)
    assert not UrlMetric.objects.filter(site_target=target, page__isnull=True).exists()
    assert not Job.objects.filter(status=JobStatus.FAILED).exists()
    for worker in workers:
        assert "deadlock" not in worker.output()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM seoinsight_page WHERE site_target_id = %s", [target.pk])
        assert cursor.fetchone()[0] == URLS


def waiting_for_a_lock(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
        return bool(row and row[0])


def upserting_backend() -> int | None:
    """The backend pid of the worker whose upsert is in flight in this database."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' "
                       "AND query LIKE %s AND pid <> pg_backend_pid()", ["%INSERT INTO imports_urlmetric%"])
        row = cursor.fetchone()
        return row[0] if row else None


def test_a_deadlock_rolls_the_batch_back_and_runs_it_again(processes, target, media, tmp_path):
    """A real deadlock, made on purpose: the worker's batch is its victim, and is simply run again.

    Rows a < m < z exist. ``hold_m`` keeps the upsert (which locks in key order)
    waiting on m while it holds a; ``hold_z`` holds z and then asks for a.
    When m is let go, the upsert asks for z: a cycle, which the worker's backend
    detects (``hold_z`` has a deadlock_timeout of an hour) and breaks by
    rolling back its own batch.
    """
    import psycopg

    from tests.support.processes import database_url

    urls = [f"https://shop.example/{name}" for name in ("a", "m", "z")]
    for url in urls:
        UrlMetric.objects.create(site_target=target, url=url, url_normalized=url, period_start="2026-11-01",
                                 period_end="2026-11-01", clicks=1)
    rows = [HEADER] + [[url, "7", "70", "10%", "3", "2026-11-01"] for url in reversed(urls)]
    imp = ImportFactory(site_target=target, path=write_csv(tmp_path, "export.csv", rows))

    def lock(conn, url):
        conn.execute("SELECT id FROM imports_urlmetric WHERE url_normalized = %s FOR UPDATE", [url])

    with psycopg.connect(database_url()) as hold_m, psycopg.connect(database_url()) as hold_z:
        hold_z.execute("SET deadlock_timeout = '1h'")
        lock(hold_m, urls[1])
        lock(hold_z, urls[2])
        worker = processes(runjobs, MEDIA_ROOT=media)
        backend = wait_for(upserting_backend, timeout=90, message="the import's upsert")
        wait_for(lambda: waiting_for_a_lock(backend), timeout=30, message="the upsert to wait for m")

        asking = threading.Thread(target=lock, args=(hold_z, urls[0]))
        asking.start()
        wait_for(lambda: waiting_for_a_lock(hold_z.info.backend_pid), timeout=30, message="z's holder to wait for a")
        hold_m.commit()  # the upsert moves on to z: deadlock
        asking.join(timeout=60)
        assert not asking.is_alive(), "the worker's backend did not break the deadlock"
        hold_z.commit()

    wait_for(lambda: Import.objects.get(pk=imp.pk).status in (ImportStatus.DONE, ImportStatus.FAILED), timeout=60,
             message="the import to end")
    imp.refresh_from_db()
    assert imp.status == ImportStatus.DONE, imp.error
    assert (imp.read, imp.inserted, imp.updated, imp.errors) == (3, 0, 3, 0)
    assert set(UrlMetric.objects.filter(site_target=target).values_list("clicks", flat=True)) == {7}
    assert f"job={imp.job_id} rows 1 to 3 rolled back by a deadlock (try 1/5)" in worker.output()
