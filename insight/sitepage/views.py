"""``/imports/sites/<id>/``: one site's figures over a chosen period, and the same as CSV (``?format=csv``).

The site is looked up among the caller's org's sites only: another org's site is
the same 404 as an unknown one. The query string says everything the page shows
(period, target, search, sort, page, the page whose history is open), so a link
or the CSV export reproduces it. Each parameter is bounded first (``asked``): a bad one is
said on the page, which shows its default instead; a CSV asked with one is a plain-text 400.
"""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.views.decorators.http import require_GET

from imports.models import Import
from imports.views import member_required
from seoinsight import conf, periods, query_params
from seoinsight.models import Site
from seoinsight.query_params import Problem

from .. import annotation_views
from . import cache, counted, csvtables, dimension_view, display, figures, listing
from .asked import read as read_asked


@require_GET
@member_required
def site_page(request, site_id, org):
    site = get_object_or_404(Site.objects.filter(org=org), pk=site_id)
    targets = list(site.targets.order_by("pk"))
    asked = read_asked(request.GET, [t.pk for t in targets])
    shown = [t for t in targets if str(t.pk) == asked.target] or targets
    target_ids = [t.pk for t in shown]
    sort, search = asked.sort or listing.DEFAULT_SORT, asked.search
    today = timezone.localdate()
    with figures.snapshot():
        newest = figures.newest_day(target_ids, today)
        choice = periods.choose(asked.preset, asked.start, asked.end, today=today, newest=newest,
                                compare=asked.compare)
        problems = asked.problems + ([Problem(choice.problem, choice.instead)] if choice.problem else [])
        present = dimension_view.present_keys(site.pk, target_ids)
        problems += asked.dimension.follow_filter(present)
        if asked.as_csv and problems:
            # A download cannot show what it did instead: it is refused whole, in plain words.
            return _refused(problems)
        site_figures = figures.figures(target_ids, choice)
        if asked.as_csv and asked.dimension.table not in (None, "pages"):
            # One table per CSV (a bare format=csv stays the pages, as old links expect).
            return dimension_view.csv(site, target_ids, choice, asked.dimension, site_figures)
        stale = figures.stale_targets(target_ids, choice)
        # The precomputed top pages hold each URL's clicks of the previous period only: a year's are summed.
        top = {"sort": sort, "search": search, "cached": not stale and choice.compare == periods.DEFAULT_COMPARE}
        if asked.as_csv:
            pages, _ = figures.top_pages(target_ids, choice, page_size=None, **top)
        else:
            number = asked.page
            pages, total = figures.top_pages(target_ids, choice, page=number, **top)
            if not pages and number > 1:  # a page past the end (the data changed since the link was made)
                number = 1
                pages, total = figures.top_pages(target_ids, choice, **top)
            url = asked.url
            history = figures.figures(target_ids, choice, url=url) if url else None
            dims = dimension_view.read(site, target_ids, choice, asked.dimension, present)
    # Outside the read-only snapshot. A custom period is never precomputed: it stays on the rows.
    if stale and choice.preset != "custom":
        cache.refresh_later(site, stale)
    if asked.as_csv:
        return csvtables.pages(site, choice, pages)
    params = asked.links(choice, number)
    marks, notes = annotation_views.for_site_page(request, site, choice.current, listing.query(params))
    return render(request, "insight/site.html", {
        "org": org,
        "site": site,
        "targets": targets,
        "target": shown[0] if len(shown) == 1 and len(targets) > 1 else None,
        "choice": choice,
        "problems": problems,
        "custom_bounds": {"earliest": query_params.EARLIEST_DAY, "latest": today,
                          "max_days": conf.get("QUERY_MAX_PERIOD_DAYS")},
        "newest": newest,
        "presets": periods.PRESETS.items(),
        "compares": periods.COMPARES.items(),
        "params": params,
        "totals": _totals(site_figures),
        "chart": display.chart(site_figures.points, choice.current, marks.chart()),
        "mixed": site_figures.mixed,
        "precomputed": not stale,
        **_sources(org, site_figures),
        "gaps": periods.gaps(choice.current, [(p.start, p.end) for p, _ in site_figures.points]),
        "previous_gaps": periods.gaps(choice.previous, [(p.start, p.end) for p in site_figures.previous_points]),
        "pages": [_page_row(page, params) for page in pages],
        **dimension_view.context(org, dims, choice, asked.dimension, params),
        "page_count": total,
        "pagination": _pagination(params, number, total),
        "headers": [(column, label, listing.query(params, sort=listing.header_sort(column, sort), page=None))
                    for column, (label, _) in listing.ORDERS.items()],
        "sort": listing.parse_sort(sort),
        "search": search,
        "search_keeps": {key: value for key, value in params.items() if key not in ("q", "page", "format")},
        "clear_search": listing.query(params, q=None, page=None),
        "csv_url": listing.query(params, format="csv", page=None, table=None),  # the pages: a bare format=csv
        "url": url,
        "history": history and {
            "totals": _totals(history),
            "chart": display.chart(history.points, choice.current, marks.chart(url)),
            "points": _points(history.points),
            "close": listing.query(params, url=None),
        },
        "points": _points(site_figures.points),
        **notes,
    })


def _totals(result: figures.Figures) -> list[dict]:
    rows = []
    for metric in display.METRICS:
        current, previous = metric.value(result.current), metric.value(result.previous)
        text, tone = metric.change(current, previous)
        rows.append({"name": metric.name, "label": metric.label, "current": metric.text(current),
                     "previous": metric.text(previous), "change": text, "tone": tone})
    return rows


def _points(points) -> list[dict]:
    return [{"period": period, "clicks": display.number(s.clicks), "impressions": display.number(s.impressions),
             "ctr": display.percent(s.ctr), "position": display.position(s.position)} for period, s in points]


def _sources(org, result: figures.Figures) -> dict:
    """The imports that fed the figures, those whose rows cross an edge and those whose rows the "counted once"
    rule left out, each with its Import; a source also with how many of its rows count now (``kept``).

    The Imports are read among the caller's org's only; one deleted since is None.
    """
    covered = result.imports + result.edges + result.left_out
    ids = {c.import_id for c in covered if c.import_id is not None}
    found = {imp.pk: imp for imp in Import.objects.for_org(org.pk).filter(pk__in=ids).select_related("site_target")}
    shown = {key: [{"covered": c, "imp": found.get(c.import_id)} for c in entries]
             for key, entries in (("sources", result.imports), ("edges", result.edges), ("left_out", result.left_out))}
    for source in shown["sources"]:
        rows = result.kept.get(source["covered"].import_id)
        if source["imp"] is not None and rows is not None:
            source["kept"] = counted.kept_text(source["imp"].inserted + source["imp"].updated, rows.held, rows.counted)
    for source in shown["left_out"]:
        c = source["covered"]
        source["why"] = counted.left_out_text(c.period.days, str(c.period), c.left_out, c.rows)
    return shown


def _page_row(page: figures.TopPage, params: dict) -> dict:
    s = page.sums
    text, tone = display.METRICS[0].change(s.clicks, page.previous_clicks)
    return {"url": page.url_normalized, "history": listing.query(params, url=page.url_normalized),
            "clicks": display.number(s.clicks), "impressions": display.number(s.impressions),
            "ctr": display.percent(s.ctr), "position": display.position(s.position),
            "previous_clicks": display.number(page.previous_clicks), "change": text, "tone": tone}


def _pagination(params: dict, number: int, total: int) -> dict:
    last = max(1, -(-total // listing.PAGE_SIZE))
    return {"number": number, "last": last,
            "previous": listing.query(params, page=number - 1) if number > 1 else "",
            "next": listing.query(params, page=number + 1) if number < last else ""}


def _refused(problems: list[Problem]) -> HttpResponse:
    lines = ["This CSV cannot be exported as its address asks, so nothing was exported:", "",
             *(f"- {problem.reason}" for problem in problems), "",
             "Open the site page, choose the period again and use its Download CSV link."]
    return HttpResponse("\n".join(lines) + "\n", status=400, content_type="text/plain; charset=utf-8")

