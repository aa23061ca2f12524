"""The site page's queries, devices and countries: read inside the page's snapshot (``read``), then laid out
for the template (``context``) or written as a CSV (``csv``).

The filter by device or country shows that key's figures from its own export table (and a chart where its
rows are daily): an export never splits its pages, queries or totals by device or country, so those stay
the figures of all devices and countries, and the page says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.http import HttpResponse

from imports.models import Import
from insight import annotations
from seoinsight.models import Site
from seoinsight.periods import Choice

from . import csvtables, dimensions, display, listing
from . import dimension_rules as rules
from .dimension_asked import DimensionAsked

FILTERS = ("device", "country")


@dataclass
class Read:
    """What the page shows of the dimension tables, as read from the database."""

    tab: str
    rows: list[dimensions.Row]
    total: int
    page: int
    sources: list[rules.Table]
    present: dict[str, list[str]]
    chosen: list[dict] = field(default_factory=list)


def present_keys(site_id: int, targets: list[int]) -> dict[str, list[str]]:
    """The devices and countries the site's exports name: the only values the filter accepts."""
    return {dimension: dimensions.keys(site_id, targets, dimension) for dimension in FILTERS}


def read(site: Site, targets: list[int], choice: Choice, asked: DimensionAsked,
         present: dict[str, list[str]]) -> Read:
    """The tab's page of rows (page 1 when asked past the end), its export tables and the chosen filter keys."""
    dimension = rules.TABS[asked.tab]
    search = {"sort": asked.sort, "search": asked.search}
    page = asked.page
    rows, total = dimensions.table(site.pk, targets, choice, dimension, page=page, **search)
    if not rows and page > 1:  # a page past the end (the data changed since the link was made)
        page = 1
        rows, total = dimensions.table(site.pk, targets, choice, dimension, **search)
    found = Read(asked.tab, rows, total, page, dimensions.sources(site.pk, targets, choice, dimension), present)
    for name in FILTERS:
        key = getattr(asked, name)
        if not key:
            continue
        row = next(iter(dimensions.table(site.pk, targets, choice, name, only=key, page_size=1)[0]), None)
        points = dimensions.points(site.pk, targets, choice, name, key)
        found.chosen.append({"dimension": name, "key": key, "row": row, "points": points})
    return found


def csv(site: Site, targets: list[int], choice: Choice, asked: DimensionAsked, site_figures) -> HttpResponse:
    """The CSV of ``asked.table`` but the pages: the totals or the days of ``site_figures`` (with the site's
    annotations), or every key of a queries, devices or countries table as searched and sorted on screen."""
    if asked.table == "totals":
        return csvtables.totals(site, choice, site_figures)
    if asked.table == "days":
        notes = annotations.for_sites([site.pk], choice.current.start, choice.current.end)[site.pk]
        return csvtables.days(site, choice, site_figures.points, notes)
    rows, _ = dimensions.table(site.pk, targets, choice, rules.TABS[asked.table], sort=asked.sort,
                               search=asked.search, page_size=None)
    return csvtables.dimension(site, choice, asked.table, rows)


def context(org, found: Read, choice: Choice, asked: DimensionAsked, params: dict) -> dict:
    """The template's view of ``found``; ``params``: the page's query string, for the tabs, headers and pages."""
    dimension = rules.TABS[found.tab]
    keep = {key: value for key, value in params.items() if key != "dpage"}
    ids = {t.import_id for t in found.sources if t.import_id is not None}
    imports = {imp.pk: imp for imp in Import.objects.for_org(org.pk).filter(pk__in=ids)}
    last = max(1, -(-found.total // rules.PAGE_SIZE))
    column, descending = rules.parse_sort(asked.sort)
    chosen_key = {"device": asked.device, "country": asked.country}.get(dimension, "")
    return {"dimension_table": {
        "tab": found.tab,
        "tabs": [(tab, rules.TABLE_LABELS[name], listing.query(keep, table=tab, dsort=None, dq=None)
                  if tab != rules.DEFAULT_TAB else listing.query(keep, table=None, dsort=None, dq=None))
                 for tab, name in rules.TABS.items()],
        "name": rules.NAMES[dimension],
        "label": rules.TABLE_LABELS[dimension],
        "rows": [_row(row, chosen_key) for row in found.rows],
        "total": found.total,
        "search": asked.search,
        "search_keeps": {key: value for key, value in keep.items() if key != "dq"},
        "clear_search": listing.query(keep, dq=None),
        "headers": [(col, rules.NAMES[dimension][2] if col == "key" else label,
                     listing.query(keep, dsort=rules.header_sort(col, asked.sort)), col == column, descending)
                    for col, (label, _) in rules.ORDERS.items()],
        "pagination": {"number": found.page, "last": last,
                       "previous": listing.query(keep, dpage=found.page - 1) if found.page > 1 else "",
                       "next": listing.query(keep, dpage=found.page + 1) if found.page < last else ""},
        "csv_url": listing.query(keep, format="csv", table=found.tab),
        "days_csv_url": listing.query(keep, format="csv", table="days"),
        "totals_csv_url": listing.query(keep, format="csv", table="totals"),
        "sources": [_source(t, dimension, choice, imports) for t in found.sources],
        # Open when some export is not wholly counted: the table's figures are then not the exports' own.
        "sources_open": any(t.counted < t.rows for t in found.sources),
    }, "dimension_filter": _filter(found, choice, asked, params)}


def _row(row: dimensions.Row, chosen: str) -> dict:
    text, tone = display.CLICKS.change(row.clicks, row.previous_clicks)
    return {"key": row.key, "clicks": display.number(row.clicks), "impressions": display.number(row.impressions),
            "ctr": display.percent(row.ctr), "position": display.position(row.position),
            "previous_clicks": display.number(row.previous_clicks), "change": text, "tone": tone,
            "selected": row.key == chosen}


def _source(table: rules.Table, dimension: str, choice: Choice, imports: dict) -> dict:
    text, tone = rules.coverage(table, dimension, choice.current)
    return {"text": text, "tone": tone, "imp": imports.get(table.import_id)}


def _filter(found: Read, choice: Choice, asked: DimensionAsked, params: dict) -> dict:
    """The filter's choices, and per chosen key its totals and (daily rows only) its chart."""
    chosen = []
    for entry in found.chosen:
        row, points = entry["row"], entry["points"]
        daily = bool(points) and all(period.start == period.end for period, _ in points)
        chosen.append({
            "dimension": entry["dimension"], "key": entry["key"],
            "totals": _totals(row.current if row else display.Sums(), row.previous if row else display.Sums()),
            "has_rows": row is not None,
            "chart": display.chart(points, choice.current) if daily else None,
            "points": [{"period": p, "clicks": display.number(s.clicks), "impressions": display.number(s.impressions),
                        "ctr": display.percent(s.ctr), "position": display.position(s.position)} for p, s in points],
            "chart_id": f"chart-{entry['dimension']}",
            "periods": [rules.short(p) for p, _ in points],
            "clear": listing.query(params, **{entry["dimension"]: None}),
        })
    return {"devices": found.present["device"], "countries": found.present["country"],
            "device": asked.device, "country": asked.country, "chosen": chosen}


def _totals(current: display.Sums, previous: display.Sums) -> list[dict]:
    rows = []
    for metric in display.METRICS:
        now, before = metric.value(current), metric.value(previous)
        text, tone = metric.change(now, before)
        rows.append({"name": metric.name, "label": metric.label, "current": metric.text(now),
                     "previous": metric.text(before), "change": text, "tone": tone})
    return rows
