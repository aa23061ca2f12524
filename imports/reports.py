"""An import's outcome as the pages and the commands show it: its counts, what was read, its error."""

from __future__ import annotations

from jobs.models import JobStatus

from .formats.rows import quoted

# Exceptions whose message is written for the operator: the name adds nothing.
OPERATOR_ERRORS = ("ImportRejected: ",)

FIELD_LABELS = {"url": "URL", "clicks": "clicks", "impressions": "impressions", "ctr": "CTR",
                "position": "position", "date": "date"}


def operator_error(error: str) -> str:
    """The job error without the exception name when it is a message written for the operator."""
    for prefix in OPERATOR_ERRORS:
        if error.startswith(prefix):
            return error[len(prefix):]
    return error


def report_of(job) -> dict:
    """The counts of an import job: its report once done, else its last checkpoint's.

    A failed job's report is its traceback; the counts reached are in its progress.
    """
    if job is None:
        return {}
    if job.status == JobStatus.DONE and isinstance(job.report, dict):
        return job.report
    counts = job.progress.get("counts") if isinstance(job.progress, dict) else None
    return counts if isinstance(counts, dict) else {}


def notes(report: dict) -> list[tuple[str, int]]:
    """Rows stored with a value left out, by what, most frequent first."""
    found = report.get("notes")
    if not isinstance(found, dict):
        return []
    return sorted(((str(what), count) for what, count in found.items() if isinstance(count, int)),
                  key=lambda item: (-item[1], item[0]))


def period_read(report: dict) -> tuple[str, str, str] | None:
    """The period the file itself gave (first day, last day, where it was read: "Filters.csv"), or None.

    >>> period_read({"source": {"period": ["2024-02-01", "2024-02-29"], "period_from": "Filters.csv"}})
    ('2024-02-01', '2024-02-29', 'Filters.csv')
    """
    source = report.get("source")
    period = source.get("period") if isinstance(source, dict) else None
    if not (isinstance(period, list) and len(period) == 2):
        return None
    return str(period[0]), str(period[1]), str(source.get("period_from") or "")


def dimensions_stored(report: dict) -> list[str]:
    """What a Search Console export's other tables brought in, apart from the Pages counts.

    >>> dimensions_stored({"dimensions": [
    ...     {"label": "Queries", "table": "Queries.csv", "stored": 1204, "errors": 0},
    ...     {"label": "Devices", "table": "Devices.csv", "stored": 3, "errors": 1},
    ...     {"label": "Countries", "table": "Countries.csv", "stored": 0, "problem": "no period for the file"}]})
    ['Queries: 1,204 rows, Devices: 3, Countries: 0.', 'Devices.csv: 1 bad row not stored.', 'Countries.csv not stored: no period for the file.']
    """
    entries = [entry for entry in report.get("dimensions") or () if isinstance(entry, dict)]
    if not entries:
        return []
    counts = [f"{entry.get('label')}: {int(entry.get('stored') or 0):,}" for entry in entries]
    lines = [", ".join([counts[0] + " rows", *counts[1:]]) + "."]
    for entry in entries:
        table = entry.get("table")
        if entry.get("problem"):
            lines.append(f"{table} not stored: {entry['problem']}.")
        if entry.get("cut_at"):
            lines.append(f"{table} has more than {entry['cut_at']:,} rows: only the first {entry['cut_at']:,} "
                         "were read (a Search Console export has 1,000 at most).")
        if errors := entry.get("errors"):
            samples = "; ".join(f"row {sample['row']}: {sample['reason']}" for sample in
                                (entry.get("error_samples") or [])[:3])
            lines.append(f"{table}: {errors:,} bad row{'s' if errors != 1 else ''} not stored"
                         + (f" ({samples})" if samples else "") + ".")
    return lines


def what_was_read(report: dict) -> list[str]:
    """Sentences about the file as read: sheet, columns used and ignored, date order, the other tables stored."""
    source = report.get("source")
    if not isinstance(source, dict):
        return []
    lines = []
    if source.get("sheet"):
        others = source.get("other_sheets") or []
        also = f" (the workbook also has {quoted(others)})" if others else ""
        lines.append(f"Sheet read: '{source['sheet']}'{also}.")
    mapped_by = source.get("mapped_by")
    if isinstance(mapped_by, dict) and mapped_by.get("saved_on"):
        lines.append(f"Columns mapped by the org's saved mapping of {mapped_by['saved_on']} (its headers were not "
                     "recognised; Column mappings in the admin).")
    used = source.get("columns_used")
    if isinstance(used, list) and used:
        lines.append("Columns used: " + ", ".join(f"'{pair[1]}' as {FIELD_LABELS.get(pair[0], pair[0])}"
                                                  for pair in used if len(pair) == 2) + ".")
    ignored = source.get("columns_ignored")
    if isinstance(ignored, list):
        lines.append(f"Columns ignored: {quoted(ignored)}." if ignored else "Columns ignored: none.")
    order = source.get("date_order")
    if isinstance(order, dict) and order.get("text"):
        lines.append(str(order["text"]))
    return lines + dimensions_stored(report)
