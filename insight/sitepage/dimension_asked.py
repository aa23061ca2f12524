"""The site page's parameters for its queries, devices and countries tables, its filter and its CSV tables.

``table`` (a tab, or which CSV), ``dsort``, ``dq``, ``dpage``, and the filter's ``device`` and ``country``:
each bounded by ``seoinsight.query_params`` before any query sees it. The filter's keys are only checked
against the site's own devices and countries once those are read (``follow_filter``).
"""

from __future__ import annotations

from dataclasses import dataclass

from seoinsight.query_params import Params, Problem, one_of

from . import dimension_rules as rules

# A device or country name as exported ("Ordinateur", "Royaume-Uni"): longer is no key of any export.
MAX_KEY = 200


@dataclass
class DimensionAsked:
    """What the request asks of the dimension tables; ``device`` and ``country`` as given, not yet checked."""

    table: str | None
    sort: str | None
    search: str
    page: int
    device: str
    country: str

    @property
    def tab(self) -> str:
        return self.table if self.table in rules.TABS else rules.DEFAULT_TAB

    def links(self) -> dict[str, str]:
        """The parameters followed, for the page's links."""
        shown = {"table": self.table in rules.TABS and self.table != rules.DEFAULT_TAB and self.table,
                 "dsort": self.sort, "dq": self.search, "dpage": self.page > 1 and str(self.page),
                 "device": self.device, "country": self.country}
        return {key: value for key, value in shown.items() if value}

    def follow_filter(self, present: dict[str, list[str]]) -> list[Problem]:
        """Keep ``device`` and ``country`` only if the site's exports name them (``present``: dimension -> keys).

        >>> asked = DimensionAsked(None, None, "", 1, "Mobile", "Atlantis")
        >>> [p.reason for p in asked.follow_filter({"device": ["Desktop", "Mobile"], "country": ["France"]})]
        ['The country is not one this site’s exports name: France.']
        >>> asked.device, asked.country
        ('Mobile', '')
        """
        problems = []
        for dimension in ("device", "country"):
            value, keys = getattr(self, dimension), present.get(dimension, [])
            if not value:
                continue
            try:
                one_of(value, keys, what=f"The {dimension}")
            except ValueError:
                listed = f": {', '.join(keys)}" if 0 < len(keys) <= 10 else ""
                problems.append(Problem(f"The {dimension} is not one this site’s exports name{listed}.",
                                        f"Showing every {dimension}."))
                setattr(self, dimension, "")
        return problems


def read(params: Params) -> DimensionAsked:
    """The dimension parameters of ``params`` (its problems gain any bad one's reason)."""
    return DimensionAsked(
        table=params.choice("table", rules.CSV_TABLES, None, what="The table",
                            instead="Showing the queries."),
        sort=params.choice("dsort", rules.SORTS, None, what="The table's sort", instead="Sorted by clicks."),
        search=params.text("dq", what="The table's search", max_length=MAX_KEY * 5),
        page=params.page("dpage"),
        device=params.text("device", what="The device", max_length=MAX_KEY),
        country=params.text("country", what="The country", max_length=MAX_KEY),
    )
