"""The portfolio's figures: ``sql.FIGURES`` run once for every site of an org, each site's row as PostgreSQL summed it.

Run inside the site page's read-only snapshot (``insight.sitepage.figures.snapshot``), so the newest day,
the figures and what is open on each site are read from the same data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

from django.db import connection

from insight.sitepage.display import Sums
from insight.sitepage.listing import like_pattern
from seoinsight.periods import Choice

from . import sql


@dataclass
class SiteRow:
    """One site: its sums in the period shown and in the one compared with, its daily clicks, its newest day.

    ``days`` maps each day of the period that has daily rows to its clicks (None: rows without clicks).
    ``alerts``, ``failed_imports``, ``failing_mailboxes`` and ``notes`` are filled by the view.
    """

    site_id: int
    domain: str
    newest: date | None
    current: Sums
    previous: Sums
    days: dict[date, int | None]
    alerts: list = field(default_factory=list)
    failed_imports: list = field(default_factory=list)
    failing_mailboxes: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    @property
    def open_count(self) -> int:
        return len(self.alerts) + len(self.failed_imports) + len(self.failing_mailboxes)


def newest_day(org_id: str, today: date) -> date | None:
    """The newest day with data of any of the org's sites, not after today (None: no data yet)."""
    with connection.cursor() as cursor:
        cursor.execute(sql.NEWEST_DAY, {"org": org_id, "today": today})
        return cursor.fetchone()[0]


def site_rows(org_id: str, choice: Choice, *, today: date, search: str = "") -> list[SiteRow]:
    """Every site of the org whose domain contains ``search`` (any case), by domain: one statement."""
    params = {"org": org_id, "today": today, "pattern": like_pattern(search) if search else None,
              "start": choice.current.start, "end": choice.current.end,
              "previous_start": choice.previous.start, "previous_end": choice.previous.end}
    with connection.cursor() as cursor:
        cursor.execute(sql.FIGURES, params)
        names = [column.name for column in cursor.description]
        rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    return [SiteRow(row["site_id"], row["domain"], row["newest"], _sums(row, ""), _sums(row, "previous_"),
                    dict(zip(row["days"] or [], map(_int, row["day_clicks"] or []), strict=True)))
            for row in rows]


def _sums(row: dict, prefix: str) -> Sums:
    # Sums of numerics come back as Decimals: the counts are made the ints Sums declares.
    return Sums(_int(row[f"{prefix}clicks"]), _int(row[f"{prefix}impressions"]), row[f"{prefix}ctr"],
                row[f"{prefix}position"], _int(row[f"{prefix}rows"]) or 0)


def _int(value) -> int | None:
    return None if value is None else int(value)
