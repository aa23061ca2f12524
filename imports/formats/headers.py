"""Which column holds which field: the header aliases, in one place.

docs/imports.md lists the same table for operators; a test keeps them in step.
Headers match whatever their case, accents, punctuation and spacing:
"AVG. POSITION", "avg position" and "Avg.position" are all "Avg. position".
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

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
    """Canonical field -> column index; the leftmost column wins when two match.

    Inside ``saved_mappings(lookup)``, a header row ``lookup`` knows is mapped as it says instead.
    """
    resolve = _lookup.get()
    saved = resolve(headers) if resolve is not None else None
    if saved is not None:
        return apply_mapping(headers, saved)
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


# The fields an operator may map a column to (``keyword`` is recognised, never mapped by hand).
MAPPABLE = ("url", "clicks", "impressions", "ctr", "position", "date")

# A header row -> a saved mapping (field -> header) for it, or None; set by ``saved_mappings``.
Lookup = Callable[[tuple[str, ...]], Mapping[str, str] | None]
_lookup: ContextVar[Lookup | None] = ContextVar("imports_saved_column_mappings", default=None)


@contextmanager
def saved_mappings(lookup: Lookup) -> Iterator[None]:
    """Within the block, ``map_columns`` maps a header row ``lookup`` knows as ``lookup`` says."""
    token = _lookup.set(lookup)
    try:
        yield
    finally:
        _lookup.reset(token)


def signature(headers: tuple[str, ...]) -> str:
    """What identifies a source's header row whatever its order, case or accents: SHA-256 of the folded names.

    >>> signature(("Adresse", "Clics")) == signature(("clics", "ADRESSE"))
    True
    >>> signature(("Adresse",)) == signature(("Adresse", "Clics"))
    False
    """
    folded = sorted({fold(header) for header in headers if fold(header)})
    return hashlib.sha256("\n".join(folded).encode()).hexdigest()


def mapping_problem(headers: tuple[str, ...], mapping: Mapping[str, str]) -> str:
    """Why ``mapping`` (field -> header) cannot read a table with these headers, or "" when it can.

    >>> mapping_problem(("Adresse", "Clics"), {"url": "Adresse", "clicks": "Clics"})
    ''
    >>> mapping_problem(("Adresse", "Clics"), {"clicks": "Clics"})
    'choose the column that holds the URL'
    >>> mapping_problem(("Adresse", "Clics"), {"url": "Adresse", "clicks": "Adresse"})
    "URL and clicks both name the column 'Adresse': a column holds one field"
    """
    unknown = [field for field in mapping if field not in MAPPABLE]
    if unknown:
        return f"not a field a column can be mapped to: {', '.join(sorted(unknown))}"
    if not mapping.get("url"):
        return "choose the column that holds the URL"
    present = {fold(header) for header in headers}
    by_header: dict[str, list[str]] = {}
    for field in MAPPABLE:
        header = mapping.get(field)
        if not header:
            continue
        if fold(header) not in present:
            return f"the file has no column '{_clip(header)}'"
        by_header.setdefault(fold(header), []).append(field)
    for fields in by_header.values():
        if len(fields) > 1:
            named = " and ".join(_label(field) for field in fields)
            return f"{named} both name the column '{_clip(mapping[fields[0]])}': a column holds one field"
    return ""


def apply_mapping(headers: tuple[str, ...], mapping: Mapping[str, str]) -> dict[str, int]:
    """Field -> column index as ``mapping`` (field -> header) says; a header matches folded, leftmost first.

    >>> apply_mapping(("Adresse", "Statut", "Clics"), {"url": "ADRESSE", "clicks": "clics"})
    {'url': 0, 'clicks': 2}
    """
    index_of: dict[str, int] = {}
    for index, header in enumerate(headers):
        index_of.setdefault(fold(header), index)
    return {field: index_of[fold(header)] for field, header in mapping.items()
            if field in MAPPABLE and header and fold(header) in index_of}


def _label(field: str) -> str:
    return "URL" if field == "url" else field
