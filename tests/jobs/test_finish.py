"""A finish always lands: whatever a handler returns or raises, its job ends done or failed, never running.

And on_fail is part of the failure: it runs in the failing transaction, so a
lost connection cannot leave a failed job with its domain row untouched.
"""

import math
import signal

import pytest
from django.db import connection

from jobs import queue, storable, sweep
from jobs.models import Job, JobStatus
from tests.factories import JobFactory
from tests.support.processes import run_burst, runjobs, wait_for

pytestmark = pytest.mark.usefixtures("zombies_possible", "test_types")  # zombies: tests/conftest.py


def run_one(temporary_type, handler, **options) -> Job:
    temporary_type("test_finish_case", handler, **options)
    job = queue.enqueue("test_finish_case", org_id="demo")
    run_burst()
    return Job.objects.get(pk=job.id)


# -- what PostgreSQL refuses ------------------------------------------------------------

def test_a_report_with_nan_nul_and_lone_surrogates_is_cleaned_and_the_job_is_done(db, temporary_type):
    report = {"ratio": math.nan, "top": math.inf, "low": -math.inf, "name": "a\x00b", "key\x00": 1,
              "path": "caf\udce9", "rows": [1.5, math.nan], "ok": "fine"}

    job = run_one(temporary_type, lambda job: report)

    assert job.status == JobStatus.DONE, job.error
    assert job.report == {"ratio": None, "top": None, "low": None, "name": "a\ufffdb", "key\ufffd": 1,
                          "path": "caf\ufffd", "rows": [1.5, None], "ok": "fine"}


def test_a_report_nested_deeper_than_the_limit_is_cut_not_lost(db, temporary_type):
    deep = current = {}
    for _ in range(5000):  # deeper than json.dumps (and jsonb) would take
        current["next"] = current = {}

    job = run_one(temporary_type, lambda job: {"tree": deep})

    assert job.status == JobStatus.DONE, job.error
    depth, node = 0, job.report
    while isinstance(node, dict):
        node, depth = node.get("next", node.get("tree")), depth + 1
    assert node == "…" and depth <= storable.MAX_REPORT_DEPTH + 1


def test_an_absurdly_large_report_is_replaced_by_a_note_saying_so(db, temporary_type):
    job = run_one(temporary_type, lambda job: {"rows": ["x" * 1000] * 3000})

    assert job.status == JobStatus.DONE
    assert set(job.report) == {"report_dropped"}
    assert "over the 1000000 byte limit" in job.report["report_dropped"]


def test_an_error_with_a_nul_byte_fails_the_job_with_its_message(db, temporary_type):
    def raises(job):
        raise ValueError("bad byte \x00 in row 3")

    job = run_one(temporary_type, raises)

    assert job.status == JobStatus.FAILED
    assert job.error == "ValueError: bad byte \ufffd in row 3"
    assert "Traceback" in job.traceback and "\x00" not in job.traceback
    assert job.report is None


def test_an_absurdly_long_error_is_capped(db, temporary_type):
    def raises(job):
        raise RuntimeError("x" * 5_000_000)

    job = run_one(temporary_type, raises)

    assert job.status == JobStatus.FAILED
    assert job.error.startswith("RuntimeError: xxx") and len(job.error) == storable.MAX_ERROR_CHARS
    assert len(job.traceback) <= storable.MAX_TRACEBACK_CHARS


def test_an_exception_whose_message_cannot_be_read_still_fails_its_job(db, temporary_type):
    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("no message for you")

    def raises(job):
        raise Unprintable()

    job = run_one(temporary_type, raises)

    assert job.status == JobStatus.FAILED
    assert job.error.startswith("Unprintable: <the exception's message could not be read>")


@pytest.fixture
def refused_reports(transactional_db):
    """A CHECK constraint that makes PostgreSQL refuse any report holding the key "refuse"."""
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE jobs ADD CONSTRAINT test_refuse_report"
                       " CHECK (NOT coalesce(report ? 'refuse', false))")
    yield
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE jobs DROP CONSTRAINT IF EXISTS test_refuse_report")


def test_a_report_the_database_still_refuses_fails_the_job_saying_so(refused_reports, temporary_type):
    temporary_type("test_finish_case", lambda job: {"refuse": True})
    job = queue.enqueue("test_finish_case", org_id="demo")
    after = queue.enqueue("noop", org_id="demo")

    assert run_burst() == 2

    job = Job.objects.get(pk=job.id)
    assert job.status == JobStatus.FAILED
    assert job.error.startswith("the run's done result could not be stored: IntegrityError:")
    assert "test_refuse_report" in job.error
    assert Job.objects.get(pk=after.id).status == JobStatus.DONE


# -- BaseException from a handler -------------------------------------------------------

class Escape(BaseException):
    pass


@pytest.mark.parametrize("exc, error", [
    (SystemExit(3), "SystemExit: 3"),
    (KeyboardInterrupt(), "KeyboardInterrupt"),
    (Escape("out of here"), "Escape: out of here"),
])
def test_a_base_exception_from_a_handler_fails_its_job_and_the_worker_goes_on(db, temporary_type, exc, error):
    def raises(job):
        raise exc

    temporary_type("test_finish_case", raises)
    job = queue.enqueue("test_finish_case", org_id="demo")
    after = queue.enqueue("noop", org_id="demo")

    assert run_burst() == 2

    job = Job.objects.get(pk=job.id)
    assert (job.status, job.error) == (JobStatus.FAILED, error)
    assert Job.objects.get(pk=after.id).status == JobStatus.DONE


@pytest.mark.processes
def test_a_handler_calling_sys_exit_does_not_stop_a_real_worker(executions, processes):
    exiting = queue.enqueue("test_exit", org_id="demo")
    after = queue.enqueue("test_record", org_id="demo")
    worker = processes(runjobs)

    wait_for(lambda: Job.objects.get(pk=after.id).status == JobStatus.DONE, timeout=30,
             message="the job after the sys.exit() one to be done")
    assert Job.objects.get(pk=exiting.id).error == "SystemExit: 4"
    assert worker.alive()


@pytest.mark.processes
def test_a_second_sigterm_still_stops_a_real_worker_in_the_middle_of_a_job(executions, processes):
    job = queue.enqueue("test_record", org_id="demo", payload={"sleep": 60})
    worker = processes(runjobs)
    wait_for(lambda: executions("SELECT 1 FROM test_executions WHERE job_id = %s", [job.id]), timeout=30,
             message="the long job to start")

    worker.signal(signal.SIGTERM)
    wait_for(lambda: "SIGTERM received" in worker.output(), timeout=10, message="the first SIGTERM to be seen")
    worker.signal(signal.SIGTERM)

    assert worker.wait(timeout=10) == 1
    assert "second SIGTERM" in worker.output()
    assert Job.objects.get(pk=job.id).status == JobStatus.RUNNING  # left to the sweep, not failed


# -- on_fail, atomic with the failure ----------------------------------------------------

DOMAIN_DDL = "CREATE TABLE IF NOT EXISTS test_domain (job_id uuid PRIMARY KEY, status text NOT NULL)"


@pytest.fixture
def domain(transactional_db):
    """A stand-in for an app's row (an Import, an Attachment) that on_fail keeps coherent."""
    with connection.cursor() as cursor:
        cursor.execute(DOMAIN_DDL)
        cursor.execute("TRUNCATE test_domain")

    def status_of(job_id):
        with connection.cursor() as cursor:
            cursor.execute("SELECT status FROM test_domain WHERE job_id = %s", [job_id])
            row = cursor.fetchone()
        return row[0] if row else None

    return status_of


def mark_domain_failed(job):
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO test_domain VALUES (%s, 'failed')"
                       " ON CONFLICT (job_id) DO UPDATE SET status = 'failed'", [job.id])


def test_on_fail_cut_off_by_a_lost_connection_is_retried_with_the_failure(domain, temporary_type):
    """The connection dies inside on_fail: neither the failure nor on_fail may be lost."""
    calls = []

    def on_fail(job):
        calls.append(job.status)
        if len(calls) == 1:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        mark_domain_failed(job)

    def raises(job):
        raise ValueError("bad file")

    job = run_one(temporary_type, raises, on_fail=on_fail)

    assert (job.status, job.error) == (JobStatus.FAILED, "ValueError: bad file")
    assert domain(job.id) == "failed"
    assert calls == [JobStatus.FAILED, JobStatus.FAILED]  # it saw the job failed, in its own transaction


def test_on_fail_raising_undoes_its_own_writes_never_the_failure(domain, temporary_type):
    def on_fail(job):
        mark_domain_failed(job)
        raise RuntimeError("on_fail bug")

    def raises(job):
        raise ValueError("bad file")

    job = run_one(temporary_type, raises, on_fail=on_fail)

    assert job.status == JobStatus.FAILED
    assert domain(job.id) is None


def test_the_sweep_runs_on_fail_in_the_transaction_that_fails_the_zombie(domain, temporary_type):
    seen = []

    def on_fail(job):
        with connection.cursor() as cursor:
            cursor.execute("SELECT txid_current_if_assigned() IS NOT NULL")
            seen.append((job.status, connection.in_atomic_block, cursor.fetchone()[0]))
        mark_domain_failed(job)

    temporary_type("test_finish_case", lambda job: None, max_attempts=1, on_fail=on_fail)
    zombie = JobFactory(type="test_finish_case", stale=True, attempts=1)

    result = sweep.run_once()

    assert [j.id for j in result.failed] == [zombie.id]
    # on_fail ran with the failure already written but not yet committed: the same transaction.
    assert seen == [(JobStatus.FAILED, True, True)]
    assert domain(zombie.id) == "failed"
    assert Job.objects.get(pk=zombie.id).error == "max attempts exceeded"


def test_mark_failed_runs_on_fail_in_its_transaction(domain, temporary_type):
    seen = []

    def on_fail(job):
        seen.append((job.status, connection.in_atomic_block))
        mark_domain_failed(job)

    temporary_type("test_finish_case", lambda job: None, on_fail=on_fail)
    job = JobFactory(type="test_finish_case")

    assert queue.mark_failed([job.id], "not wanted") == [job.id]
    assert seen == [(JobStatus.FAILED, True)]
    assert domain(job.id) == "failed"


def test_progress_is_cleaned_like_a_report_and_capped(db):
    queue.enqueue("noop", org_id="demo")
    run = queue.claim()

    run.report_progress(done=1, rate=math.nan, note="row\x00 7")
    with pytest.raises(ValueError, match="over the 1000000 byte limit"):
        run.report_progress(rows=["x" * 1000] * 2000)

    progress = Job.objects.get(pk=run.id).progress
    assert (progress["done"], progress["rate"], progress["note"]) == (1, None, "row\ufffd 7")
    assert "rows" not in progress
