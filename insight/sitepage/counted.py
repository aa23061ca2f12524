"""What the site page says about the "counted once" rule: the rows it left out, and each import's rows that count.

Plain text from plain figures (no I/O): the rows come from ``figures`` (``LeftOut``, ``ImportRows``), an
import's written rows from its own counts (inserted + updated).
"""

from __future__ import annotations


def left_out_text(days: int, period: str, left_out: int, rows: int) -> str:
    """Why the rows of one import covering ``days`` days (``period``) are not counted, in whole or in part.

    >>> left_out_text(28, "2026-11-07 → 2026-12-04", 4, 4)
    'The 28-day export of 2026-11-07 → 2026-12-04 is not counted: daily rows cover those days.'
    >>> left_out_text(90, "2026-09-06 → 2026-12-04", 1, 4)
    '1 of the 4 pages of the 90-day export of 2026-09-06 → 2026-12-04 is not counted: daily rows of that page cover some of its days.'
    """
    what = f"the {days}-day export of {period}"
    if left_out == rows:
        return f"{what[0].upper()}{what[1:]} is not counted: daily rows cover those days."
    verb, those = ("is", "that page") if left_out == 1 else ("are", "those pages")
    return (f"{left_out:,} of the {rows:,} {_plural('page', rows)} of {what} {verb} not counted: daily rows of "
            f"{those} cover some of its days.")


def kept_text(written: int, held: int, counted: int) -> str:
    """How many of the rows an import wrote count now, and where the others went.

    >>> kept_text(900, 900, 900)
    'all 900 rows count'
    >>> kept_text(900, 600, 600)
    '600 of 900 rows count: 300 replaced by a later import or deleted'
    >>> kept_text(900, 900, 880)
    '880 of 900 rows count: 20 left out, daily rows of the same pages cover their days'
    """
    # An import's rows of an earlier batch folded into later ones leave it holding fewer than its counts say
    # only through replacement or deletion; a count that does not add up is shown as it is, never negative.
    written = max(written, held)
    if counted == written:
        return "its 1 row counts" if written == 1 else f"all {written:,} rows count"
    reasons = []
    if written > held:
        reasons.append(f"{written - held:,} replaced by a later import or deleted")
    if held > counted:
        reasons.append(f"{held - counted:,} left out, daily rows of the same pages cover their days")
    return f"{counted:,} of {written:,} {_plural('row', written)} count: " + "; ".join(reasons)


def _plural(word: str, count: int) -> str:
    return word if count == 1 else f"{word}s"
