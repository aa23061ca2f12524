"""The site page's CSVs, one table each, as a spreadsheet reads them: parsed back with the csv module, every
number compared with SUM() over the raw rows, numbers as plain numbers, UTF-8 with a byte order mark."""

import csv
import io
import re
from datetime import date, timedelta

import pytest
from django.db.models import F, Sum

from imports.dimension_models import DimensionMetric
from imports.models import UrlMetric
from insight.models import Annotation
from tests.insight.test_site_page import UrlMetricFactory

pytestmark = pytest.mark.django_db

START, END = date(2026, 5, 1), date(2026, 5, 7)
PREVIOUS_START, PREVIOUS_END = date(2026, 4, 24), date(2026, 4, 30)
SHOWN = {"period": "custom", "from": "2026-05-01", "to": "2026-05-07"}
NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?")
FORMULA = "=cmd|' /C calc'!A0"
FIGURES = ["clicks", "impressions", "ctr_percent", "position"]


@pytest.fixture
def data(target):
    pages = [f"https://acme.example/{name}" for name in ("a", "b", "c")] + [FORMULA]
    for n, url in enumerate(pages):
        for d in range(7):
            UrlMetricFactory(site_target=target, url=url, period_start=START + timedelta(days=d),
                             clicks=n * 10 + d, impressions=1000 + 37 * n + d, position=1.5 + n + d / 10)
            UrlMetricFactory(site_target=target, url=url, period_start=PREVIOUS_START + timedelta(days=d),
                             clicks=n * 7 + 3, impressions=900, position=4.0)
    month = (date(2026, 5, 1), date(2026, 5, 7))
    for dimension, keys in (("query", ["seo audit", FORMULA, "-2+3", "chaussures été"]),
                            ("device", ["Mobile", "Desktop"]), ("country", ["France", "États-Unis"])):
        for n, key in enumerate(keys):
            for period, clicks in ((month, 100 + n * 3), ((PREVIOUS_START, PREVIOUS_END), 50 + n)):
                DimensionMetric.objects.create(site_target=target, dimension=dimension, key=key,
                                               period_start=period[0], period_end=period[1], clicks=clicks,
                                               impressions=3000 + n * 11, ctr=None, position=2.5 + n * 1.3)
    Annotation.objects.create(site=target.site, day=date(2026, 5, 3), text="moved to HTTPS")
    Annotation.objects.create(site=target.site, day=date(2026, 5, 3), text="new menu, “titles”")
    Annotation.objects.create(site=target.site, day=date(2026, 5, 5), text="=1+1 (a note like a formula)")
    Annotation.objects.create(site=target.site, day=date(2026, 5, 9), text="after the period")
    return pages


def download(client, target, **params):
    response = client.get(f"/imports/sites/{target.site_id}/", {**SHOWN, "format": "csv", **params})
    assert response.status_code == 200, response.content[:500]
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response.content.startswith(b"\xef\xbb\xbf")  # the byte order mark Excel needs to read UTF-8
    rows = list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"), newline="")))
    return response, rows[0], [dict(zip(rows[0], row, strict=True)) for row in rows[1:]]


def plain_numbers(rows, columns):
    """Every cell of ``columns`` is blank or a plain number: no separator, no U+2212, no unit."""
    bad = [(column, row[column]) for row in rows for column in columns
           if row[column] and not NUMBER.fullmatch(row[column])]
    assert bad == []


def sums(queryset, weight) -> dict:
    found = queryset.aggregate(all_clicks=Sum("clicks"), all_impressions=Sum("impressions"),
                               weighted=Sum(F("position") * weight), weights=Sum(weight))
    clicks, impressions = found["all_clicks"], found["all_impressions"]
    return {"clicks": clicks, "impressions": impressions, "ctr_percent": round(100 * clicks / impressions, 2),
            "position": round(found["weighted"] / found["weights"], 1)}


def as_numbers(row) -> dict:
    return {column: float(row[column]) for column in FIGURES}


def change(clicks, previous) -> float:
    return round((clicks - previous) / previous * 100, 1)


def test_the_pages_table_holds_every_page_with_the_raw_rows_sums(client, member, target, data):
    response, header, rows = download(client, target, table="pages")

    assert response["Content-Disposition"] == 'attachment; filename="acme.example-pages-20260501-20260507.csv"'
    assert header == ["page", *FIGURES, "previous_clicks", "clicks_change_percent"]
    plain_numbers(rows, header[1:])
    by_url = {row["page"]: row for row in rows}
    assert set(by_url) == {*data[:3], "'" + FORMULA}  # the formula-looking URL neutralised
    for url in data:
        row = by_url["'" + url if url == FORMULA else url]
        mine = UrlMetric.objects.filter(site_target=target, url_normalized=url)
        now = sums(mine.filter(period_start__gte=START, period_end__lte=END), F("impressions"))
        before = mine.filter(period_start__gte=PREVIOUS_START, period_end__lte=PREVIOUS_END).aggregate(
            Sum("clicks"))["clicks__sum"]
        assert as_numbers(row) == pytest.approx({key: float(value) for key, value in now.items()})
        assert int(row["previous_clicks"]) == before
        assert float(row["clicks_change_percent"]) == change(now["clicks"], before)


def test_a_bare_format_csv_is_still_the_pages_table(client, member, target, data):
    _, header, rows = download(client, target)
    _, _, pages = download(client, target, table="pages")
    assert header[0] == "page" and rows == pages


@pytest.mark.parametrize(("table", "dimension"), [("queries", "query"), ("devices", "device"),
                                                  ("countries", "country")])
def test_the_queries_devices_and_countries_tables_hold_the_raw_rows_sums(client, member, target, data, table,
                                                                         dimension):
    response, header, rows = download(client, target, table=table, dsort="key")

    assert response["Content-Disposition"] == f'attachment; filename="acme.example-{table}-20260501-20260507.csv"'
    assert header == [dimension, *FIGURES, "previous_clicks", "clicks_change_percent"]
    plain_numbers(rows, header[1:])
    stored = DimensionMetric.objects.filter(site_target=target, dimension=dimension)
    keys = sorted(stored.values_list("key", flat=True).distinct())
    assert [row[dimension] for row in rows] == ["'" + key if key[0] in "=-" else key for key in keys]
    for row, key in zip(rows, keys, strict=True):
        now = sums(stored.filter(key=key, period_start__gte=START, period_end__lte=END), F("impressions"))
        before = stored.filter(key=key, period_start__gte=PREVIOUS_START, period_end__lte=PREVIOUS_END).aggregate(
            Sum("clicks"))["clicks__sum"]
        assert as_numbers(row) == pytest.approx({k: float(v) for k, v in now.items()})
        assert int(row["previous_clicks"]) == before
        assert float(row["clicks_change_percent"]) == change(now["clicks"], before)


def test_the_queries_table_is_as_searched(client, member, target, data):
    _, _, rows = download(client, target, table="queries", dq="seo")
    assert [row["query"] for row in rows] == ["seo audit"]


def test_the_days_table_holds_each_days_sums_and_its_notes(client, member, target, data):
    response, header, rows = download(client, target, table="days")

    assert response["Content-Disposition"] == 'attachment; filename="acme.example-days-20260501-20260507.csv"'
    assert header == ["date", "end_date", *FIGURES, "annotations"]
    plain_numbers(rows, FIGURES)
    assert [row["date"] for row in rows] == [f"{START + timedelta(days=d):%Y-%m-%d}" for d in range(7)]
    assert all(row["date"] == row["end_date"] for row in rows)
    for row in rows:
        day = date.fromisoformat(row["date"])
        expected = sums(UrlMetric.objects.filter(site_target=target, period_start=day, period_end=day),
                        F("impressions"))
        assert as_numbers(row) == pytest.approx({key: float(value) for key, value in expected.items()})
    notes = {row["date"]: row["annotations"] for row in rows if row["annotations"]}
    assert notes == {"2026-05-03": "moved to HTTPS | new menu, “titles”",
                     "2026-05-05": "'=1+1 (a note like a formula)"}


def test_a_day_without_data_is_a_row_of_blanks(client, member, target):
    UrlMetricFactory(site_target=target, url="https://acme.example/", period_start=date(2026, 5, 2), clicks=4)
    _, _, rows = download(client, target, table="days")
    assert [(row["date"], row["clicks"]) for row in rows[:3]] == [("2026-05-01", ""), ("2026-05-02", "4"),
                                                                   ("2026-05-03", "")]


def test_no_cell_of_any_table_runs_as_a_formula(client, member, target, data):
    for table in ("pages", "queries", "devices", "countries", "days"):
        _, _, rows = download(client, target, table=table)
        cells = [value for row in rows for value in row.values()]
        assert [v for v in cells if v.startswith(("=", "+", "-", "@", "\t", "\r")) and not NUMBER.fullmatch(v)] == []


def test_a_csv_of_another_orgs_site_is_a_404(client, member, target, data):
    from tests.factories import OrgFactory, SiteFactory
    rival = SiteFactory(org=OrgFactory(id="rival"), domain="rival.example")
    for table in ("pages", "queries", "days"):
        response = client.get(f"/imports/sites/{rival.pk}/", {**SHOWN, "format": "csv", "table": table})
        assert response.status_code == 404


def test_the_totals_table_is_one_row_of_both_periods_sums(client, member, target, data):
    _, header, rows = download(client, target, table="totals")

    assert header[:6] == ["start", "end", "compared_start", "compared_end", "clicks", "compared_clicks"]
    plain_numbers(rows, header[4:])
    (row,) = rows
    assert [row["start"], row["end"], row["compared_start"], row["compared_end"]] == [
        "2026-05-01", "2026-05-07", "2026-04-24", "2026-04-30"]
    everything = UrlMetric.objects.filter(site_target=target)
    now = sums(everything.filter(period_start__gte=START, period_end__lte=END), F("impressions"))
    before = sums(everything.filter(period_start__gte=PREVIOUS_START, period_end__lte=PREVIOUS_END),
                  F("impressions"))
    assert {key: float(row[key]) for key in FIGURES} == pytest.approx({k: float(v) for k, v in now.items()})
    assert {key: float(row[f"compared_{key}"]) for key in FIGURES} == pytest.approx(
        {k: float(v) for k, v in before.items()})
    assert float(row["clicks_change_percent"]) == change(now["clicks"], before["clicks"])
    assert float(row["position_change"]) == pytest.approx(round(now["position"] - before["position"], 1), abs=0.11)


def test_the_pages_links_download_each_table_of_what_is_shown(client, member, target, data):
    response = client.get(f"/imports/sites/{target.site_id}/", {**SHOWN, "table": "countries", "dq": "Fr"})
    html = response.content.decode()
    links = {name: re.search(rf'<a (?:class="csv" )?href="([^"]+)" data-{name}', html).group(1).replace("&amp;", "&")
             for name in ("csv", "dimension-csv", "days-csv", "totals-csv")}
    for name, table in (("csv", "pages"), ("dimension-csv", "countries"), ("days-csv", "days"),
                        ("totals-csv", "totals")):
        got = client.get(f"/imports/sites/{target.site_id}/{links[name]}")
        assert got.status_code == 200, links[name]
        assert f"acme.example-{table}-20260501-20260507.csv" in got["Content-Disposition"]
    _, _, rows = download(client, target, table="countries", dq="Fr")
    assert [row["country"] for row in rows] == ["France"]
    assert "dq=Fr" in links["dimension-csv"]
