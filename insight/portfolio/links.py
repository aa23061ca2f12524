"""The site page's address for a portfolio row: the same days and the same comparison. Pure.

The portfolio's presets end on the newest day of the org's data; the site page's end on the site's own.
When the two differ (a site whose data stops earlier), the link names the days themselves (a custom
period), so the site page shows the very figures of the row.
"""

from __future__ import annotations

from datetime import date
from urllib.parse import urlencode

from seoinsight import periods


def site_page_params(choice: periods.Choice, site_newest: date | None, today: date) -> dict[str, str]:
    """The site page's query parameters that show ``choice``'s days for a site whose newest day is ``site_newest``.

    >>> choice = periods.choose("7d", today=date(2026, 12, 10), newest=date(2026, 12, 8), compare="year")
    >>> site_page_params(choice, date(2026, 12, 8), date(2026, 12, 10))
    {'period': '7d', 'compare': 'year'}
    >>> site_page_params(choice, date(2026, 12, 6), date(2026, 12, 10))
    {'period': 'custom', 'from': '2026-12-02', 'to': '2026-12-08', 'compare': 'year'}
    """
    own = periods.choose(choice.preset, today=today, newest=site_newest).current
    if choice.preset != "custom" and own == choice.current:
        params = {"period": choice.preset}
    else:
        params = {"period": "custom", "from": f"{choice.current.start:%Y-%m-%d}",
                  "to": f"{choice.current.end:%Y-%m-%d}"}
    if choice.compare != periods.DEFAULT_COMPARE:
        params["compare"] = choice.compare
    return params


def query(params: dict[str, str]) -> str:
    return "?" + urlencode(params)
