"""The site page's CSVs (pages, queries, devices, countries, days) downloaded with hostile imported texts: no cell a
spreadsheet would run as a formula (OWASP's CSV injection), while the numbers the code writes stay numbers."""

import csv
import io
from datetime import date

import pytest

from imports.dimension_models import DimensionMetric
from tests.imports import files
from tests.imports.test_dimension_metrics import TABLES, upload
from tests.insight.test_site_page import UrlMetricFactory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]

HOSTILE = [
    '=HYPERLINK("http://127.0.0.1/?leak="&B2,"open")',
    "+1+cmd|' /C calc'!A0",
    "@SUM(1+1)",
    "-2+3",
    "\t=1+1",
    "\r=1+1",
]
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
HEADER = ["clicks", "impressions", "ctr_percent", "position", "previous_clicks", "clicks_change_percent"]


@pytest.fixture
def target_domain():
    return "example.com"


def is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_every_cell_of_the_export_is_safe_and_the_numbers_stay_numbers(client, member, target, tmp_path):
    # The queries as a real import stores them: a Search Console export of February 2024, through the worker.
    queries = [["Top queries", "Clicks", "Impressions", "CTR", "Position"],
               *([text, 10 + n, 100, "10%", 2.0] for n, text in enumerate(HOSTILE))]
    upload(client, target, files.write_tables_zip(tmp_path, "hostile.zip", {**TABLES["en"], "Queries": queries}))
    assert set(DimensionMetric.objects.filter(dimension="query").values_list("key", flat=True)) >= set(HOSTILE) - {
        "\t=1+1", "\r=1+1"}  # the reader may strip the blanks around a cell; the rest is stored as it came
    # Pages whose stored URL is hostile (no real import writes one: the writer must not rely on that), and a fall
    # in clicks, so that the code writes negative numbers of its own.
    for n, text in enumerate(HOSTILE):
        UrlMetricFactory(site_target=target, url=text, period_start=date(2024, 2, 10), clicks=5)
        UrlMetricFactory(site_target=target, url=text, period_start=date(2024, 1, 10), clicks=100 + n)

    def table(name):
        response = client.get(f"/imports/sites/{target.site.pk}/", {
            "period": "custom", "from": "2024-02-01", "to": "2024-02-29", "format": "csv", "table": name})
        assert response.status_code == 200
        return list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"), newline="")))

    tables = {name: table(name) for name in ("pages", "queries", "devices", "countries", "days")}
    cells = [value for rows in tables.values() for row in rows for value in row]
    unsafe = [value for value in cells if value.startswith(FORMULA_STARTS) and not is_number(value)]
    assert unsafe == []
    assert tables["pages"][0] == ["page", *HEADER]
    assert tables["queries"][0] == ["query", *HEADER]
    pages = {row[0]: row[1:] for row in tables["pages"][1:]}
    queries = {row[0]: row[1:] for row in tables["queries"][1:]}
    assert {"'" + text for text in HOSTILE} <= pages.keys()
    assert {"'" + text for text in HOSTILE[:4]} <= queries.keys()
    assert pages["'-2+3"] == ["5", "10", "50.0", "5.0", "103", "-95.1"]  # a fall of the code's own: a number
    assert queries["'-2+3"] == ["13", "100", "13.0", "2.0", "", ""]
