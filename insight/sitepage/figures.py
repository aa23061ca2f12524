"""The site page's figures, read with ``sql``'s statements inside one read-only snapshot.

Every function returns what PostgreSQL aggregated: a handful of rows per block,
never the metric rows themselves. The totals, chart, imports and edges come from the
day sums (exact: kept by triggers); the top pages from the precomputed sums while
they are current (``stale_targets``), else from the rows; a page's history always
from its rows. Each day of a page counts once (``sql.COUNTED``), on every path.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date

from django.db import connection, transaction

from seoinsight.periods import Choice, Period

from . import listing, sql
from .display import Sums

# False: every figure summed from the metric rows, never the precomputed ones (tests hold both to one result).
PRECOMPUTED = True

# Enough for hashing every URL of a large site at once (20,000 URLs take about 10 MB)
# instead of spilling to disk at the server's default 4 MB. For these statements only.
WORK_MEM = "64MB"


@contextmanager
def snapshot(*, writes: bool = False) -> Iterator[None]:
    """One REPEATABLE READ transaction (READ ONLY unless it ``writes``): every block sees the same data.

    An import committing while the page is read would otherwise make the totals and
    the top pages disagree. Inside a transaction already open (a test's), that one decides.
    """
    opens = not connection.in_atomic_block
    with transaction.atomic(), connection.cursor() as cursor:
        if opens:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ" + ("" if writes else ", READ ONLY"))
        cursor.execute("SELECT set_config('work_mem', %s, true)", [WORK_MEM])
        yield


@dataclass(frozen=True)
class Covered:
    """Rows of one import (None: deleted since) and the days they cover."""

    import_id: int | None
    period: Period
    rows: int


@dataclass(frozen=True)
class LeftOut:
    """Rows of one import and row period that the rule leaves out (``left_out`` of its ``rows``): daily rows
    of the same pages cover some of their days."""

    import_id: int | None
    period: Period
    left_out: int
    rows: int

    @property
    def whole(self) -> bool:
        return self.left_out == self.rows


@dataclass
class Figures:
    """Totals of both periods, one point per row period of the current one, and which imports fed it."""

    current: Sums = field(default_factory=Sums)
    previous: Sums = field(default_factory=Sums)
    points: list[tuple[Period, Sums]] = field(default_factory=list)
    previous_points: list[Period] = field(default_factory=list)
    imports: list[Covered] = field(default_factory=list)
    edges: list[Covered] = field(default_factory=list)
    left_out: list[LeftOut] = field(default_factory=list)
    # Per import of ``imports`` (the site's figures only): its rows held and counted now, over all its days.
    kept: dict[int, ImportRows] = field(default_factory=dict)

    @property
    def mixed(self) -> bool:
        """Whether the current period holds both daily rows and rows covering several days."""
        return len({p.start == p.end for p, _ in self.points}) > 1


def statement_params(targets: list[int], choice: Choice, **more) -> dict:
    """The parameters every statement of ``sql`` takes, and ``more``."""
    return {"targets": targets, "start": choice.current.start, "end": choice.current.end,
            "previous_start": choice.previous.start, "previous_end": choice.previous.end, **more}


def _rows(statement: str, params: dict) -> list[dict]:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        names = [column.name for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _sums(row: dict) -> Sums:
    # Sums of bigints come back as Decimals: the counts are made the ints Sums declares.
    return Sums(_int(row["clicks"]), _int(row["impressions"]), row["ctr"], row["position"], _int(row["rows"]) or 0)


def _int(value) -> int | None:
    return None if value is None else int(value)


def newest_day(targets: list[int], today: date) -> date | None:
    with connection.cursor() as cursor:
        cursor.execute(sql.NEWEST_DAY, {"targets": targets, "today": today})
        return cursor.fetchone()[0]


def figures(targets: list[int], choice: Choice, url: str | None = None) -> Figures:
    """The site's figures (or one page's, by normalized ``url``) for ``choice``."""
    params = statement_params(targets, choice, url=url)
    if url is None and PRECOMPUTED:
        figures_sql, edges_sql, left_out_sql = sql.DAY_FIGURES, sql.DAY_EDGE_ROWS, sql.DAY_LEFT_OUT
    else:
        narrow = sql.ONE_PAGE if url is not None else ""
        figures_sql, edges_sql, left_out_sql = (sql.FIGURES.format(url=narrow), sql.EDGE_ROWS.format(url=narrow),
                                                sql.LEFT_OUT.format(url=narrow))
    result = Figures()
    for row in _rows(figures_sql, params):
        level, current = row["level"], row["current"]
        if level == 3:
            setattr(result, "current" if current else "previous", _sums(row))
        elif level == 1:
            period = Period(row["period_start"], row["period_end"])
            if current:
                result.points.append((period, _sums(row)))
            else:
                result.previous_points.append(period)
        elif current:
            result.imports.append(Covered(row["import_id"], Period(row["first_day"], row["last_day"]), row["rows"]))
    result.edges = [Covered(row["import_id"], Period(row["first_day"], row["last_day"]), row["rows"])
                    for row in _rows(edges_sql, params)]
    result.left_out = [LeftOut(row["import_id"], Period(row["period_start"], row["period_end"]),
                               int(row["left_out"]), int(row["rows"])) for row in _rows(left_out_sql, params)]
    if url is None:
        result.kept = import_rows(targets, sorted({c.import_id for c in result.imports if c.import_id is not None}))
    return result


@dataclass(frozen=True)
class ImportRows:
    """An import's rows the site's targets hold now (``held``: not replaced by a later import nor deleted), and
    those of them counted (``counted``: not left out for daily rows of the same pages)."""

    held: int
    counted: int


def import_rows(targets: list[int], import_ids: list[int]) -> dict[int, ImportRows]:
    """Per import of ``import_ids``: its rows held and counted now, over all its days; one with none is absent."""
    rows = _rows(sql.IMPORT_ROWS, {"targets": targets, "imports": import_ids})
    return {row["import_id"]: ImportRows(int(row["held"]), int(row["counted"])) for row in rows}


@dataclass(frozen=True)
class TopPage:
    url_normalized: str
    sums: Sums
    previous_clicks: int | None
    change: float | None


def stale_targets(targets: list[int], choice: Choice) -> list[int]:
    """The targets whose top pages of ``choice`` are not precomputed at their data's current version.

    An empty list: ``top_pages`` may read the precomputed sums (``cached=True``), exact in this snapshot.
    """
    if not PRECOMPUTED:
        return list(targets)
    return [row["id"] for row in _rows(sql.STALE_TARGETS, statement_params(targets, choice))]


def top_pages(targets: list[int], choice: Choice, *, sort: str, search: str = "", page: int = 1,
              page_size: int | None = listing.PAGE_SIZE, cached: bool = False) -> tuple[list[TopPage], int]:
    """One page of the top pages (all of them when ``page_size`` is None) and how many match in all.

    ``cached``: from the precomputed sums, which ``stale_targets`` found current; else from the rows.
    The count comes with the rows: a ``page`` past the last one gives none, and 0.
    """
    column, _ = listing.parse_sort(sort)
    if cached:
        statement = sql.TOP_PAGES_CACHED
    elif column == "change" or page_size is None:
        statement = sql.TOP_PAGES_ALL_PREVIOUS
    else:
        statement = sql.TOP_PAGES
    offset = (page - 1) * page_size if page_size else 0
    params = statement_params(targets, choice, pattern=listing.like_pattern(search), limit=page_size, offset=offset)
    narrow = sql.SEARCH if search else ""
    rows = _rows(statement.format(order=listing.order_by(sort), search=narrow), params)
    pages = [TopPage(row["url_normalized"], _sums(row), row["previous_clicks"], row["change"]) for row in rows]
    return pages, rows[0]["total"] if rows else 0
