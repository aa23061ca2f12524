"""manage.py importfile: enqueues an import; --wait follows it on a real worker to its report."""

import io
import threading

import pytest
from django.core.management import CommandError, call_command
from django.core.management.base import OutputWrapper
from django.db import connection

from imports.cli import EXIT_NOT_QUEUED, Waiter, progress_line, reconnect_delay
from imports.models import Import, ImportOrigin, ImportStatus
from jobs.models import Job, JobStatus
from tests.factories import OrgFactory
from tests.imports import files
from tests.support.processes import runjobs, wait_for

CSV = (
    "Page,Clicks,Impressions,CTR,Position,Date\n"
    "https://acme.example/a,10,100,10%,1.5,2024-05-01\n"
    "https://acme.example/b,5,200,2.5%,7.1,2024-05-01\n"
    "https://acme.example/c,0,50,0%,12,2024-05-01\n"
)


pytestmark = pytest.mark.usefixtures("media")


@pytest.fixture
def csv_file(tmp_path):
    path = tmp_path / "Pages.csv"
    path.write_text(CSV)
    return path


def importfile(*args) -> str:
    out = io.StringIO()
    call_command("importfile", *[str(a) for a in args], stdout=out, stderr=io.StringIO())
    return out.getvalue()


def worker(processes, media):
    # The worker reads the stored file: it must share this test's MEDIA_ROOT.
    return processes(runjobs, MEDIA_ROOT=str(media))


HINT = "no progress for 12 s — is a worker running?"


@pytest.mark.parametrize("done, total, note, width, line", [
    (520, 1000, "", 80, "[#####.....] 52% 520/1000 rows"),
    (0, 3, "", 80, "[..........] 0% 0/3 rows"),
    (3, 3, "", 80, "[##########] 100% 3/3 rows"),
    (None, None, "", 80, "starting…"),
    (5, 0, "waiting for a worker…", 80, "waiting for a worker…"),
    (520, 1000, HINT, 80, f"[#####.....] 52% 520/1000 rows · {HINT}"),
    # Narrower: the bar shrinks, then goes, then the note is cut; never the last column.
    (520, 1000, "", 30, "[##...] 52% 520/1000 rows"),
    (520, 1000, "", 20, "52% 520/1000 rows"),
    (520, 1000, HINT, 40, "52% · no progress for 12 s — is a work…"),
    (123456, 999999, "database unavailable — retrying in 4 s", 40, "12% · database unavailable — retrying …"),
    (None, None, "queued for 15 s — is a worker running?", 30, "queued for 15 s — is a worke…"),
])
def test_progress_line(done, total, note, width, line):
    assert progress_line(done, total, note, width=width) == line
    assert len(line) < width


def test_reconnect_delays_double_up_to_a_cap():
    assert [reconnect_delay(n) for n in range(1, 8)] == [0.5, 1, 2, 4, 8, 10, 10]


def test_enqueues_the_import_and_prints_its_ids(target, csv_file, media):
    out = importfile(csv_file, "--target", target.pk)
    imp = Import.objects.get()
    assert (imp.org_id, imp.site_target, imp.origin, imp.status) == ("acme", target, ImportOrigin.UPLOAD,
                                                                      ImportStatus.QUEUED)
    assert imp.original_filename == "Pages.csv" and (media / imp.file.name).read_text() == CSV
    job = Job.objects.get()
    assert (job.type, job.status, imp.job) == ("import_csv", JobStatus.QUEUED, job)
    assert f"Import {imp.pk} queued as job {job.pk}" in out
    assert "manage.py runjobs" in out


def test_period_is_kept(target, csv_file):
    importfile(csv_file, "--target", target.pk, "--org", "acme", "--period-start", "2024-05-01",
               "--period-end", "2024-05-31")
    imp = Import.objects.get()
    assert (str(imp.period_start), str(imp.period_end)) == ("2024-05-01", "2024-05-31")


@pytest.mark.parametrize("args, message", [
    (["{dir}/missing.csv", "--target", "{target}"], "no such file: "),
    (["{dir}/notes.pdf", "--target", "{target}"], "cannot import 'notes.pdf': the file must be one of"),
    (["{csv}", "--target", "999999"], "no site target 999999"),
    (["{csv}", "--target", "{target}", "--org", "rival"], "no site target {target} in org 'rival'"),
    (["{csv}", "--target", "{target}", "--period-start", "2024-05-01"], "give both --period-start and --period-end"),
    (["{csv}", "--target", "{target}", "--period-start", "2024-05-02", "--period-end", "2024-05-01"],
     "--period-end is before --period-start"),
])
def test_errors_are_command_errors_and_create_nothing(target, csv_file, tmp_path, args, message):
    (tmp_path / "notes.pdf").write_bytes(b"%PDF")
    OrgFactory(id="rival")
    values = {"dir": tmp_path, "target": target.pk, "csv": csv_file}
    with pytest.raises(CommandError, match=message.format(**values).replace("(", r"\(")) as caught:
        importfile(*[a.format(**values) for a in args])
    assert caught.value.returncode == EXIT_NOT_QUEUED
    assert not Import.objects.exists() and not Job.objects.exists()


@pytest.mark.parametrize("name, data, message", [
    ("Pages.csv", b"Top pages,Clicks\nhttps://acme.example/a,3\n",
     "cannot import Pages.csv: the file has no Date column and does not say which period its figures cover "
     "(a Search Console “Pages” table, say): give it with --period-start and --period-end"),
    ("dump.csv", bytes(range(256)) * 40, "cannot import dump.csv: this is not a text or spreadsheet file"),
    ("nothing.csv", b"Foo,Bar\n1,2\n", "cannot import nothing.csv: no URL column: found headers 'Foo', 'Bar'"),
])
def test_a_file_the_worker_would_refuse_is_refused_before_queueing(target, tmp_path, media, name, data, message):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(CommandError) as caught:
        importfile(path, "--target", target.pk)
    assert str(caught.value).startswith(message) and caught.value.returncode == EXIT_NOT_QUEUED
    assert not Import.objects.exists() and not Job.objects.exists()
    assert not media.exists() or not any(p.is_file() for p in media.rglob("*"))


def test_sheet_and_date_order_are_kept(target, tmp_path):
    book = files.write_xlsx(tmp_path, "book.xlsx", {
        "Cover": [["ACME"]], "Data": [["URL", "Date"], ["https://acme.example/", "1/2/2026"]]})
    importfile(book, "--target", target.pk, "--sheet", "Data", "--date-order", "mdy")
    assert Import.objects.values_list("sheet", "date_order").get() == ("Data", "mdy")
    with pytest.raises(CommandError, match="the workbook has no sheet 'Dta': its sheets are 'Cover', 'Data'"):
        importfile(book, "--target", target.pk, "--sheet", "Dta")


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_wait_draws_progress_and_prints_the_final_report(target, csv_file, media, processes):
    worker(processes, media)
    out = importfile(csv_file, "--target", target.pk, "--wait")
    assert "[##########] 100% 3/3 rows" in out
    assert "read 3  inserted 3  updated 0  skipped 0  errors 0" in out
    assert Import.objects.get().status == ImportStatus.DONE


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_wait_says_when_no_worker_picks_the_job_up(target, csv_file, media, processes):
    importfile(csv_file, "--target", target.pk)
    out = io.StringIO()
    waiter = Waiter(Import.objects.get().job_id, OutputWrapper(out), interval=0.05, hint_after=0.3)
    finished = {}

    def follow():
        try:
            finished["job"] = waiter.run()
        finally:
            connection.close()  # this thread's own connection, or the test database cannot be dropped

    thread = threading.Thread(target=follow)
    thread.start()
    try:
        wait_for(lambda: "is a worker running?" in out.getvalue(), timeout=10, message="the no-worker hint")
        assert "waiting for a worker…" in out.getvalue()
        worker(processes, media)
    finally:
        thread.join(timeout=60)
    assert finished["job"].status == JobStatus.DONE


def test_dates_that_fit_both_orders_are_queued_with_a_warning(target, tmp_path):
    path = tmp_path / "monthly.csv"
    path.write_text("URL,Date\nhttps://acme.example/a,1/12/2026\n")
    assert "(such as 1/12/2026) fits both day first and month first" in importfile(path, "--target", target.pk)
    assert "--date-order" in importfile(path, "--target", target.pk)
    assert "fits both" not in importfile(path, "--target", target.pk, "--date-order", "dmy")
