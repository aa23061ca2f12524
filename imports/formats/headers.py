"""Which column holds which field: the header aliases, in one place.

docs/imports.md lists the same table for operators; a test keeps them in step.
Headers match whatever their case, accents, punctuation and spacing:
"AVG. POSITION", "avg position" and "Avg.position" are all "Avg. position".
"""

from __future__ import annotations

import re
import unicodedata

ALIASES: dict[str, tuple[str, ...]] = {
    "url": ("Top pages", "Pages les plus populaires", "Page", "Pages", "URL", "Landing page", "Address"),
    "clicks": ("Clicks", "Clics"),
    "impressions": ("Impressions",),
    "ctr": ("CTR",),
    "position": ("Position", "Avg. position", "Average position", "Position moyenne"),
    "date": ("Date", "Jour"),
    # Not stored: it tells a rank tracker's keyword export (one row per keyword and URL).
    "keyword": ("Keyword", "Mot clé", "Query", "Requête"),
}

METRICS = ("clicks", "impressions", "ctr", "position")

_PUNCTUATION = re.compile(r"[\s._\-:/()]+")


def fold(text: str) -> str:
    """A header reduced to what matters for matching: letters, digits, single spaces."""
    decomposed = unicodedata.normalize("NFKD", text)
    bare = "".join(char for char in decomposed if not unicodedata.combining(char))
    return _PUNCTUATION.sub(" ", bare.casefold()).strip()


_FIELD_BY_ALIAS = {fold(alias): field for field, aliases in ALIASES.items() for alias in aliases}


def field_for(header: str) -> str | None:
    """The canonical field a header stands for, or None."""
    return _FIELD_BY_ALIAS.get(fold(header))


def map_columns(headers: tuple[str, ...]) -> dict[str, int]:
    """Canonical field -> column index; the leftmost column wins when two match."""
    columns: dict[str, int] = {}
    for index, header in enumerate(headers):
        field = field_for(header)
        if field is not None and field not in columns:
            columns[field] = index
    return columns


def describe_missing(field: str, headers: tuple[str, ...]) -> str:
    """The operator-facing message for a table without a column for ``field``."""
    shown = [header for header in headers if header][:20]
    found = ", ".join(f"'{_clip(header)}'" for header in shown) or "none"
    if len(shown) < sum(1 for header in headers if header):
        found += ", …"
    label = "URL" if field == "url" else field
    return f"no {label} column: found headers {found}; expected one of: {', '.join(ALIASES[field])}"


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
