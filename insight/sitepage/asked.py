"""What a request to the site page asks for: every parameter read through ``seoinsight.query_params``.

Each one is bounded before any query sees it; a bad one is left out (its default in its place) and said
in ``problems``. ``links`` rebuilds the query string from what was followed only, so the page's own
links (sort, pages, CSV) never carry a bad parameter on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.http import QueryDict

from seoinsight import periods
from seoinsight.query_params import Params, Problem

from . import dimension_asked, listing

SORTS = [listing.sort_value(column, descending) for column in listing.ORDERS for descending in (True, False)]
FORMATS = ("csv",)


@dataclass
class Asked:
    """The request's parameters as followed; ``start`` and ``end`` are the custom period's, read by periods."""

    preset: str
    start: str | None
    end: str | None
    compare: str
    target: str | None
    sort: str | None
    search: str
    url: str
    page: int
    as_csv: bool
    problems: list[Problem] = field(default_factory=list)
    # The queries, devices and countries tables' own parameters, and the device and country filter.
    dimension: dimension_asked.DimensionAsked | None = None

    def links(self, choice: periods.Choice, page: int) -> dict[str, str]:
        """The query string of the page shown (``choice``'s period), parameter by parameter, for its links."""
        shown = {**period_links(choice), "target": self.target, "sort": self.sort, "q": self.search, "url": self.url,
                 "page": page > 1 and str(page)}
        if self.dimension:
            shown.update(self.dimension.links())
        return {key: value for key, value in shown.items() if value}


def read(query: QueryDict, target_ids: list[int]) -> Asked:
    """The parameters of ``query``; ``target_ids``: the site's targets, the only ones ``target`` may name."""
    params = Params(query)
    asked = Asked(
        **period(params),
        target=params.choice("target", [str(pk) for pk in target_ids], None, what="The target",
                             instead="Showing every target of the site."),
        sort=params.choice("sort", SORTS, None, what="The sort", instead="Sorted by clicks."),
        search=params.text("q", what="The search"),
        url=params.text("url", what="The page whose history is open"),
        page=params.page(),
        as_csv=params.choice("format", FORMATS, None, what="The format", instead="Showing the page.") == "csv",
    )
    asked.dimension = dimension_asked.read(params)
    asked.problems = params.problems
    return asked


def period(params: Params) -> dict[str, str | None]:
    """The period asked for and what it is compared with: ``preset``, the custom ``start`` and ``end`` (read by
    ``periods.choose``), ``compare``. The site page's and the portfolio's, read alike."""
    return {
        "preset": params.choice("period", periods.PRESETS, periods.DEFAULT, what="The period",
                                instead=f"Showing the {periods.PRESETS[periods.DEFAULT].lower()}."),
        "start": params.raw("from"),
        "end": params.raw("to"),
        "compare": params.choice("compare", periods.COMPARES, periods.DEFAULT_COMPARE, what="The comparison",
                                 instead=f"Compared with {periods.COMPARES[periods.DEFAULT_COMPARE]}."),
    }


def period_links(choice: periods.Choice) -> dict[str, str | bool]:
    """The query string's parameters of ``choice``: its preset, its dates when custom, a comparison not the default."""
    custom = choice.preset == "custom"
    return {"period": choice.preset, "from": custom and f"{choice.current.start:%Y-%m-%d}",
            "to": custom and f"{choice.current.end:%Y-%m-%d}",
            "compare": choice.compare != periods.DEFAULT_COMPARE and choice.compare}
