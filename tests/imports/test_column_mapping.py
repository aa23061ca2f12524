"""Unknown column headers: refused at upload, mapped once by an operator, remembered for the org."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils.html import escape

from imports.formats.headers import apply_mapping, mapping_problem, signature
from imports.models import ColumnMapping, Import, ImportStatus
from imports.reports import what_was_read
from tests.factories import OrgFactory, SiteFactory, SiteTargetFactory, UserFactory
from tests.support.processes import run_burst

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]

LANDING = (b"Landing Page URL,Sessions,Impr.,Date\n"
           b"https://acme.example/a,3,40,2026-10-01\nhttps://acme.example/b,5,70,2026-10-01\n")
ADRESSE = b"Adresse;Statut;Clics\nhttps://acme.example/a;200;7\n"
LANDING_MAPPING = {"url": "Landing Page URL", "clicks": "Sessions", "impressions": "Impr.", "date": "Date"}


def upload(client, target, name, content, **fields):
    return client.post("/imports/", {"file": SimpleUploadedFile(name, content), "site_target": target.pk, **fields})


def map_columns(client, response, **mapping):
    return client.post(response["Location"], mapping)


@pytest.mark.parametrize(("headers", "mapping", "problem"), [
    (("A", "B"), {"url": "A", "clicks": "B"}, ""),
    (("A", "B"), {"clicks": "B"}, "choose the column that holds the URL"),
    (("A", "B"), {"url": "A", "clicks": "A"}, "URL and clicks both name the column 'A': a column holds one field"),
    (("A", "B"), {"url": "C"}, "the file has no column 'C'"),
    (("A", "B"), {"url": "A", "keyword": "B"}, "not a field a column can be mapped to: keyword"),
])
def test_mapping_problem(headers, mapping, problem):
    assert mapping_problem(headers, mapping) == problem


@pytest.mark.parametrize(("headers", "mapping", "columns"), [
    (("Adresse", "Clics"), {"url": "adresse", "clicks": "CLICS"}, {"url": 0, "clicks": 1}),
    (("X", "X", "Y"), {"url": "x"}, {"url": 0}),
    (("X",), {"url": "X", "clicks": "gone"}, {"url": 0}),
])
def test_apply_mapping(headers, mapping, columns):
    assert apply_mapping(headers, mapping) == columns


def test_the_signature_ignores_order_case_and_accents_not_names():
    assert signature(("Adresse", "Clics")) == signature(("CLICS", "adresse"))
    assert signature(("Adresse", "Clics")) != signature(("Adresse", "Clicks"))


def test_a_refused_file_is_mapped_then_imported_from_the_stored_copy(client, member, target):
    response = upload(client, target, "landing.csv", LANDING)
    assert response.status_code == 302 and "/imports/map/" in response["Location"]
    page = client.get(response["Location"]).content.decode()
    assert "Landing Page URL" in page and "https://acme.example/b" in page
    assert not Import.objects.exists()

    assert map_columns(client, response, url="Landing Page URL", clicks="Sessions", impressions="Impr.",
                       date="Date").status_code == 302
    saved = ColumnMapping.objects.get()
    assert (saved.org_id, saved.mapping, saved.created_by) == (target.site.org_id, LANDING_MAPPING, member)
    imp = Import.objects.get()
    assert imp.sha256 and imp.created_by == member


@pytest.mark.parametrize(("mapping", "message"), [
    ({"url": "Adresse", "clicks": "Adresse"}, "URL and clicks both name the column"),
    ({"clicks": "Clics"}, "Choose the column that holds the URL."),
])
def test_a_mapping_that_cannot_read_the_file_is_refused(client, member, target, mapping, message):
    response = upload(client, target, "sf.csv", ADRESSE, period_start="2026-10-01", period_end="2026-10-31")
    page = map_columns(client, response, **mapping)
    assert page.status_code == 200 and message in page.content.decode()
    assert not ColumnMapping.objects.exists() and not Import.objects.exists()


def test_the_next_file_with_the_same_headers_is_imported_without_asking(client, member, target):
    first = upload(client, target, "landing.csv", LANDING)
    map_columns(client, first, **LANDING_MAPPING)
    second = upload(client, target, "landing-2.csv", LANDING.replace(b"/a,", b"/c,"))
    assert second.status_code == 302 and second["Location"] == "/imports/"
    assert Import.objects.count() == 2
    assert "saved mapping of" in client.get("/imports/").content.decode()
    assert ColumnMapping.objects.get().used_at is not None


def test_another_org_does_not_get_the_mapping(client, member, target):
    map_columns(client, upload(client, target, "landing.csv", LANDING), **LANDING_MAPPING)
    other = OrgFactory(id="other")
    other_target = SiteTargetFactory(site=SiteFactory(org=other, domain="acme.example"),
                                     url_prefix="https://acme.example/")
    client.force_login(UserFactory(username="bo", org=other))
    response = upload(client, other_target, "landing.csv", LANDING)
    assert "/imports/map/" in response["Location"]
    assert Import.objects.count() == 1


def test_another_orgs_pending_file_is_a_404(client, member, target):
    response = upload(client, target, "landing.csv", LANDING)
    other = OrgFactory(id="other")
    client.force_login(UserFactory(username="bo", org=other))
    assert client.get(response["Location"]).status_code == 404


def test_the_worker_reads_the_file_with_the_mapping(client, member, target):
    map_columns(client, upload(client, target, "landing.csv", LANDING), **LANDING_MAPPING)
    run_burst(max_jobs=1)
    imp = Import.objects.get()
    assert imp.status == ImportStatus.DONE, imp.error
    assert sorted(imp.metrics.values_list("url", "clicks", "impressions")) == [
        ("https://acme.example/a", 3, 40), ("https://acme.example/b", 5, 70)]


def test_the_import_s_report_names_the_mapping_that_read_it(client, member, target):
    map_columns(client, upload(client, target, "landing.csv", LANDING), **LANDING_MAPPING)
    upload(client, target, "known.csv", b"URL,Clicks,Date\nhttps://acme.example/k,1,2026-10-01\n")
    run_burst(max_jobs=2)
    saved = ColumnMapping.objects.get()
    mapped, known = Import.objects.order_by("created_at")
    said = f"Columns mapped by the org's saved mapping of {saved.created_at:%Y-%m-%d}"
    assert mapped.job.report["source"]["mapped_by"] == {"id": saved.pk, "saved_on": f"{saved.created_at:%Y-%m-%d}"}
    assert any(line.startswith(said) for line in what_was_read(mapped.job.report))
    assert escape(said) in client.get(f"/imports/{mapped.pk}/").content.decode()
    # Headers the importer recognises on its own: no mapping read them, and the report says none.
    assert known.status == ImportStatus.DONE, known.error
    assert "mapped_by" not in known.job.report["source"]
    assert not any("saved mapping" in line for line in what_was_read(known.job.report))


def test_importfile_and_the_worker_use_the_org_s_saved_mapping(target, tmp_path):
    import io

    from django.core.management import CommandError, call_command

    from imports import column_mapping

    path = tmp_path / "landing.csv"
    path.write_bytes(LANDING)
    with pytest.raises(CommandError):  # no mapping yet: refused before anything is queued
        call_command("importfile", str(path), "--target", str(target.pk), stdout=io.StringIO(), stderr=io.StringIO())
    assert not Import.objects.exists()

    column_mapping.save(org_id=target.site.org_id, headers=("Landing Page URL", "Sessions", "Impr.", "Date"),
                        mapping=LANDING_MAPPING)
    call_command("importfile", str(path), "--target", str(target.pk), stdout=io.StringIO(), stderr=io.StringIO())
    run_burst(max_jobs=1)
    imp = Import.objects.get()
    assert imp.status == ImportStatus.DONE, imp.error
    assert imp.metrics.count() == 2


def test_the_mapping_page_shows_only_what_a_bounded_look_reads(client, member, target, settings):
    # Rows of 30 KB: the page's sample stops at the look (IMPORT_UPLOAD_CHECK_BYTES), headers still shown.
    rows = b"".join(b"R%d-" % n + b"x" * 30_000 + b",1,2026-10-01\n" for n in range(1, 6))
    response = upload(client, target, "long.csv", b"Landing Page URL,Sessions,Date\n" + rows)
    assert response.status_code == 302 and "/imports/map/" in response["Location"]
    settings.IMPORT_UPLOAD_CHECK_BYTES = 150_000
    page = client.get(response["Location"]).content.decode()
    assert "Landing Page URL" in page and "R1-xxx" in page
    assert "R5-xxx" not in page
