"""Cells of the admin's change lists that cannot widen a list past a 1,400 px screen, whatever they hold.

A file name, a client's name or a URL prefix is cut to a number of characters (whole on hover) and may
break anywhere, but keeps ``width`` characters of room so it is not squeezed to a letter a line; a count
carries thousands separators.
"""

from django.utils.html import format_html


def shortened(text: str, limit: int, *, tail: int = 0, width: int = 0):
    """``text`` cut to ``limit`` characters, whole on hover; ``tail`` characters of its end kept (a file's
    dates and extension); ``width``: the characters of room it keeps (0: none).

    >>> print(shortened("report-2026-11-30.csv", 12, tail=4))
    <span title="report-2026-11-30.csv" style="overflow-wrap:anywhere">report-….csv</span>
    """
    shown = text
    if len(text) > limit:
        shown = text[:limit - tail - 1] + "…" + (text[-tail:] if tail else "")
    room = f";display:inline-block;min-width:{width}ch" if width else ""
    return format_html('<span title="{}" style="overflow-wrap:anywhere{}">{}</span>', text, room, shown)


def count(value: int | None) -> str:
    """A count as the list shows it: ``1,234,567``; a dash when unknown.

    >>> count(1234567), count(None)
    ('1,234,567', '—')
    """
    return "—" if value is None else f"{value:,}"
