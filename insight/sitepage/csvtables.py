"""The site page's CSVs, one table each (``?format=csv&table=pages|queries|devices|countries|days|totals``).

Each is what a spreadsheet reads without help: one header row of snake_case names with the unit in the name
(``ctr_percent``), then a row per item; numbers as plain numbers (a dot for decimals, no thousands separator,
a minus as ``-``, no ``%`` or ``pts``), blanks for unknowns, days as YYYY-MM-DD. UTF-8 with a byte order mark:
Excel, the spreadsheet most operators open a download in, reads a CSV without one in the machine's ANSI code
page ("Ã‰tats-Unis"); LibreOffice, Google Sheets and Python's ``utf-8-sig`` read the mark as what it is.
Written through ``seoinsight.csvexport`` (an imported text starting like a formula gets a leading ``'``).
"""

from __future__ import annotations

from django.http import HttpResponse

from seoinsight import csvexport
from seoinsight.models import Site
from seoinsight.periods import Choice

from . import dimension_rules as rules
from .display import CLICKS, CTR, METRICS, POSITION

FIGURES = ("clicks", "impressions", "ctr_percent", "position")
COMPARED = ("previous_clicks", "clicks_change_percent")
PAGES_HEADER = ("page", *FIGURES, *COMPARED)
DAYS_HEADER = ("date", "end_date", *FIGURES, "annotations")
# One row: each figure of the period shown beside the compared period's and the change, in the unit named.
TOTALS_HEADER = ("start", "end", "compared_start", "compared_end", "clicks", "compared_clicks",
                 "clicks_change_percent", "impressions", "compared_impressions", "impressions_change_percent",
                 "ctr_percent", "compared_ctr_percent", "ctr_change_points", "position", "compared_position",
                 "position_change")


def header(dimension: str) -> tuple[str, ...]:
    """The header of a queries, devices or countries CSV: the key's name, then the figures.

    >>> header("country")
    ('country', 'clicks', 'impressions', 'ctr_percent', 'position', 'previous_clicks', 'clicks_change_percent')
    """
    return (dimension, *FIGURES, *COMPARED)


def figures(sums) -> list:
    """Clicks, impressions, CTR in percent (2 decimals) and position (1 decimal) as numbers; blanks when unknown.

    >>> from insight.sitepage.display import Sums
    >>> figures(Sums(30, 600, 0.05, 2.25)), figures(Sums())
    ([30, 600, 5.0, 2.2], ['', '', '', ''])
    """
    return [_count(sums.clicks), _count(sums.impressions), CTR.raw(sums.ctr), POSITION.raw(sums.position)]


def compared(clicks, previous_clicks) -> list:
    """The previous period's clicks and the change in clicks in percent (1 decimal); blanks when unknown.

    >>> compared(90, 100), compared(5, None), compared(5, 0)
    ([100, -10.0], ['', ''], [0, ''])
    """
    return [_count(previous_clicks), CLICKS.raw_change(clicks, previous_clicks)]


def _count(value):
    # PostgreSQL's sums of bigints are Decimals: written as whole numbers, never "12.0" or "1E+2".
    return "" if value is None else int(value)


def filename(site: Site, choice: Choice, table: str) -> str:
    return f"{site.domain}-{table}-{choice.current.start:%Y%m%d}-{choice.current.end:%Y%m%d}.csv"


def download(site: Site, choice: Choice, table: str) -> tuple[HttpResponse, csvexport.Writer]:
    return spreadsheet_download(filename(site, choice, table))


def spreadsheet_download(name: str) -> tuple[HttpResponse, csvexport.Writer]:
    """``csvexport.download`` starting with a byte order mark: Excel reads a CSV without one in the machine's code
    page, so an accented query or note would be mangled; other spreadsheets read it as UTF-8 either way."""
    response, out = csvexport.download(name)
    response.write("\ufeff")
    return response, out


def pages(site: Site, choice: Choice, top_pages) -> HttpResponse:
    """Every row of the top pages table as filtered and sorted on screen (``figures.TopPage``s)."""
    response, out = download(site, choice, "pages")
    out.writerow(PAGES_HEADER)
    for page in top_pages:
        out.writerow([page.url_normalized, *figures(page.sums), *compared(page.sums.clicks, page.previous_clicks)])
    return response


def dimension(site: Site, choice: Choice, table: str, rows) -> HttpResponse:
    """Every key of a queries, devices or countries table as searched and sorted on screen (``dimensions.Row``s)."""
    name = rules.TABS[table]
    response, out = download(site, choice, table)
    out.writerow(header(name))
    for row in rows:
        out.writerow([row.key, *figures(row.current), *compared(row.clicks, row.previous_clicks)])
    return response


def days(site: Site, choice: Choice, points, notes) -> HttpResponse:
    """A row per day of the period shown (a row per period where the data covers several days at once), with
    the day's annotations joined by `` | ``; ``points``: (Period, Sums) in order, ``notes``: Annotations."""
    by_day: dict = {}
    for note in notes:
        by_day.setdefault(note.day, []).append(note.text)
    response, out = download(site, choice, "days")
    out.writerow(DAYS_HEADER)
    points = dict(points)
    daily = {period.start: (period, sums) for period, sums in points.items() if period.start == period.end}
    # Every day of the period gets its row (blank figures on a day without data), so a chart drawn from the
    # sheet keeps its gaps; rows of several days (an export's) stay rows of their own.
    rows = [daily.get(day.start, (day, None)) for day in choice.current.each_day()]
    rows += [(period, sums) for period, sums in points.items() if period.start != period.end]
    for period, sums in sorted(rows, key=lambda item: (item[0].start, item[0].end)):
        out.writerow([period.start, period.end, *(figures(sums) if sums else ["", "", "", ""]),
                      " | ".join(by_day.get(period.start, []) if period.start == period.end else [])])
    return response


def totals(site: Site, choice: Choice, result) -> HttpResponse:
    """The totals of the period shown and of the one it is compared with (``figures.Figures``), as one row."""
    response, out = download(site, choice, "totals")
    out.writerow(TOTALS_HEADER)
    row = [choice.current.start, choice.current.end, choice.previous.start, choice.previous.end]
    for metric, (now, before) in zip(METRICS, zip(figures(result.current), figures(result.previous),
                                                   strict=True), strict=True):
        row += [now, before, metric.raw_change(metric.value(result.current), metric.value(result.previous))]
    out.writerow(row)
    return response
