"""Rows in, metrics out: batched, set-based upserts of parsed rows.

One batch is one transaction that also writes the job's checkpoint (rows done
and running counts), so a run killed at any point resumes exactly where the
last committed batch ended, with identical final counts and no duplicate rows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import date

from django.db import connection

from .formats import ParsedRow, RowError
from .urlnorm import InvalidUrl, in_scope, normalize_url

BATCH_SIZE = 5000
MAX_ERROR_SAMPLES = 20

# One statement per batch: arrays in, two counts out. xmax = 0 on a returned
# row means the INSERT created it; otherwise ON CONFLICT updated an existing one.
UPSERT_METRICS = """
WITH up AS (
    INSERT INTO imports_urlmetric AS m
        (site_target_id, url, url_normalized, period_start, period_end,
         clicks, impressions, ctr, position, import_id, updated_at)
    SELECT %(target)s, r.url, r.url_normalized, r.period_start, r.period_end,
           r.clicks, r.impressions, r.ctr, r.position, %(import_id)s, now()
    FROM unnest(%(url)s::text[], %(url_normalized)s::text[], %(period_start)s::date[], %(period_end)s::date[],
                %(clicks)s::bigint[], %(impressions)s::bigint[], %(ctr)s::float8[], %(position)s::float8[])
         AS r(url, url_normalized, period_start, period_end, clicks, impressions, ctr, position)
    ON CONFLICT (site_target_id, url_normalized, period_start, period_end) DO UPDATE
    SET url = EXCLUDED.url, clicks = EXCLUDED.clicks, impressions = EXCLUDED.impressions,
        ctr = EXCLUDED.ctr, position = EXCLUDED.position, import_id = EXCLUDED.import_id, updated_at = now()
    RETURNING (m.xmax = 0) AS inserted
)
SELECT count(*) FILTER (WHERE inserted), count(*) FILTER (WHERE NOT inserted) FROM up
"""


@dataclass
class Counts:
    """The import's running tally; also its checkpoint and, at the end, its report."""

    read: int = 0
    inserted: int = 0
    updated: int = 0
    skipped: int = 0
    errors: int = 0
    skipped_reasons: dict = field(default_factory=dict)
    error_samples: list = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: dict | None) -> Counts:
        return cls(**(data or {}))

    def as_dict(self) -> dict:
        return asdict(self)

    def skip(self, reason: str) -> None:
        self.skipped += 1
        self.skipped_reasons[reason] = self.skipped_reasons.get(reason, 0) + 1

    def error(self, row_number: int, reason: str) -> None:
        self.errors += 1
        if len(self.error_samples) < MAX_ERROR_SAMPLES:
            self.error_samples.append({"row": row_number, "reason": reason})


@dataclass(frozen=True)
class Scope:
    """Where rows must point to be kept, and the period for rows without a date."""

    url_prefix: str = ""
    search_console_property: str = ""
    period: tuple[date, date] | None = None


def prepare(rows, scope: Scope, counts: Counts) -> dict[tuple, tuple]:
    """Turn parsed rows into upsert records keyed by the natural key, counting what is dropped.

    A later row with the same URL and period replaces an earlier one in the batch,
    as it would replace it in the table.
    """
    records: dict[tuple, tuple] = {}
    for row in rows:
        counts.read += 1
        if isinstance(row, RowError):
            counts.error(row.number, row.reason)
            continue
        try:
            normalized = normalize_url(row.url)
        except InvalidUrl as exc:
            counts.error(row.number, f"URL {row.url[:200]!r}: {exc}")
            continue
        if not in_scope(normalized, url_prefix=scope.url_prefix,
                        search_console_property=scope.search_console_property):
            counts.skip("outside the site target")
            continue
        if row.date is not None:
            start = end = row.date
        elif scope.period is not None:
            start, end = scope.period
        else:
            counts.error(row.number, "no date for this row and no period for the file")
            continue
        records[(normalized, start, end)] = (row.url, row.clicks, row.impressions, row.ctr, row.position)
    return records


def upsert(site_target_id: int, import_id: int | None, records: dict[tuple, tuple]) -> tuple[int, int]:
    """Write one batch; returns (inserted, updated)."""
    if not records:
        return 0, 0
    keys = list(records)
    values = list(records.values())
    params = {
        "target": site_target_id,
        "import_id": import_id,
        "url_normalized": [k[0] for k in keys],
        "period_start": [k[1] for k in keys],
        "period_end": [k[2] for k in keys],
        "url": [v[0] for v in values],
        "clicks": [v[1] for v in values],
        "impressions": [v[2] for v in values],
        "ctr": [v[3] for v in values],
        "position": [v[4] for v in values],
    }
    with connection.cursor() as cursor:
        cursor.execute(UPSERT_METRICS, params)
        inserted, updated = cursor.fetchone()
    return inserted, updated


def batched(iterable, size: int = BATCH_SIZE):
    batch = []
    for item in iterable:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


__all__ = ["BATCH_SIZE", "Counts", "ParsedRow", "RowError", "Scope", "batched", "prepare", "upsert"]
