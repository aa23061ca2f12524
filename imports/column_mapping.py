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

from . import conf
from .formats import RowSource, UnreadableFile, look
from .formats.headers import MAPPABLE, mapping_problem, saved_mappings, signature
from .models import ColumnMapping

# Rows of the file shown under its headers on the mapping page.
SAMPLE_ROWS = 5
# Header rows whose lookup a block remembers: a CSV's title lines are each asked about once.
_REMEMBERED = 64


class MappingRefused(ValueError):
    """The mapping cannot read the file; the message is for the operator."""


class Applied:
    """The org's mappings looked up within one ``applied`` block, by header row."""

    def __init__(self, org_id: str):
        self.org_id = org_id
        self._asked: dict[str, ColumnMapping | None] = {}  # forgotten past _REMEMBERED header rows
        self._used: dict[str, ColumnMapping] = {}  # the mappings found: one or two a file, never forgotten

    def lookup(self, headers: tuple[str, ...]):
        key = signature(headers)
        if key in self._asked:
            found = self._asked[key]
        else:
            if len(self._asked) >= _REMEMBERED:
                self._asked.clear()
            found = self._asked[key] = ColumnMapping.objects.for_org(self.org_id).filter(signature=key).first()
            if found is not None and key not in self._used:
                self._used[key] = found
                ColumnMapping.objects.filter(pk=found.pk).update(used_at=timezone.now())
        return found.mapping if found is not None else None

    def used_for(self, headers: tuple[str, ...]) -> ColumnMapping | None:
        """The mapping that read the table with these headers, if one did (no query: it was looked up)."""
        return self._used.get(signature(headers))


@contextmanager
def applied(org_id: str):
    """Within the block, a header row the org has a mapping for is read with it; its ``used_at`` is set once.

    Yields the block's ``Applied``: after a file is opened, ``used_for(source.headers)`` says which mapping,
    if any, read it (an import's report names it).
    """
    block = Applied(org_id)
    with saved_mappings(block.lookup):
        yield block


def mapped_by(saved: ColumnMapping) -> dict:
    """The mapping that read a file, as an import's report keeps it (JSON-able)."""
    return {"id": saved.pk, "saved_on": saved.created_at.date().isoformat()}


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
    Like the upload's check, it reads a bounded look (IMPORT_UPLOAD_CHECK_BYTES) of the file.
    """
    rows: list[list[str]] = []
    with look.bounded(conf.get("IMPORT_UPLOAD_CHECK_BYTES")):
        with saved_mappings(lambda headers: {"url": headers[0]} if headers else None):
            source: RowSource = open_file()
        # RowSource keeps its table private; the raw cells, not parsed rows, are what the operator must see.
        try:
            for record in islice(source._table.records(), SAMPLE_ROWS):
                if isinstance(record, (list, tuple)):
                    rows.append([("" if cell is None else str(cell))[:80] for cell in record[:len(source.headers)]])
        except look.LookExhausted:
            pass  # rows too long for the look: the headers alone are shown
    return source.headers, rows


def is_unmapped(exc: UnreadableFile) -> bool:
    """The file was refused only because no column is recognised as the URL: a mapping can read it."""
    return str(exc).startswith("no URL column")
