"""``/imports/sites/``: every site of the current org over a period, against the previous one or a year before.

Sites are the caller's org's only (``member_required``: the org switcher's choice). The query string
says everything the page shows (period, comparison, sort, search), so a link or the CSV reproduces it;
each parameter is bounded first (``asked``): a bad one is said on the page, which shows its default
instead; a CSV asked with one is a plain-text 400.
"""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from imports.views import member_required
from insight import annotations
from insight.alerts.open import open_by_site
from insight.sitepage import display
from insight.sitepage.csvtables import spreadsheet_download
from insight.sitepage.figures import snapshot
from insight.sitepage.listing import change, query
from seoinsight import conf, periods, query_params
from seoinsight.figure_text import DASH
from seoinsight.query_params import Problem

from . import figures, links, openitems, ordering, sparkline
from .asked import read as read_asked

# The headers of the page's table, in order: (column, the group it belongs to).
SHOWN = ["site", "clicks", "clicks_delta", "clicks_change", "impressions", "impressions_change", "ctr", "ctr_change",
         "position", "position_change", "newest", "open"]


@require_GET
@member_required
def portfolio(request, org):
    asked = read_asked(request.GET)
    today = timezone.localdate()
    with snapshot():
        newest = figures.newest_day(org.pk, today)
        choice = periods.choose(asked.preset, asked.start, asked.end, today=today, newest=newest,
                                compare=asked.compare)
        problems = asked.problems + ([Problem(choice.problem, choice.instead)] if choice.problem else [])
        if asked.as_csv and problems:
            return _refused(problems)
        rows = figures.site_rows(org.pk, choice, today=today, search=asked.search)
        ids = [row.site_id for row in rows]
        alerts = open_by_site(ids)
        failed = openitems.failed_imports(org.pk, ids)
        mailboxes = openitems.failing_mailboxes(org.pk, ids)
        notes = annotations.for_sites(ids, choice.current.start, choice.current.end)
    for row in rows:
        row.alerts, row.failed_imports = alerts.get(row.site_id, []), failed.get(row.site_id, [])
        row.failing_mailboxes, row.notes = mailboxes.get(row.site_id, []), notes.get(row.site_id, [])
    rows = ordering.ordered(rows, asked.sort)
    if asked.as_csv:
        return _csv(request, choice, rows, today)
    params = asked.links(choice)
    sort = ordering.parse_sort(asked.sort)
    site_links = _site_links(choice, today)
    return render(request, "insight/portfolio.html", {
        "org": org,
        "choice": choice,
        "problems": problems,
        "newest": newest,
        "presets": periods.PRESETS.items(),
        "compares": periods.COMPARES.items(),
        "custom_bounds": {"earliest": query_params.EARLIEST_DAY, "latest": today,
                          "max_days": conf.get("QUERY_MAX_PERIOD_DAYS")},
        "params": params,
        "rows": [_shown(row, choice, site_links(row), request.user) for row in rows],
        "headers": [(column, ordering.COLUMNS[column].label,
                     query(params, sort=_sort_param(ordering.header_sort(column, asked.sort))))
                    for column in SHOWN],
        "sort": sort,
        "search": asked.search,
        "search_keeps": {key: value for key, value in params.items() if key != "q"},
        "clear_search": query(params, q=None),
        "csv_url": query(params, format="csv"),
    })


def _sort_param(sort: str) -> str | None:
    """The default order needs no parameter: its links stay short."""
    return None if sort == ordering.DEFAULT_SORT else sort


def signed_count(value: int | None) -> str:
    """A change in a count: ``+1,234``, ``−56``, ``0``; a dash when unknown.

    >>> signed_count(1234), signed_count(-56), signed_count(0), signed_count(None)
    ('+1,234', '−56', '0', '—')
    """
    if value is None:
        return DASH
    return ("+" if value > 0 else "−" if value < 0 else "") + f"{abs(value):,}"


def _site_links(choice: periods.Choice, today):
    """row -> the address of its site page with the same days: one URL reversed, one query per newest day."""
    # Reversing per row costs a tenth of a millisecond: 200 rows, 20 ms. The id is the URL's only argument.
    marker = 2_147_483_647
    pattern, queries = reverse("insight:site", args=[marker]), {}

    def link(row: figures.SiteRow) -> str:
        if row.newest not in queries:
            queries[row.newest] = links.query(links.site_page_params(choice, row.newest, today))
        return pattern.replace(str(marker), str(row.site_id)) + queries[row.newest]
    return link


def _shown(row: figures.SiteRow, choice: periods.Choice, url: str, user) -> dict:
    """A row as the template shows it: figures written out, changes with their tone, links."""
    cells = {}
    for metric in display.METRICS:
        now, before = metric.value(row.current), metric.value(row.previous)
        text, tone = metric.change(now, before)
        cells[metric.name] = {"text": metric.text(now), "before": metric.text(before), "change": text, "tone": tone}
    delta = ordering.clicks_delta(row)
    return {
        "row": row,
        "url": url,
        "cells": cells,
        "delta": signed_count(delta),
        "delta_tone": "" if not delta else ("better" if delta > 0 else "worse"),
        "spark": sparkline.svg(choice.current, row.days, [(note.day, note.text) for note in row.notes]),
        "behind": row.newest is not None and row.newest < choice.current.end,
        "mailbox_links": user.is_staff,
    }


def _refused(problems: list[Problem]) -> HttpResponse:
    lines = ["This CSV cannot be exported as its address asks, so nothing was exported:", "",
             *(f"- {problem.reason}" for problem in problems), "",
             "Open the portfolio (Sites), choose the period again and use its Download CSV link."]
    return HttpResponse("\n".join(lines) + "\n", status=400, content_type="text/plain; charset=utf-8")


# The site page's totals CSV's names (insight.sitepage.csvtables), with the site and what is open around them.
CSV_HEADER = ("site", "start", "end", "compared_start", "compared_end", "clicks", "compared_clicks", "clicks_change",
              "clicks_change_percent", "impressions", "compared_impressions", "impressions_change_percent",
              "ctr_percent", "compared_ctr_percent", "ctr_change_points", "position", "compared_position",
              "position_change", "newest_day", "open_alerts", "failed_imports", "failing_mailboxes", "annotations",
              "site_page")


def _csv(request, choice: periods.Choice, rows: list[figures.SiteRow], today) -> HttpResponse:
    """One table: a header row, a row per site in the page's order; numbers as numbers, blanks for unknowns."""
    response, out = spreadsheet_download(f"sites-{choice.current.start:%Y%m%d}-{choice.current.end:%Y%m%d}.csv")
    out.writerow(CSV_HEADER)
    clicks, impressions, ctr, position = display.METRICS
    site_links = _site_links(choice, today)
    for row in rows:
        now, before = row.current, row.previous
        delta = ordering.clicks_delta(row)
        relative = change(now.impressions, before.impressions)
        site_page = request.build_absolute_uri(site_links(row))
        out.writerow([
            row.domain, choice.current.start, choice.current.end, choice.previous.start, choice.previous.end,
            clicks.raw(now.clicks), clicks.raw(before.clicks), "" if delta is None else delta,
            clicks.raw_change(now.clicks, before.clicks),
            impressions.raw(now.impressions), impressions.raw(before.impressions),
            "" if relative is None else round(relative * 100, 1),
            ctr.raw(now.ctr), ctr.raw(before.ctr), ctr.raw_change(now.ctr, before.ctr),
            position.raw(now.position), position.raw(before.position), position.raw_change(now.position,
                                                                                            before.position),
            row.newest or "", len(row.alerts), len(row.failed_imports), len(row.failing_mailboxes),
            "; ".join(f"{note.day:%Y-%m-%d}: {note.text}" for note in row.notes), site_page,
        ])
    return response
