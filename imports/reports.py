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


def what_was_read(report: dict) -> list[str]:
    """Sentences about the file as read: sheet, columns used and ignored, date order."""
    source = report.get("source")
    if not isinstance(source, dict):
        return []
    lines = []
    if source.get("sheet"):
        others = source.get("other_sheets") or []
        also = f" (the workbook also has {quoted(others)})" if others else ""
        lines.append(f"Sheet read: '{source['sheet']}'{also}.")
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
    return lines
