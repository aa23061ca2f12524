"""Rows in, metrics out: batched, set-based upserts of parsed rows.

One batch is one transaction that also writes the job's checkpoint (rows done
and running counts), so a run killed at any point resumes exactly where the
last committed batch ended, with identical final counts and no duplicate rows.
A batch rolled back by a deadlock or serialization failure is run again
(``write_batch``). Rows repeating a URL and period are added up (``fold``),
within a batch here and across batches by the upsert.
"""

from __future__ import annotations

import copy
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import date
from typing import NamedTuple

from django.db import connection, transaction

from . import conf
from .conflicts import WriteConflict, retry_conflicts
from .dimension_models import Dimension, DimensionMetric
from .formats import ParsedRow, RowError, UnreadableFile
from .urlnorm import InvalidUrl, host_of, in_scope, normalize_url

MAX_ERROR_SAMPLES = 20
# What the report keeps of the rows outside the target, for "this file looks like it is for <site>":
# rows per host for this many distinct hosts (later hosts' rows are only in the total), and the first
# distinct URLs, cut to a readable length.
SKIPPED_HOSTS_KEPT = 50
SKIPPED_URLS_KEPT = 5
SKIPPED_URL_LENGTH = 300
OUTSIDE = "outside the site target"

# A batch goes to the server with COPY into a staging table that lives for
# the batch only, then one set-based upsert from it. COPY is the cheapest way
# in (no per-row SQL, no client-side array literals); the upsert is what COPY
# cannot do. ON COMMIT DROP cleans up after a failed batch; the explicit DROP
# lets a transaction write several batches (import_api does). A temporary table
# never outlives its transaction, so this also works behind PgBouncer in
# transaction mode.
CREATE_STAGE = """
CREATE TEMPORARY TABLE imports_stage (
    url text, url_normalized text, period_start date, period_end date,
    clicks bigint, impressions bigint, ctr float8, position float8, position_weight float8, source_rows int4
) ON COMMIT DROP
"""
# Binary: about half the cost of text COPY on both sides (psycopg formats
# nothing as text, the server parses no dates or floats).
COPY_STAGE = (
    "COPY imports_stage (url, url_normalized, period_start, period_end, clicks, impressions, ctr, position, "
    "position_weight, source_rows) FROM STDIN (FORMAT BINARY)"
)
STAGE_TYPES = ["text", "text", "date", "date", "int8", "int8", "float8", "float8", "float8", "int4"]
DROP_STAGE = "DROP TABLE imports_stage"

# One statement per batch: staged rows in, three counts out. xmax = 0 on a
# returned row means the INSERT created it; otherwise ON CONFLICT met an
# existing row. A row this import wrote in an earlier batch (same import_id)
# is added to (``fold``: the same rule as within a batch): its URL and period
# repeat in the file. Any other existing row is replaced: a re-import updates.
# A folded row ends with more source_rows than the staged one brought.
#
# Rows go in natural-key order, not the file's: an upsert waits for the
# transaction holding a key it meets, so two imports writing the same URLs in
# different orders would each hold a key the other waits for — a deadlock. In
# one global order one of them simply waits (mailpoll's INSERT_MESSAGES does the
# same). A batch is one statement, so its locks are taken in that order.
#
# Folding relies on each batch of an import being written once (the checkpoint
# commits with it); an import run again from its first row would add twice.
UPSERT_METRICS = """
WITH up AS (
    INSERT INTO imports_urlmetric AS m
        (site_target_id, url, url_normalized, period_start, period_end,
         clicks, impressions, ctr, position, position_weight, source_rows, import_id, updated_at)
    SELECT %(target)s, s.url, s.url_normalized, s.period_start, s.period_end,
           s.clicks, s.impressions, s.ctr, s.position, s.position_weight, s.source_rows, %(import_id)s, now()
    FROM imports_stage AS s
    ORDER BY s.url_normalized, s.period_start, s.period_end
    ON CONFLICT (site_target_id, url_normalized, period_start, period_end) DO UPDATE
    SET (url, clicks, impressions, ctr, position, position_weight, source_rows) = (
            SELECT CASE WHEN fold THEN m.url ELSE EXCLUDED.url END,
                   CASE WHEN fold THEN coalesce(m.clicks + EXCLUDED.clicks, m.clicks, EXCLUDED.clicks)
                        ELSE EXCLUDED.clicks END,
                   CASE WHEN fold THEN coalesce(m.impressions + EXCLUDED.impressions, m.impressions,
                                                EXCLUDED.impressions)
                        ELSE EXCLUDED.impressions END,
                   CASE WHEN fold THEN coalesce(m.clicks + EXCLUDED.clicks, m.clicks, EXCLUDED.clicks)::float8
                                       / NULLIF(coalesce(m.impressions + EXCLUDED.impressions, m.impressions,
                                                         EXCLUDED.impressions), 0)
                        ELSE EXCLUDED.ctr END,
                   CASE WHEN fold THEN coalesce((m.position * m.position_weight
                                                 + EXCLUDED.position * EXCLUDED.position_weight)
                                                / (m.position_weight + EXCLUDED.position_weight),
                                                m.position, EXCLUDED.position)
                        ELSE EXCLUDED.position END,
                   CASE WHEN fold THEN coalesce(m.position_weight + EXCLUDED.position_weight, m.position_weight,
                                                EXCLUDED.position_weight)
                        ELSE EXCLUDED.position_weight END,
                   CASE WHEN fold THEN m.source_rows + EXCLUDED.source_rows ELSE EXCLUDED.source_rows END
            FROM (SELECT coalesce(m.import_id = %(import_id)s, false) AS fold) AS how
        ),
        import_id = EXCLUDED.import_id, updated_at = now()
    RETURNING (m.xmax = 0) AS inserted, m.source_rows, m.url_normalized, m.period_start, m.period_end
)
SELECT count(*) FILTER (WHERE up.inserted),
       count(*) FILTER (WHERE NOT up.inserted AND up.source_rows = s.source_rows),
       count(*) FILTER (WHERE up.source_rows > s.source_rows)
FROM up JOIN imports_stage AS s USING (url_normalized, period_start, period_end)
"""


@dataclass
class Counts:
    """The import's running tally; also its checkpoint and, at the end, its report."""

    read: int = 0
    inserted: int = 0
    updated: int = 0
    skipped: int = 0
    errors: int = 0
    # Rows whose URL and period an earlier row of the file had: added to it (``fold``).
    duplicates: int = 0
    skipped_reasons: dict = field(default_factory=dict)
    error_samples: list = field(default_factory=list)
    # Rows stored with something left out, by what ("position '-' is not a rank: …").
    notes: dict = field(default_factory=dict)
    # Rows outside the target by host (``SKIPPED_HOSTS_KEPT`` hosts at most), and the first of their URLs.
    skipped_hosts: dict = field(default_factory=dict)
    skipped_urls: list = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: dict | None) -> Counts:
        """A tally of its own from a checkpoint (``data`` keeps its dicts and lists: they are copied)."""
        return cls(**copy.deepcopy(data or {}))

    def as_dict(self) -> dict:
        return asdict(self)

    def restore(self, saved: dict) -> None:
        """Go back to an ``as_dict()`` taken earlier (a batch that rolled back is counted again)."""
        vars(self).update(vars(Counts.from_dict(saved)))

    def skip(self, reason: str) -> None:
        self.skipped += 1
        self.skipped_reasons[reason] = self.skipped_reasons.get(reason, 0) + 1

    def skip_outside(self, host: str, url: str) -> None:
        """A row whose URL, on ``host``, is outside the site target: counted, and sampled within bounds."""
        self.skip(OUTSIDE)
        hosts = self.skipped_hosts
        if host in hosts or len(hosts) < SKIPPED_HOSTS_KEPT:
            hosts[host] = hosts.get(host, 0) + 1
        urls = self.skipped_urls
        if len(urls) < SKIPPED_URLS_KEPT and (url := url[:SKIPPED_URL_LENGTH]) not in urls:
            urls.append(url)

    def note(self, what: str) -> None:
        self.notes[what] = self.notes.get(what, 0) + 1

    def duplicate(self, how: str, rows: int = 1) -> None:
        """``rows`` rows folded into an earlier one; ``how`` (a note) tells the reader what that did."""
        self.duplicates += rows
        self.notes[how] = self.notes.get(how, 0) + rows

    def error(self, row_number: int, reason: str) -> None:
        self.errors += 1
        if len(self.error_samples) < MAX_ERROR_SAMPLES:
            self.error_samples.append({"row": row_number, "reason": reason})


# Distinct raw URLs whose fate a Scope remembers. Search Console exports repeat
# each URL once a day, so most rows cost a lookup instead of a normalization.
# Bounded so memory stays flat (7 MB when full of 50-character URLs); emptied
# when full.
LOCATED_URLS = 50_000


class Outside(NamedTuple):
    """Where ``LocatedUrls`` keeps a URL outside the scope: its host, for the report's sample."""

    host: str


class LocatedUrls(dict):
    """Raw URL -> its normalized form if in scope, ``Outside`` if not; at most ``LOCATED_URLS`` entries."""

    def __init__(self):
        super().__init__()
        # One Outside per host, shared by its URLs: a tuple per URL made a file of distinct URLs all
        # outside the target 25 % slower to prepare.
        self.outside_hosts: dict[str, Outside] = {}

    def remember(self, raw: str, located: str | Outside) -> None:
        if len(self) >= LOCATED_URLS:
            self.clear()
            self.outside_hosts.clear()
        self[raw] = located

    def outside(self, host: str) -> Outside:
        found = self.outside_hosts.get(host)
        if found is None:
            found = self.outside_hosts[host] = Outside(host)
        return found


@dataclass(frozen=True)
class Scope:
    """Where rows must point to be kept, and the period for rows without a date.

    A Scope serves one import from start to end and remembers the URLs it has
    seen (``located``), for ``prepare``.
    """

    url_prefix: str = ""
    search_console_property: str = ""
    period: tuple[date, date] | None = None
    # One row per keyword and URL (a rank tracker's keyword export): rows of a URL are added up.
    keyword_rows: bool = False
    located: LocatedUrls = field(default_factory=LocatedUrls, init=False, repr=False, compare=False)


_UNSEEN = object()

_FOLDED = ("clicks and impressions summed, position weighted by impressions (a plain mean without them), "
           "CTR recomputed")
DUPLICATE_NOTE = f"row repeats a URL and period of an earlier row: added to it ({_FOLDED})"
KEYWORD_NOTE = f"keyword export: its rows are added up per URL and period ({_FOLDED})"


def position_weight(position: float | None, impressions: int | None) -> float | None:
    """What a row's position counts for when rows are added up: its impressions, or 1 without any.

    >>> position_weight(3.0, 120), position_weight(3.0, None), position_weight(3.0, 0), position_weight(None, 5)
    (120.0, 1.0, 1.0, None)
    """
    if position is None:
        return None
    return float(impressions) if impressions else 1.0


def _add(a, b):
    return None if a is None and b is None else (a or 0) + (b or 0)


def fold(kept: tuple, row: tuple) -> tuple:
    """Two records of one URL and period as one; the upsert applies the same rule across batches.

    Clicks and impressions add up (unknown on both sides stays unknown);
    position is the mean weighted by ``position_weight``; CTR is recomputed
    from the sums (unknown without clicks or impressions); the first URL
    spelling is kept.
    """
    url, normalized, start, end, clicks, impressions, _, position, weight, rows = kept
    clicks, impressions = _add(clicks, row[4]), _add(impressions, row[5])
    if position is None:
        position, weight = row[7], row[8]
    elif row[7] is not None:
        total = weight + row[8]
        position, weight = (position * weight + row[7] * row[8]) / total, total
    ctr = clicks / impressions if clicks is not None and impressions else None
    return (url, normalized, start, end, clicks, impressions, ctr, position, weight, rows + row[9])


def prepare(rows, scope: Scope, counts: Counts) -> dict[tuple, tuple]:
    """Turn parsed rows into upsert records keyed by the natural key, counting what is dropped.

    A later row with the same URL and period is folded into the earlier one
    (``fold``) and counted as a duplicate; the upsert does the same with rows
    an earlier batch of the import wrote.
    """
    records: dict[tuple, tuple] = {}
    located = scope.located
    period = scope.period
    for row in rows:
        counts.read += 1
        if isinstance(row, RowError):
            counts.error(row.number, row.reason)
            continue
        url = row.url
        normalized = located.get(url, _UNSEEN)
        if normalized is _UNSEEN:
            try:
                normalized = normalize_url(url)
            except InvalidUrl as exc:  # not remembered: rare, and the message is per row
                counts.error(row.number, f"URL {url[:200]!r}: {exc}")
                continue
            # A malformed prefix or property raises here, failing the import, as it should.
            if not in_scope(normalized, url_prefix=scope.url_prefix,
                            search_console_property=scope.search_console_property):
                normalized = located.outside(host_of(normalized))
            elif normalized == url:
                normalized = url  # one string kept, not two equal ones
            located.remember(url, normalized)
        if type(normalized) is Outside:
            counts.skip_outside(normalized.host, url)
            continue
        if row.date is not None:
            start = end = row.date
        elif period is not None:
            start, end = period
        else:
            counts.error(row.number, "no date for this row and no period for the file")
            continue
        for note in row.notes:
            counts.note(note)
        # The record is the staging table's row, in its column order.
        record = (url, normalized, start, end, row.clicks, row.impressions, row.ctr, row.position,
                  position_weight(row.position, row.impressions), 1)
        key = (normalized, start, end)
        kept = records.get(key)
        if kept is None:
            records[key] = record
        else:
            records[key] = fold(kept, record)
            counts.duplicate(KEYWORD_NOTE if scope.keyword_rows else DUPLICATE_NOTE)
    return records


@contextmanager
def batch_transaction():
    """The transaction of one batch and its checkpoint, committed without waiting for the disk.

    ``synchronous_commit = off`` for this transaction only: COMMIT returns before
    its WAL is flushed, and a crash of the *database server* can lose the last
    batches committed. That is safe here because the rows and the checkpoint
    that vouches for them commit together, and WAL replays in commit order: a
    lost batch takes its checkpoint with it, and the resumed job redoes exactly
    that batch, with identical counts. Nothing outside the database acts on a
    batch's commit, and the final commit (import done, job finished) waits for
    the disk as usual, which flushes every batch before it.
    """
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit = off")
        yield


def write_batch(work, counts: Counts, *, job_id=None, what: str = "a batch of rows"):
    """``work()`` as one batch transaction (``batch_transaction``), with ``retry_conflicts``.

    ``counts`` goes back to where it was before each try: the rolled-back
    batch's rows are read and counted again, never twice.
    """
    saved = counts.as_dict()
    return retry_conflicts(work, what=what, job_id=job_id, atomic=batch_transaction,
                           reset=lambda: counts.restore(saved))


def upsert(site_target_id: int, import_id: int | None, records: dict[tuple, tuple]) -> tuple[int, int, int]:
    """Write one batch of ``prepare``'s records; returns (inserted, updated, folded into this import's rows)."""
    if not records:
        return 0, 0, 0
    # Its own transaction unless the caller's (the staging table lives until commit).
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        cursor.execute(CREATE_STAGE)
        with cursor.copy(COPY_STAGE) as copy:
            copy.set_types(STAGE_TYPES)
            write = copy.write_row
            for record in records.values():
                write(record)
        cursor.execute(UPSERT_METRICS, {"target": site_target_id, "import_id": import_id})
        inserted, updated, folded = cursor.fetchone()
        cursor.execute(DROP_STAGE)
    return inserted, updated, folded


def write(site_target_id: int, import_id: int, records: dict[tuple, tuple], counts: Counts, scope: Scope) -> None:
    """``upsert`` one batch and count what it did."""
    inserted, updated, folded = upsert(site_target_id, import_id, records)
    counts.inserted += inserted
    counts.updated += updated
    if folded:
        counts.duplicate(KEYWORD_NOTE if scope.keyword_rows else DUPLICATE_NOTE, folded)


# Rows of one dimension table stored at most: Search Console exports stop at 1,000, so a longer
# table is not one; it is cut here (the report says so) rather than fail the Pages rows' import.
DIMENSION_ROWS_LIMIT = 100_000


def write_dimensions(site_target_id: int, import_id: int, source, period: tuple[date, date] | None, *,
                     job_id=None) -> dict:
    """Store a Search Console export's Queries, Devices and Countries tables for ``period``; the report's part.

    Each table is read to ``DIMENSION_ROWS_LIMIT`` rows and written in a transaction of its own that
    replaces the rows an earlier import stored for the same keys and period, so running it again (a
    resumed job, a re-import) changes nothing twice. A table that cannot be read is noted, bad rows are
    counted: neither fails the import. Sources without such tables (CSV, plain workbooks) give ``{}``.
    """
    tables = getattr(source, "dimensions", ())
    if not tables:
        return {}
    written = []
    for table in tables:
        entry = {"dimension": table.dimension, "label": Dimension(table.dimension).label, "table": table.name,
                 "stored": 0, "read": 0, "errors": 0, "error_samples": [], "cut_at": None, "problem": ""}
        written.append(entry)
        if period is None:
            entry["problem"] = "no period for the file"
            continue
        try:
            read = table.read(DIMENSION_ROWS_LIMIT, MAX_ERROR_SAMPLES)
        except UnreadableFile as exc:
            entry["problem"] = str(exc)
            continue

        def store(table=table, rows=read.rows):  # bound now: ruff cannot see it runs within this iteration
            return DimensionMetric.objects.store(site_target_id=site_target_id, import_id=import_id,
                                                 dimension=table.dimension, period=period, rows=rows)

        entry.update(stored=retry_conflicts(store, what=table.name, job_id=job_id), read=read.read,
                     errors=read.errors, error_samples=read.error_samples, cut_at=read.cut_at)
    return {"dimensions": written}


def batched(iterable, size: int | None = None):
    """Lists of ``size`` items (default: IMPORT_BATCH_SIZE), the last one shorter."""
    size = size or conf.get("IMPORT_BATCH_SIZE")
    batch = []
    for item in iterable:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


__all__ = ["Counts", "LocatedUrls", "ParsedRow", "RowError", "Scope", "WriteConflict",
           "batch_transaction", "batched", "fold", "position_weight", "prepare", "upsert", "write", "write_batch",
           "write_dimensions"]
