"""An org's saved column mappings: chosen once for a source whose headers are unknown, applied from then on.

``applied(org_id)`` is the one way a file is read with them: every place that opens an org's file (the
upload form, ``importfile``, the ``import_csv`` job that mailed attachments go through) opens it within it.
The decision itself, headers and mapping -> columns or what is wrong, is ``formats.headers`` (pure).
"""

from __future__ import annotations

from contextlib import contextmanager
from itertools import islice

from django.db import transaction
from django.utils import timezone

from .formats import RowSource, UnreadableFile
from .formats.headers import MAPPABLE, mapping_problem, saved_mappings, signature
from .models import ColumnMapping

# Rows of the file shown under its headers on the mapping page.
SAMPLE_ROWS = 5
# Header rows whose lookup a block remembers: a CSV's title lines are each asked about once.
_REMEMBERED = 64


class MappingRefused(ValueError):
    """The mapping cannot read the file; the message is for the operator."""


@contextmanager
def applied(org_id: str):
    """Within the block, a header row the org has a mapping for is read with it; its ``used_at`` is set once."""
    found: dict[str, ColumnMapping | None] = {}

    def lookup(headers):
        key = signature(headers)
        if key not in found:
            if len(found) >= _REMEMBERED:
                found.clear()
            found[key] = ColumnMapping.objects.for_org(org_id).filter(signature=key).first()
            if found[key] is not None:
                ColumnMapping.objects.filter(pk=found[key].pk).update(used_at=timezone.now())
        return found[key].mapping if found[key] is not None else None

    with saved_mappings(lookup):
        yield


def saved_for(org_id: str, headers: tuple[str, ...]) -> ColumnMapping | None:
    return ColumnMapping.objects.for_org(org_id).filter(signature=signature(headers)).first()


def save(*, org_id: str, headers: tuple[str, ...], mapping: dict[str, str], user=None) -> ColumnMapping:
    """Remember ``mapping`` (field -> header) for the org's files with these headers; the last one chosen wins."""
    mapping = {field: mapping[field] for field in MAPPABLE if mapping.get(field)}
    problem = mapping_problem(headers, mapping)
    if problem:
        raise MappingRefused(problem)
    with transaction.atomic():
        saved, _ = ColumnMapping.objects.update_or_create(
            org_id=org_id, signature=signature(headers),
            defaults={"headers": list(headers), "mapping": mapping},
            create_defaults={"headers": list(headers), "mapping": mapping, "created_by": user},
        )
    return saved


def preview(open_file) -> tuple[tuple[str, ...], list[list[str]]]:
    """The header row and first ``SAMPLE_ROWS`` rows of a file refused for its columns (``open_file`` opens it).

    It is opened as if its first column held the URL, only to find its table: nothing is imported.
    """
    with saved_mappings(lambda headers: {"url": headers[0]} if headers else None):
        source: RowSource = open_file()
    # RowSource keeps its table private; the raw cells, not parsed rows, are what the operator must see.
    rows = [[("" if cell is None else str(cell))[:80] for cell in record[:len(source.headers)]]
            for record in islice(source._table.records(), SAMPLE_ROWS) if isinstance(record, (list, tuple))]
    return source.headers, rows


def is_unmapped(exc: UnreadableFile) -> bool:
    """The file was refused only because no column is recognised as the URL: a mapping can read it."""
    return str(exc).startswith("no URL column")
