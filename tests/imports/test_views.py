"""/imports/: upload, list, event log and detail — members of the org only."""

from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from imports import services
from imports.models import Import, ImportKind, ImportStatus
from imports.services import display_filename, kind_for
from jobs.models import Job, JobStatus
from tests.factories import ImportFactory, JobFactory, OrgFactory, SiteFactory, SiteTargetFactory, UserFactory
from tests.imports import files

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]

CSV = b"Page,Clicks,Impressions,CTR,Position,Date\nhttps://acme.example/a,1,10,10%,3.2,2024-05-01\n"


@pytest.fixture
def rival_target():
    return SiteTargetFactory(site=SiteFactory(org=OrgFactory(id="rival"), domain="rival.example"))


def upload(client, target_id, name="Pages.csv", content=CSV, **fields):
    data = {"file": SimpleUploadedFile(name, content, content_type="text/csv"), "site_target": target_id, **fields}
    return client.post("/imports/", data)


# --- access -------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/imports/", "/imports/1/"])
def test_anonymous_is_sent_to_the_login_page(client, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next={path}"


def test_login_page_logs_in_and_lands_on_imports(client, acme):
    UserFactory(username="ana", org=acme)
    assert client.get("/accounts/login/").status_code == 200
    response = client.post("/accounts/login/", {"username": "ana", "password": "pw-for-tests"})
    assert response.status_code == 302 and response["Location"] == "/imports/"


def test_user_without_an_org_is_told_so(client):
    client.force_login(UserFactory())
    response = client.get("/imports/")
    assert response.status_code == 403
    assert b"not a member of any organisation" in response.content


# --- upload -------------------------------------------------------------------

def test_upload_creates_the_import_and_its_queued_job_in_the_members_org(client, member, target, media):
    response = upload(client, target.pk, name="Pages.csv")
    assert response.status_code == 302 and response["Location"] == "/imports/"

    imp = Import.objects.get()
    assert (imp.org_id, imp.site_target, imp.kind, imp.origin, imp.status) == (
        "acme", target, "csv", "upload", ImportStatus.QUEUED)
    assert (imp.original_filename, imp.size, imp.created_by) == ("Pages.csv", len(CSV), member)
    assert len(imp.uid) == 32 and imp.file.name == f"imports/acme/{imp.uid}"
    assert (media / imp.file.name).read_bytes() == CSV

    job = Job.objects.get()
    assert imp.job == job
    assert (job.type, job.status, job.org_id) == ("import_csv", JobStatus.QUEUED, "acme")
    assert job.payload["import_id"] == imp.pk

    page = client.get("/imports/")
    assert "“Pages.csv” is queued" in page.content.decode()


def test_xlsx_is_an_excel_import_and_a_period_is_kept(client, member, target, tmp_path):
    book = files.write_xlsx(tmp_path, "Performance.xlsx", {"Pages": [["Page", "Clicks"], ["https://acme.example/", 3]]})
    upload(client, target.pk, name="Performance.xlsx", content=book.read_bytes(),
           period_start="2024-05-01", period_end="2024-05-31")
    imp = Import.objects.get()
    assert imp.kind == ImportKind.XLSX
    assert (str(imp.period_start), str(imp.period_end)) == ("2024-05-01", "2024-05-31")


def test_too_big_upload_is_refused_with_the_limit_and_nothing_is_created(client, member, target, settings, media):
    settings.IMPORT_MAX_UPLOAD_BYTES = 1024
    response = upload(client, target.pk, content=CSV * 100)
    assert response.status_code == 200
    assert "the largest file accepted is 1.0\xa0KB" in response.content.decode()
    assert not Import.objects.exists() and not Job.objects.exists()
    assert not media.exists() or not any(media.rglob("*"))


def test_a_far_too_big_upload_is_refused_before_its_body_is_read(member, target, settings, media):
    """413 before the CSRF check (which would read the body and spool the file to disk) even runs."""
    from django.test import Client

    settings.IMPORT_MAX_UPLOAD_BYTES = 1024
    client = Client(enforce_csrf_checks=True)  # no token: had the body been read, this would be a 403
    client.force_login(member)
    response = upload(client, target.pk, content=CSV * 5000)
    assert response.status_code == 413
    assert "the largest file accepted is 1.0\xa0KB" in response.content.decode()
    assert not Import.objects.exists() and not Job.objects.exists()


def test_wrong_extension_is_refused_and_nothing_is_created(client, member, target):
    response = upload(client, target.pk, name="report.pdf")
    assert response.status_code == 200
    assert "“report.pdf” is not a file we can import: use one of .csv, .tsv, .txt, .zip, .xlsx." in (
        response.content.decode())
    assert not Import.objects.exists() and not Job.objects.exists()


@pytest.mark.parametrize("period, message", [
    ({"period_start": "2024-05-01"}, "Give both dates of the period, or neither."),
    ({"period_start": "2024-05-31", "period_end": "2024-05-01"}, "The period ends before it starts."),
])
def test_period_must_be_whole_and_ordered(client, member, target, period, message):
    response = upload(client, target.pk, **period)
    assert message in response.content.decode()
    assert not Import.objects.exists()


def test_no_import_and_no_stored_file_when_the_job_cannot_be_queued(client, member, target, media, monkeypatch):
    def broken(imp):
        raise RuntimeError("queue down")

    monkeypatch.setattr(services, "enqueue_import", broken)
    with pytest.raises(RuntimeError, match="queue down"):
        upload(client, target.pk)
    assert not Import.objects.exists()
    assert not media.exists() or not any(p.is_file() for p in media.rglob("*"))


# --- tenancy ------------------------------------------------------------------

def test_target_choices_are_the_orgs_own(client, member, target, rival_target):
    response = client.get("/imports/")
    field = response.context["form"].fields["site_target"]
    assert list(field.queryset) == [target]
    assert "rival.example" not in response.content.decode()


def test_posting_another_orgs_target_is_rejected(client, member, target, rival_target):
    response = upload(client, rival_target.pk)
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert not Import.objects.exists() and not Job.objects.exists()


def test_another_orgs_import_is_404(client, member, target, rival_target):
    own = ImportFactory(site_target=target, filename="mine.csv")
    theirs = ImportFactory(site_target=rival_target, filename="theirs.csv")
    assert client.get(f"/imports/{own.pk}/").status_code == 200
    assert client.get(f"/imports/{theirs.pk}/").status_code == 404
    assert client.get("/imports/999999/").status_code == 404
    assert "theirs.csv" not in client.get("/imports/").content.decode()


# --- list, event log, detail ---------------------------------------------------

def test_empty_states(client, member, target):
    content = client.get("/imports/").content.decode()
    assert "No imports yet — upload a Search Console export above." in content
    assert "No site map updates yet" in content


def test_org_without_targets_is_told_where_to_add_one(client, member):
    content = client.get("/imports/").content.decode()
    assert "no site target yet" in content
    assert "Upload and import" not in content


def test_list_shows_counts_and_a_live_progress_bar(client, member, target):
    ImportFactory(site_target=target, filename="done.csv", done=True, read=1200, inserted=1000, updated=150,
                  skipped=40, errors=10)
    running = ImportFactory(site_target=target, filename="running.csv", running=True,
                            progress={"done": 520, "total": 1000, "counts": {"read": 520, "inserted": 500}}).job
    ImportFactory(site_target=target, filename="waiting.csv")

    content = client.get("/imports/").content.decode()
    for value in ("1,200", "1,000", "150", "40", "10"):
        assert f">{value}</td>" in content
    assert f'data-job-url="/jobs/{running.pk}"' in content
    assert 'aria-valuenow="52"' in content and "52% · 520 / 1,000 rows" in content
    assert 'data-count="inserted">500<' in content
    assert "Waiting for a worker…" in content
    assert content.count("data-job-url=") == 2  # the finished import has no live bar
    assert "imports/progress.js" in content


def test_event_log_lists_the_orgs_map_reconcile_jobs_newest_first(client, member, target):
    # created_at is the database's now(): the same for every row of this test's transaction.
    earlier = timezone.now() - timedelta(minutes=5)
    JobFactory(org_id="acme", type="map_reconcile", done=True, payload={"site_target_id": target.pk},
               report={"site_target_id": target.pk, "pages_created": 1234, "metrics_linked": 5678},
               created_at=earlier)
    JobFactory(org_id="acme", type="map_reconcile", failed=True, payload={"site_target_id": target.pk},
               error="OperationalError: deadlock detected")
    JobFactory(org_id="rival", type="map_reconcile", done=True, report={"pages_created": 999999})
    JobFactory(org_id="acme", type="noop", done=True, report={"pages_created": 888888})

    content = client.get("/imports/").content.decode()
    events = content[content.index('id="events"'):]
    assert "1,234" in events and "5,678" in events
    assert events.index("deadlock detected") < events.index("1,234")
    assert "999,999" not in events and "888,888" not in events


def test_detail_shows_the_report_with_skipped_reasons_and_error_samples(client, member, target):
    report = {"read": 5, "inserted": 2, "updated": 0, "skipped": 2, "errors": 1,
              "skipped_reasons": {"outside the site target": 2},
              "error_samples": [{"row": 4, "reason": "Clicks: 'abc' is not a number"}]}
    imp = ImportFactory(site_target=target, filename="Pages.csv", done=True, read=5, inserted=2, skipped=2, errors=1,
                        report=report)
    content = client.get(f"/imports/{imp.pk}/").content.decode()
    assert "outside the site target" in content
    assert "<td class=\"num\">4</td><td>Clicks: &#x27;abc&#x27; is not a number</td>" in content
    assert 'data-count="read">5<' in content and "data-job-url" not in content


def test_detail_of_a_failed_import_shows_why(client, member, target):
    imp = ImportFactory(site_target=target, failed=True, error="ImportRejected: no URL column; headers found: Foo, Bar")
    content = client.get(f"/imports/{imp.pk}/").content.decode()
    assert "Why it failed" in content
    assert "no URL column; headers found: Foo, Bar" in content and "ImportRejected" not in content


def test_detail_of_a_running_import_has_a_progress_bar_that_reloads_the_page(client, member, target):
    imp = ImportFactory(site_target=target, running=True, progress={"done": 1, "total": 4})
    job = imp.job
    content = client.get(f"/imports/{imp.pk}/").content.decode()
    assert f'data-job-url="/jobs/{job.pk}"' in content and "data-reload-when-finished" in content
    assert "25% · 1 / 4 rows" in content


# --- pure helpers ---------------------------------------------------------------

@pytest.mark.parametrize("name, shown", [
    ("Pages.csv", "Pages.csv"),
    ("C:\\Users\\ana\\Downloads\\Pages.csv", "Pages.csv"),
    ("../../etc/passwd.csv", "passwd.csv"),
    ("bad\x00name\x1b.csv", "badname.csv"),
    ("", "upload"),
    ("x" * 300 + ".xlsx", "x" * 249 + "….xlsx"),
])
def test_display_filename(name, shown):
    assert display_filename(name) == shown


@pytest.mark.parametrize("name, kind", [
    ("a.csv", "csv"), ("a.TSV", "csv"), ("a.txt", "csv"), ("bundle.zip", "zip"), ("a.xlsx", "xlsx"),
    ("a.xls", None), ("a.csv.exe", None), ("csv", None),
])
def test_kind_for(name, kind):
    assert kind_for(name) == kind


# --- admin -----------------------------------------------------------------------

def test_admin_lists_imports_and_metrics_read_only(client, target):
    from imports.models import UrlMetric

    imp = ImportFactory(site_target=target, filename="Pages.csv", done=True, read=3, inserted=3)
    job = imp.job
    UrlMetric.objects.create(site_target=target, url="https://acme.example/a", url_normalized="https://acme.example/a",
                             period_start="2024-05-01", period_end="2024-05-01", clicks=1, source_import=imp)
    client.force_login(UserFactory(is_staff=True, is_superuser=True))

    listing = client.get("/admin/imports/import/")
    assert listing.status_code == 200
    assert f'href="/admin/jobs/job/{job.pk}/change/"' in listing.content.decode()
    change = client.get(f"/admin/imports/import/{imp.pk}/change/")
    assert change.status_code == 200 and b'name="read"' not in change.content
    assert client.get("/admin/imports/import/add/").status_code == 403
    metrics = client.get(f"/admin/imports/urlmetric/?site_target__id__exact={target.pk}&period_start__gte=2024-05-01")
    assert metrics.status_code == 200 and b"https://acme.example/a" in metrics.content
