"""Replacements are visible (issue 36 §1.2): real imports through the upload form and the worker.

A Search Console pull of November (900 daily figures), then a workbook holding 600 of the same page-days:
the workbook's import records that it replaced 600 figures first read from the pull, and both imports'
pages say so, with a link; the site page's *Where these figures come from* says how many of each import's
rows still count, which add up to the rows summed for its totals. Deleting an import is not a replacement.
"""

from datetime import date, timedelta

import pytest
from django.db.models import Sum

from imports.models import Import, ImportReplacement, UrlMetric
from tests.factories import ImportFactory, OrgFactory, SiteTargetFactory
from tests.imports.files import write_csv, write_xlsx
from tests.imports.test_dimension_metrics import upload

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]

HEADER = ["Page", "Clicks", "Impressions", "CTR", "Position", "Date"]
NOVEMBER = [date(2026, 11, 1) + timedelta(days=n) for n in range(30)]


@pytest.fixture
def target_domain():
    return "shop.example"


def rows(pages: range, clicks: int) -> list[list]:
    return [[f"https://shop.example/p{n}", clicks + n, 100 + n, "", 3.5, day.isoformat()]
            for n in pages for day in NOVEMBER]


@pytest.fixture
def pull_then_workbook(client, member, target, tmp_path):
    pull = upload(client, target, write_csv(tmp_path, "pull.csv", [HEADER] + [[str(v) for v in row]
                                                                                for row in rows(range(30), 1)]))
    workbook = upload(client, target, write_xlsx(tmp_path, "edits.xlsx", {"Pages": [HEADER] + rows(range(20), 50)}))
    return pull, workbook


def text_of(response) -> str:
    assert response.status_code == 200
    return " ".join(response.content.decode().split())


def test_an_import_that_replaced_figures_says_whose_with_a_link(client, pull_then_workbook):
    pull, workbook = pull_then_workbook
    assert (pull.inserted, pull.updated) == (900, 0)
    assert (workbook.inserted, workbook.updated) == (0, 600)
    assert list(ImportReplacement.objects.values_list("source_import", "replaced_import", "figures")) == [
        (workbook.pk, pull.pk, 600)]

    page = text_of(client.get(f"/imports/{workbook.pk}/"))
    assert (f'Replaced 600 figures first read from <a href="/imports/{pull.pk}/">pull.csv</a>') in page
    page = text_of(client.get(f"/imports/{pull.pk}/"))
    assert f'600 of its figures replaced by <a href="/imports/{workbook.pk}/">edits.xlsx</a>' in page


def test_the_site_page_says_how_many_of_each_imports_rows_count(client, target, pull_then_workbook):
    pull, workbook = pull_then_workbook
    response = client.get(f"/imports/sites/{target.site_id}/", {"period": "custom", "from": "2026-11-01",
                                                                "to": "2026-11-30"})
    kept = {source["imp"].pk: source["kept"] for source in response.context["sources"]}
    assert kept == {pull.pk: "300 of 900 rows count: 600 replaced by a later import or deleted",
                    workbook.pk: "all 600 rows count"}
    assert "300 of 900 rows count" in text_of(response)
    # What the sources say adds up to what the totals sum: the rows themselves.
    held = UrlMetric.objects.filter(site_target=target)
    assert held.filter(source_import=pull).count() == 300 and held.filter(source_import=workbook).count() == 600
    clicks = next(row for row in response.context["totals"] if row["name"] == "clicks")["current"]
    assert clicks == f"{held.aggregate(n=Sum('clicks'))['n']:,}"


def test_a_deleted_import_is_not_a_replacement_and_is_said_deleted(client, pull_then_workbook):
    pull, workbook = pull_then_workbook
    pull.delete()  # its 300 remaining rows lose their import (SET NULL): nothing replaced them
    assert list(ImportReplacement.objects.values_list("source_import", "replaced_import", "figures")) == [
        (workbook.pk, None, 600)]
    assert "Replaced 600 figures first read from an import deleted since" in text_of(
        client.get(f"/imports/{workbook.pk}/"))


def test_rows_first_written_with_no_import_and_another_orgs_import_are_not_named(client, member, target, tmp_path):
    """Rows whose import is gone, replaced: counted as from an import deleted since. Another org's import is
    never named nor linked, only said to be another import."""
    url = "https://shop.example/p1"
    UrlMetric.objects.create(site_target=target, url=url, url_normalized=url, period_start=NOVEMBER[0],
                             period_end=NOVEMBER[0], clicks=1, impressions=2)
    imp = upload(client, target, write_csv(tmp_path, "again.csv", [HEADER, [url, "5", "50", "", "2", "2026-11-01"]]))
    assert list(ImportReplacement.objects.values_list("source_import", "replaced_import", "figures")) == [
        (imp.pk, None, 1)]

    secret = ImportFactory(site_target=SiteTargetFactory(site__org=OrgFactory()), done=True, filename="secret.csv")
    ImportReplacement.objects.create(source_import=imp, replaced_import=secret, figures=7)
    page = text_of(client.get(f"/imports/{imp.pk}/"))
    assert "Replaced 7 figures first read from another import" in page
    assert "secret.csv" not in page and f"/imports/{secret.pk}/" not in page
    assert client.get(f"/imports/{secret.pk}/").status_code == 404


def test_an_import_run_over_its_own_rows_replaces_nothing(client, member, target, tmp_path):
    path = write_csv(tmp_path, "pull.csv", [HEADER] + [[str(v) for v in row] for row in rows(range(3), 1)])
    first = upload(client, target, path)
    UrlMetric.objects.filter(source_import=first).update(clicks=0)  # figures changed, the import the same
    assert not ImportReplacement.objects.exists()
    assert Import.objects.count() == 1
