"""An import that imported nothing, or little, says so: its outcome, why, the hosts it skipped, where the file
looks like it belongs, and the one-click re-import there (issue 24 §2)."""

import importlib

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import IntegrityError, connection, transaction
from django.db.migrations import RunSQL
from django.test import Client

from imports import ingest
from imports.models import Import, ImportOrigin, ImportOutcome, ImportStatus, UrlMetric
from imports.outcomes import decide_outcome, outcome_reason, shown_status, weighted_hosts
from seoinsight import storage
from tests.factories import ImportFactory, OrgFactory, SiteFactory, SiteTargetFactory, UserFactory
from tests.imports.files import csv_text
from tests.support.processes import run_burst

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]

HEADER = ["Page", "Clicks", "Impressions", "CTR", "Position", "Date"]
OUTSIDE = "outside the site target"


def rows_on(host, paths, day="2026-11-01"):
    return [[f"https://{host}/{path}", "3", "30", "10%", "2.5", day] for path in paths]


def export(rows) -> bytes:
    return csv_text([HEADER, *rows]).encode()


@pytest.fixture
def client_b(acme):
    """A second client of the agency: its site (with the www alias) and the target its Search Console data goes to."""
    site = SiteFactory(org=acme, domain="client-b.example", aliases=["www.client-b.example"])
    return SiteTargetFactory(site=site, url_prefix="https://www.client-b.example/")


def upload(client, target, content, name="Pages.csv"):
    response = client.post("/imports/", {"file": SimpleUploadedFile(name, content, content_type="text/csv"),
                                         "site_target": target.pk})
    assert response.status_code == 302, response.content.decode()[:2000]
    run_burst()
    return Import.objects.filter(original_filename=name).latest("created_at")


# -- the decision, pure ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("read", "skipped", "errors", "outcome"), [
    (10, 0, 0, ImportOutcome.IMPORTED),
    (10, 5, 0, ImportOutcome.IMPORTED),  # half is not more than half
    (10, 3, 2, ImportOutcome.IMPORTED),
    (10, 6, 0, ImportOutcome.MOSTLY_SKIPPED),
    (10, 4, 2, ImportOutcome.MOSTLY_SKIPPED),  # bad rows were not imported either
    (10, 9, 0, ImportOutcome.MOSTLY_SKIPPED),
    (10, 10, 0, ImportOutcome.NOTHING_IMPORTED),
    (10, 7, 3, ImportOutcome.NOTHING_IMPORTED),
    (1, 0, 1, ImportOutcome.NOTHING_IMPORTED),
    (0, 0, 0, ImportOutcome.NOTHING_IMPORTED),  # a header and no data row
])
def test_decide_outcome(read, skipped, errors, outcome):
    assert decide_outcome(read=read, skipped=skipped, errors=errors) == outcome


@pytest.mark.parametrize(("status", "outcome", "shown"), [
    ("done", "imported", "done"), ("done", "", "done"), ("done", "mostly_skipped", "mostly_skipped"),
    ("done", "nothing_imported", "nothing_imported"), ("failed", "", "failed"), ("running", "", "running"),
])
def test_shown_status(status, outcome, shown):
    assert shown_status(status, outcome) == shown


@pytest.mark.parametrize(("outcome", "counts", "reasons", "sentence"), [
    ("imported", (10, 1, 0), {OUTSIDE: 1}, ""),
    ("nothing_imported", (0, 0, 0), {}, "The file has no data rows."),
    ("nothing_imported", (1, 1, 0), {OUTSIDE: 1}, "The row was not imported: 1 outside the site target."),
    ("nothing_imported", (5, 3, 2), {OUTSIDE: 3},
     "None of the 5 rows was imported: 3 outside the site target, 2 with errors."),
    ("mostly_skipped", (2000, 1500, 1), {OUTSIDE: 1500},
     "Only 499 of the 2,000 rows were imported: 1,500 outside the site target, 1 with an error."),
    ("mostly_skipped", (10, 7, 0), None, "Only 3 of the 10 rows were imported: 7 skipped."),  # report gone
])
def test_outcome_reason(outcome, counts, reasons, sentence):
    read, skipped, errors = counts
    assert outcome_reason(outcome, read=read, skipped=skipped, errors=errors, skipped_reasons=reasons) == sentence


def test_the_skipped_sample_is_bounded_and_weighs_hosts_by_rows():
    counts = ingest.Counts()
    for n in range(ingest.SKIPPED_HOSTS_KEPT + 10):
        counts.skip_outside(f"h{n}.example", f"https://h{n}.example/{'x' * 400}")
        counts.skip_outside("h0.example", "https://h0.example/again")
    assert len(counts.skipped_hosts) == ingest.SKIPPED_HOSTS_KEPT
    assert counts.skipped_hosts["h0.example"] == ingest.SKIPPED_HOSTS_KEPT + 11
    assert len(counts.skipped_urls) == ingest.SKIPPED_URLS_KEPT
    assert max(len(url) for url in counts.skipped_urls) == ingest.SKIPPED_URL_LENGTH
    assert counts.skipped == counts.skipped_reasons[OUTSIDE] == 2 * (ingest.SKIPPED_HOSTS_KEPT + 10)
    assert weighted_hosts({"a.example": 2_000_000, "b.example": 1}).count("b.example") == 1


# -- through the real import path -------------------------------------------------------------------------

def test_another_clients_file_is_nothing_imported_with_its_hosts_and_the_site_it_is_for(
        client, member, target, client_b):
    rows = rows_on("www.client-b.example", ["a", "b", "c", "d", "e", "f"]) + rows_on("cdn.elsewhere.example", ["x"])
    imp = upload(client, target, export(rows))

    assert (imp.status, imp.outcome) == (ImportStatus.DONE, ImportOutcome.NOTHING_IMPORTED)
    assert (imp.read, imp.inserted, imp.skipped) == (7, 0, 7)
    assert not UrlMetric.objects.exists()
    assert imp.job.report["outcome"] == "nothing_imported"
    assert imp.job.report["skipped_hosts"] == {"www.client-b.example": 6, "cdn.elsewhere.example": 1}

    page = client.get(f"/imports/{imp.pk}/").content.decode()
    assert 'class="badge nothing_imported"' in page and ">Nothing imported</span>" in page
    assert "None of the 7 rows was imported: 7 outside the site target." in page
    assert "<td>www.client-b.example</td><td class=\"num\">6</td>" in page
    assert page.count("<li><code>https://www.client-b.example/") == 5  # the first five URLs
    assert "This file looks like it is for client-b.example." in page
    assert f'name="site_target" value="{client_b.pk}"' in page
    listing = client.get("/imports/").content.decode()
    assert ">Nothing imported</span>" in listing and '"badge done" data-status' not in listing


def test_the_one_click_reimport_imports_the_same_file_into_the_suggested_target(client, member, target, client_b):
    imp = upload(client, target, export(rows_on("www.client-b.example", ["a", "b", "c"])))

    response = client.post(f"/imports/{imp.pk}/", {"site_target": client_b.pk})
    again = Import.objects.exclude(pk=imp.pk).get()
    assert response.status_code == 302 and response["Location"] == f"/imports/{again.pk}/"
    assert (again.site_target, again.reimport_of, again.status, again.created_by) == (
        client_b, imp, ImportStatus.QUEUED, member)
    assert (again.original_filename, again.size, again.sha256) == (imp.original_filename, imp.size, imp.sha256)
    assert again.file.name != imp.file.name and again.job.type == "import_csv"
    run_burst()

    again.refresh_from_db()
    assert (again.status, again.outcome, again.inserted) == (ImportStatus.DONE, ImportOutcome.IMPORTED, 3)
    assert UrlMetric.objects.filter(site_target=client_b, source_import=again).count() == 3
    old_page = client.get(f"/imports/{imp.pk}/").content.decode()
    assert f'<a href="/imports/{again.pk}/">import {again.pk}</a> into client-b.example' in old_page
    assert f'href="/imports/{imp.pk}/"' in client.get(f"/imports/{again.pk}/").content.decode()
    assert storage.is_intact(imp.file.path, imp.size, imp.sha256)  # the original stays as it was


def test_a_mostly_skipped_file_imports_what_it_can_and_warns(client, member, target, client_b):
    rows = rows_on("acme.example", ["a", "b", "c", "d"]) + rows_on("client-b.example", ["1", "2", "3", "4", "5", "6"])
    imp = upload(client, target, export(rows))

    assert (imp.status, imp.outcome, imp.inserted, imp.skipped) == (
        ImportStatus.DONE, ImportOutcome.MOSTLY_SKIPPED, 4, 6)
    page = client.get(f"/imports/{imp.pk}/").content.decode()
    assert ">Mostly skipped</span>" in page
    assert "Only 4 of the 10 rows were imported: 6 outside the site target." in page
    # client-b.example is the site's domain: the www target takes none of these URLs.
    assert "This file looks like it is for client-b.example." in page
    assert "client-b.example has no target that takes these URLs" in page
    assert "Only 4 of the 10 rows were imported" in client.get("/imports/").content.decode()


def test_hosts_of_no_site_of_the_org_are_said_so(client, member, target):
    imp = upload(client, target, export(rows_on("unknown.example", ["a", "b"]) + rows_on("acme.example", ["a"])))
    assert imp.outcome == ImportOutcome.MOSTLY_SKIPPED
    page = client.get(f"/imports/{imp.pk}/").content.decode()
    assert "None of these hosts is a site of your organisation" in page and 'name="site_target"' not in page


def test_a_file_without_data_rows_is_nothing_imported(client, member, target):
    imp = upload(client, target, export([]))
    assert (imp.status, imp.outcome, imp.read) == (ImportStatus.DONE, ImportOutcome.NOTHING_IMPORTED, 0)
    assert "The file has no data rows." in client.get(f"/imports/{imp.pk}/").content.decode()


def test_a_mailed_document_gets_its_outcome_too(target, client_b):
    """Mail intake creates its Imports through the same service and job (mailpoll.handlers)."""
    imp = ImportFactory(site_target=target, origin=ImportOrigin.EMAIL,
                        content=export(rows_on("www.client-b.example", ["a"])), filename="mailed.csv")
    run_burst()
    imp.refresh_from_db()
    assert (imp.origin, imp.status, imp.outcome) == ("email", ImportStatus.DONE, ImportOutcome.NOTHING_IMPORTED)


def test_the_sample_survives_batches(client, member, target, client_b, settings):
    settings.IMPORT_BATCH_SIZE = 2
    imp = upload(client, target, export(rows_on("www.client-b.example", ["a", "b", "c", "d", "e"])))
    assert imp.job.report["skipped_hosts"] == {"www.client-b.example": 5}
    assert len(imp.job.report["skipped_urls"]) == 5


# -- who may re-import, and what is refused -----------------------------------------------------------------

def test_another_orgs_import_or_target_is_a_404(client, member, target, client_b):
    imp = upload(client, target, export(rows_on("www.client-b.example", ["a"])))
    rival_target = SiteTargetFactory(site=SiteFactory(org=OrgFactory(id="rival"), domain="rival.example"))
    rival_import = ImportFactory(site_target=rival_target, done=True)

    assert client.post(f"/imports/{imp.pk}/", {"site_target": rival_target.pk}).status_code == 404
    assert client.post(f"/imports/{imp.pk}/", {"site_target": "x"}).status_code == 404
    assert client.post(f"/imports/{rival_import.pk}/", {"site_target": client_b.pk}).status_code == 404
    assert client.get(f"/imports/{rival_import.pk}/").status_code == 404
    assert Import.objects.count() == 2


def test_the_reimport_needs_the_csrf_token(member, target, client_b, client):
    imp = upload(client, target, export(rows_on("www.client-b.example", ["a"])))
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(member)
    assert strict.post(f"/imports/{imp.pk}/", {"site_target": client_b.pk}).status_code == 403
    assert Import.objects.count() == 1


@pytest.mark.parametrize(("damage", "message"), [
    ("same target", "The file was imported into this target already: choose another one."),
    ("not done", "Only a finished import can be imported again."),
    ("damaged", "The stored file is damaged: upload the file again."),
    ("missing", "The stored file is missing: upload the file again."),
])
def test_a_reimport_that_cannot_be_done_says_why_and_creates_nothing(client, member, target, client_b, damage,
                                                                      message):
    imp = upload(client, target, export(rows_on("www.client-b.example", ["a"])))
    chosen = target if damage == "same target" else client_b
    if damage == "not done":
        imp = ImportFactory(site_target=target, running=True)
    elif damage == "damaged":
        with open(imp.file.path, "r+b") as stored:
            stored.write(b"X")
    elif damage == "missing":
        imp.file.delete(save=False)
    before = Import.objects.count()

    response = client.post(f"/imports/{imp.pk}/", {"site_target": chosen.pk}, follow=True)
    assert message in response.content.decode()
    assert Import.objects.count() == before


def test_a_second_click_makes_no_second_import(client, member, target, client_b):
    imp = upload(client, target, export(rows_on("www.client-b.example", ["a"])))
    first = client.post(f"/imports/{imp.pk}/", {"site_target": client_b.pk})
    again = Import.objects.get(reimport_of=imp)
    assert first["Location"] == f"/imports/{again.pk}/"

    second = client.post(f"/imports/{imp.pk}/", {"site_target": client_b.pk}, follow=True)
    assert (f"This file was imported into client-b.example · https://www.client-b.example/ already "
            f"(import {again.pk}).") in second.content.decode()
    assert Import.objects.filter(reimport_of=imp).count() == 1
    # The database holds it too, whoever would write a second one.
    with pytest.raises(IntegrityError, match="import_reimport_once_per_target"), transaction.atomic():
        Import.objects.create(org_id=imp.org_id, site_target=client_b, kind=imp.kind, uid="x" * 32, reimport_of=imp)


def test_the_form_still_judges_the_file_for_the_new_target(client, member, target, client_b, settings):
    imp = upload(client, target, export(rows_on("www.client-b.example", ["a"])))
    settings.IMPORT_MAX_UPLOAD_BYTES = 10
    response = client.post(f"/imports/{imp.pk}/", {"site_target": client_b.pk}, follow=True)
    assert "the largest file accepted is 10\xa0bytes" in response.content.decode()
    assert Import.objects.count() == 1


# -- the database and the admin ----------------------------------------------------------------------------

def test_the_migration_gives_earlier_imports_the_outcome_decide_outcome_gives(target):
    """Migration 0005's backfill, run again on imports done without an outcome: the same rule, in SQL."""
    cases = [(10, 0, 0), (10, 5, 0), (10, 4, 2), (10, 6, 0), (10, 10, 0), (10, 7, 3), (0, 0, 0), (1, 0, 1)]
    done = [ImportFactory(site_target=target, done=True, read=read, skipped=skipped, errors=errors)
            for read, skipped, errors in cases]
    old_zip = ImportFactory(site_target=target, filename="Old Export.ZIP", content=b"PK")
    Import.objects.filter(pk=old_zip.pk).update(kind="csv")  # how a .zip was recorded before
    queued = ImportFactory(site_target=target)

    migration = importlib.import_module("imports.migrations.0005_import_outcome").Migration
    (backfill,) = [operation for operation in migration.operations if isinstance(operation, RunSQL)]
    with connection.cursor() as cursor:
        for statement in backfill.sql:
            cursor.execute(statement)
    assert [Import.objects.get(pk=imp.pk).outcome for imp in done] == [
        decide_outcome(read=read, skipped=skipped, errors=errors) for read, skipped, errors in cases]
    assert (Import.objects.get(pk=old_zip.pk).kind, Import.objects.get(pk=queued.pk).outcome) == ("zip", "")


@pytest.mark.parametrize(("status", "outcome"), [("done", "partly"), ("queued", "imported"), ("failed", "imported")])
def test_the_database_refuses_an_outcome_that_is_not_one_or_not_of_a_done_import(target, status, outcome):
    imp = ImportFactory(site_target=target)
    with pytest.raises(IntegrityError, match="import_outcome_when_done"), transaction.atomic():
        Import.objects.filter(pk=imp.pk).update(status=status, outcome=outcome)


def test_the_admin_marks_the_outcome(client, target, client_b):
    imp = ImportFactory(site_target=target, content=export(rows_on("www.client-b.example", ["a"])))
    run_burst()
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    listing = client.get("/admin/imports/import/").content.decode()
    assert '<span style="color: #c62828; font-weight: 600">Nothing imported</span>' in listing
    filtered = client.get("/admin/imports/import/?outcome__exact=nothing_imported").content.decode()
    assert f"/admin/imports/import/{imp.pk}/change/" in filtered
