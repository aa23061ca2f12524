"""What a request to the portfolio asks for: every parameter read through ``seoinsight.query_params``.

A bad one is left out (its default in its place) and said in ``problems``; ``links`` rebuilds the
query string from what was followed only, so the page's own links never carry a bad parameter on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.http import QueryDict

from insight.sitepage.asked import period, period_links
from seoinsight import periods
from seoinsight.query_params import Params, Problem

from . import ordering

FORMATS = ("csv",)
# A domain is at most 253 characters: a longer search matches nothing anyone typed.
MAX_SEARCH = 253


@dataclass
class Asked:
    preset: str
    start: str | None
    end: str | None
    compare: str
    sort: str | None
    search: str
    as_csv: bool
    problems: list[Problem] = field(default_factory=list)

    def links(self, choice: periods.Choice) -> dict[str, str]:
        """The query string of the page shown, parameter by parameter, for its links (format left out)."""
        shown = {**period_links(choice), "sort": self.sort, "q": self.search}
        return {key: value for key, value in shown.items() if value}


def read(query: QueryDict) -> Asked:
    params = Params(query)
    asked = Asked(
        **period(params),
        sort=params.choice("sort", ordering.SORTS, None, what="The sort",
                           instead="Sorted by the largest fall in clicks first."),
        search=params.text("q", what="The search", max_length=MAX_SEARCH),
        as_csv=params.choice("format", FORMATS, None, what="The format", instead="Showing the page.") == "csv",
    )
    asked.problems = params.problems
    return asked
