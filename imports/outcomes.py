"""What a done import brought in, and how the pages say it: pure functions over its counts and report.

``decide_outcome`` is the rule both import jobs apply when they mark an import done; the rest turns the
counts and the report's sample of rows outside the target (``ingest.Counts.skipped_hosts`` and
``skipped_urls``) into the sentences and the host list the pages and ``importfile`` show.
"""

from __future__ import annotations

from math import ceil

from .models import ImportOutcome, ImportStatus

# More than this share of the data rows not imported (skipped or bad) is a warning, not a plain success.
MOSTLY_SKIPPED_SHARE = 0.5
HOSTS_SHOWN = 5
# How many host names stand for the skipped rows when asking which site they are on (``weighted_hosts``).
HOST_WEIGHT_BUDGET = 1000

# The status as the pages show it: a done import that did not plainly succeed shows its outcome instead.
SHOWN_LABELS = {**dict(ImportStatus.choices), **dict(ImportOutcome.choices)}
WARNING_OUTCOMES = (ImportOutcome.MOSTLY_SKIPPED, ImportOutcome.NOTHING_IMPORTED)


def decide_outcome(*, read: int, skipped: int, errors: int) -> ImportOutcome:
    """The outcome of an import that read ``read`` data rows, of which ``skipped`` were skipped and ``errors`` bad.

    Rows added up into an earlier one (a repeated URL and period) were imported: they count as neither.

    >>> decide_outcome(read=10, skipped=5, errors=0).label
    'Imported'
    >>> decide_outcome(read=10, skipped=4, errors=2).label
    'Mostly skipped'
    >>> decide_outcome(read=10, skipped=10, errors=0).label, decide_outcome(read=0, skipped=0, errors=0).label
    ('Nothing imported', 'Nothing imported')
    """
    not_imported = skipped + errors
    if not_imported >= read:
        return ImportOutcome.NOTHING_IMPORTED
    if not_imported > read * MOSTLY_SKIPPED_SHARE:
        return ImportOutcome.MOSTLY_SKIPPED
    return ImportOutcome.IMPORTED


def shown_status(status: str, outcome: str) -> str:
    """The status a page shows: the outcome of a done import that was mostly or wholly skipped, else the status.

    >>> shown_status("done", "nothing_imported"), shown_status("done", "imported"), shown_status("failed", "")
    ('nothing_imported', 'done', 'failed')
    """
    return outcome if status == ImportStatus.DONE and outcome in WARNING_OUTCOMES else status


def outcome_reason(outcome: str, *, read: int, skipped: int, errors: int, skipped_reasons: dict) -> str:
    """Why a done import was mostly or wholly skipped, in one sentence; "" for a plain success.

    >>> outcome_reason("nothing_imported", read=1204, skipped=1204, errors=0,
    ...                skipped_reasons={"outside the site target": 1204})
    'None of the 1,204 rows was imported: 1,204 outside the site target.'
    >>> outcome_reason("mostly_skipped", read=10, skipped=5, errors=1, skipped_reasons={"outside the site target": 5})
    'Only 4 of the 10 rows were imported: 5 outside the site target, 1 with an error.'
    """
    if outcome not in WARNING_OUTCOMES:
        return ""
    if read == 0:
        return "The file has no data rows."
    found = skipped_reasons if isinstance(skipped_reasons, dict) else {}
    reasons = sorted(((str(why), n) for why, n in found.items() if isinstance(n, int) and n > 0),
                     key=lambda item: (-item[1], item[0]))
    unexplained = skipped - sum(n for _, n in reasons)  # a report that is gone (its job pruned)
    if unexplained > 0:
        reasons.append(("skipped", unexplained))
    if errors:
        reasons.append(("with an error" if errors == 1 else "with errors", errors))
    why = ", ".join(f"{n:,} {what}" for what, n in reasons)
    if outcome == ImportOutcome.NOTHING_IMPORTED:
        return f"None of the {read:,} rows was imported: {why}." if read > 1 else f"The row was not imported: {why}."
    imported = read - skipped - errors
    return f"Only {imported:,} of the {read:,} rows {'was' if imported == 1 else 'were'} imported: {why}."


def skipped_hosts(report: dict) -> dict[str, int]:
    """Rows outside the target by host, as the report kept them (``ingest.Counts.skipped_hosts``)."""
    hosts = report.get("skipped_hosts")
    if not isinstance(hosts, dict):
        return {}
    return {str(host): count for host, count in hosts.items() if isinstance(count, int) and count > 0}


def top_hosts(hosts: dict[str, int], shown: int = HOSTS_SHOWN) -> list[tuple[str, int]]:
    """The ``shown`` hosts with the most rows, most first (then by name).

    >>> top_hosts({"b.example": 3, "a.example": 3, "c.example": 9}, shown=2)
    [('c.example', 9), ('a.example', 3)]
    """
    return sorted(hosts.items(), key=lambda item: (-item[1], item[0]))[:shown]


def skipped_urls(report: dict) -> list[str]:
    urls = report.get("skipped_urls")
    return [url for url in urls if isinstance(url, str)] if isinstance(urls, list) else []


def weighted_hosts(hosts: dict[str, int], budget: int = HOST_WEIGHT_BUDGET) -> list[str]:
    """Each host repeated in proportion to its rows, about ``budget`` names in all (at least once each).

    What ``seoinsight.sites.site_for_urls`` weighs: the site most rows are on, without a name per row.

    >>> sorted(weighted_hosts({"a.example": 3, "b.example": 1}))
    ['a.example', 'a.example', 'a.example', 'b.example']
    >>> weighted_hosts({"a.example": 900_000, "b.example": 100_000}, budget=10).count("a.example")
    9
    """
    unit = max(1, ceil(sum(hosts.values()) / budget))
    return [host for host, count in hosts.items() for _ in range(max(1, round(count / unit)))]
