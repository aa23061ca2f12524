"""A Search Console export's Queries, Devices and Countries tables are stored beside its Pages rows,
and the site page's top queries add them up per period."""

from datetime import date

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import IntegrityError, transaction
from django.urls import reverse

from imports import ingest
from imports.dimension_models import DimensionMetric
from imports.models import Import, ImportStatus, UrlMetric
from imports.reports import what_was_read
from insight.sitepage import dimensions
from seoinsight.periods import Choice, Period
from tests.factories import SiteFactory, SiteTargetFactory
from tests.imports import files
from tests.support.processes import run_burst

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]

FEBRUARY = (date(2024, 2, 1), date(2024, 2, 29))

TABLES = {
    "en": {
        "Pages": [["Top pages", "Clicks", "Impressions", "CTR", "Position"],
                  ["https://example.com/", 120, 3400, "3.53%", 4.2]],
        "Queries": [["Top queries", "Clicks", "Impressions", "CTR", "Position"],
                    ["seo audit", "1,204", "30,100", "4%", "3.5"],
                    ["seo", 7, 90, "7.78%", 11.5]],
        "Devices": [["Device", "Clicks", "Impressions", "CTR", "Position"],
                    ["Mobile", 80, 2000, "4%", 4.1], ["Desktop", 40, 1400, "2.86%", 4.4]],
        "Countries": [["Country", "Clicks", "Impressions", "CTR", "Position"],
                      ["France", 100, 3000, "3.33%", 4], ["Belgium", 20, 400, "5%", 5.5]],
        "Filters": [["Filter", "Value"], ["Search type", "Web"], ["Date", "2024-02-01 - 2024-02-29"]],
    },
    "fr": {
        "Pages": [["Pages les plus populaires", "Clics", "Impressions", "CTR", "Position"],
                  ["https://example.com/", 120, 3400, "3,53 %", "4,2"]],
        "Requêtes": [["Requêtes les plus fréquentes", "Clics", "Impressions", "CTR", "Position"],
                     ["audit seo", "1 204", "30 100", "4 %", "3,5"],
                     ["seo", 7, 90, "7,78 %", "11,5"]],
        "Appareils": [["Appareil", "Clics", "Impressions", "CTR", "Position"],
                      ["Mobile", 80, 2000, "4 %", "4,1"], ["Ordinateur", 40, 1400, "2,86 %", "4,4"]],
        "Pays": [["Pays", "Clics", "Impressions", "CTR", "Position"],
                 ["France", 100, 3000, "3,33 %", 4], ["Belgique", 20, 400, "5 %", "5,5"]],
        "Filtres": [["Filtre", "Valeur"], ["Type de recherche", "Web"], ["Date", "1 févr. 2024 - 29 févr. 2024"]],
    },
}


@pytest.fixture
def target_domain():
    return "example.com"


def write_export(tmp_path, lang: str, as_zip: bool, tables=None, name=None):
    tables = tables or TABLES[lang]
    if as_zip:
        return files.write_tables_zip(tmp_path, name or f"{lang}.zip", tables)
    return files.write_xlsx(tmp_path, name or f"{lang}.xlsx", tables)


def upload(client, target, path) -> Import:
    response = client.post("/imports/", {"file": SimpleUploadedFile(path.name, path.read_bytes()),
                                         "site_target": target.pk})
    assert response.status_code == 302, response.content.decode()[:2000]
    run_burst()
    imp = Import.objects.filter(original_filename=path.name).latest("pk")
    assert imp.status == ImportStatus.DONE, imp.error
    return imp


def stored(target) -> set[tuple]:
    """The target's dimension rows, CTR to four decimals."""
    return {(*row[:6], round(row[6], 4), row[7]) for row in DimensionMetric.objects.filter(site_target=target)
            .values_list("dimension", "key", "period_start", "period_end", "clicks", "impressions", "ctr", "position")}


@pytest.mark.parametrize("as_zip", [True, False], ids=["zip", "xlsx"])
@pytest.mark.parametrize(("lang", "query", "desktop", "belgium"), [
    ("en", "seo audit", "Desktop", "Belgium"),
    ("fr", "audit seo", "Ordinateur", "Belgique"),
])
def test_the_three_dimensions_are_stored_for_the_exports_period(client, member, target, tmp_path, as_zip, lang,
                                                                 query, desktop, belgium):
    imp = upload(client, target, write_export(tmp_path, lang, as_zip))
    rows = stored(target)
    assert rows == {
        ("query", query, *FEBRUARY, 1204, 30100, 0.04, 3.5),
        ("query", "seo", *FEBRUARY, 7, 90, 0.0778, 11.5),
        ("device", "Mobile", *FEBRUARY, 80, 2000, 0.04, 4.1),
        ("device", desktop, *FEBRUARY, 40, 1400, 0.0286, 4.4),
        ("country", "France", *FEBRUARY, 100, 3000, 0.0333, 4.0),
        ("country", belgium, *FEBRUARY, 20, 400, 0.05, 5.5),
    }
    assert set(DimensionMetric.objects.values_list("source_import", flat=True)) == {imp.pk}
    # The Pages counts are the Pages table's alone; the other tables are reported apart.
    assert (imp.read, imp.inserted) == (1, 1)
    assert UrlMetric.objects.filter(site_target=target).count() == 1
    assert "Queries: 2 rows, Devices: 2, Countries: 2." in what_was_read(imp.job.report)
    page = client.get(f"/imports/{imp.pk}/").content.decode()
    assert "Queries: 2 rows, Devices: 2, Countries: 2." in page


def test_a_reimport_updates_the_rows_instead_of_adding_them(client, member, target, tmp_path):
    upload(client, target, write_export(tmp_path, "en", True, name="first.zip"))
    tables = {**TABLES["en"], "Queries": [["Top queries", "Clicks", "Impressions"], ["seo audit", 1300, 31000],
                                          ["seo", 8, 95], ["new query", 1, 10]]}
    second = upload(client, target, write_export(tmp_path, "en", True, tables, name="second.zip"))
    queries = {key: (clicks, impressions, source) for key, clicks, impressions, source in DimensionMetric.objects.filter(
        site_target=target, dimension="query").values_list("key", "clicks", "impressions", "source_import")}
    assert queries == {"seo audit": (1300, 31000, second.pk), "seo": (8, 95, second.pk),
                       "new query": (1, 10, second.pk)}
    assert DimensionMetric.objects.count() == 3 + 2 + 2
    assert set(DimensionMetric.objects.values_list("source_import", flat=True)) == {second.pk}


def test_an_oversized_dimension_is_cut_with_a_note(client, member, target, tmp_path, monkeypatch):
    monkeypatch.setattr(ingest, "DIMENSION_ROWS_LIMIT", 3)
    tables = {**TABLES["en"], "Queries": [["Top queries", "Clicks"], *([f"query {n}", n] for n in range(5))]}
    imp = upload(client, target, write_export(tmp_path, "en", True, tables))
    assert set(DimensionMetric.objects.filter(dimension="query").values_list("key", flat=True)) == {
        "query 0", "query 1", "query 2"}
    lines = what_was_read(imp.job.report)
    assert "Queries: 3 rows, Devices: 2, Countries: 2." in lines
    assert "Queries.csv has more than 3 rows: only the first 3 were read (a Search Console export has 1,000 at most)." \
        in lines
    assert imp.inserted == 1  # the Pages rows are imported all the same


def test_bad_rows_are_counted_and_the_rest_stored(client, member, target, tmp_path):
    tables = {**TABLES["en"], "Devices": [["Device", "Clicks", "Impressions"], ["Mobile", "many", 2000],
                                          ["", 1, 2], ["Tablet", 3, 30], ["Tablet", 4, 40]]}
    imp = upload(client, target, write_export(tmp_path, "en", False, tables))
    assert set(DimensionMetric.objects.filter(dimension="device").values_list("key", "clicks")) == {("Tablet", 3)}
    entry = next(e for e in imp.job.report["dimensions"] if e["dimension"] == "device")
    assert (entry["read"], entry["stored"], entry["errors"]) == (4, 1, 3)
    assert "the sheet 'Devices': 3 bad rows not stored (row 1: clicks 'many' is not a number; row 2: missing device; " \
           "row 4: device 'Tablet' repeats an earlier row)." in what_was_read(imp.job.report)


def test_an_unreadable_dimension_table_is_noted_not_fatal(client, member, target, tmp_path):
    tables = {**TABLES["en"], "Countries": [["Country", "Share"], ["France", "most"]]}
    imp = upload(client, target, write_export(tmp_path, "en", True, tables))
    assert not DimensionMetric.objects.filter(dimension="country").exists()
    assert "Countries.csv not stored: Countries.csv has no Clicks, Impressions, CTR or Position column." in (
        what_was_read(imp.job.report))


def test_the_database_refuses_an_unknown_dimension(target):
    with pytest.raises(IntegrityError), transaction.atomic():
        DimensionMetric.objects.create(site_target=target, dimension="page", key="x", period_start=FEBRUARY[0],
                                       period_end=FEBRUARY[1])


# Top queries: March 2024 against February 2024 (29 days before it ends on the 29th: the previous period of
# 2024-03-01..2024-03-29).
MARCH = Choice("custom", Period(date(2024, 3, 1), date(2024, 3, 29)), Period(date(2024, 2, 1), date(2024, 2, 29)))


def top_queries(site_id, targets, choice, **more):
    return dimensions.table(site_id, targets, choice, "query", **more)


def metric(target, key, period, clicks, impressions, position, dimension="query"):
    return DimensionMetric.objects.create(site_target=target, dimension=dimension, key=key, period_start=period[0],
                                          period_end=period[1], clicks=clicks, impressions=impressions,
                                          ctr=clicks / impressions if impressions else None, position=position)


def test_top_queries_add_up_the_sites_targets_and_compare_with_the_previous_period(target):
    other_target = SiteTargetFactory(site=target.site, url_prefix="https://example.com/blog/")
    march_1, march_2 = (date(2024, 3, 1), date(2024, 3, 14)), (date(2024, 3, 15), date(2024, 3, 29))
    metric(target, "seo", march_1, 30, 600, 2.0)
    metric(other_target, "seo", march_2, 10, 400, 5.0)
    metric(target, "seo", FEBRUARY, 20, 500, 3.0)
    metric(target, "audit", march_1, 50, 5000, 8.0)
    metric(target, "new", march_2, 5, 0, 1.0)  # no impressions: its position counts once, its CTR is unknown
    metric(target, "gone", FEBRUARY, 99, 999, 1.0)  # only before: not a top query now
    metric(target, "straddling", (date(2024, 2, 20), date(2024, 3, 10)), 500, 900, 1.0)  # in neither period
    metric(target, "Mobile", march_1, 900, 9000, 1.0, dimension="device")

    found, total = top_queries(target.site_id, [target.pk, other_target.pk], MARCH)
    assert total == 3
    assert [row[:6] for row in found] == [
        ("audit", 50, 5000, 0.01, 8.0, None),
        # CTR 40/1000; position (2 × 600 + 5 × 400) / 1000 = 3.2; clicks +100 % on 20.
        ("seo", 40, 1000, 0.04, pytest.approx(3.2), 20),
        ("new", 5, 0, None, 1.0, None),
    ]
    assert found[1].change == 1.0
    assert [q.key for q in top_queries(target.site_id, [target.pk, other_target.pk], MARCH, page_size=1)[0]] == [
        "audit"]
    assert [q.key for q in top_queries(target.site_id, [other_target.pk], MARCH)[0]] == ["seo"]


def test_top_queries_only_read_the_sites_own_targets(target):
    """A target id of another org's site, passed with this site, brings nothing: the site decides."""
    stranger = SiteTargetFactory(site=SiteFactory(domain="other.example"))
    metric(target, "ours", (date(2024, 3, 1), date(2024, 3, 29)), 1, 10, 1.0)
    metric(stranger, "theirs", (date(2024, 3, 1), date(2024, 3, 29)), 100, 1000, 1.0)
    assert [q.key for q in top_queries(target.site_id, [target.pk, stranger.pk], MARCH)[0]] == ["ours"]
    assert top_queries(target.site_id, [stranger.pk], MARCH) == ([], 0)
    assert [q.key for q in top_queries(stranger.site_id, [stranger.pk], MARCH)[0]] == ["theirs"]


def test_the_site_page_shows_the_top_queries_and_its_csv_lists_them(client, member, target):
    metric(target, "seo audit", (date(2024, 3, 1), date(2024, 3, 1)), 7, 70, 2.0)
    url = reverse("insight:site", args=[target.site_id])
    page = client.get(url, {"period": "custom", "from": "2024-03-01", "to": "2024-03-07"}).content.decode()
    assert "seo audit" in page and "data-no-dimension-rows" not in page
    csv_text = client.get(url, {"period": "custom", "from": "2024-03-01", "to": "2024-03-07",
                                "format": "csv", "table": "queries"}).content.decode("utf-8-sig")
    assert "seo audit,7,70" in csv_text
