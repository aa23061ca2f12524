"""What a job is for: the import, attachment or site target its payload names, for the admin's list.

The queue sits below the apps whose types it runs and cannot read their rows, so each app registers
a describer for its own types from its ``AppConfig.ready`` (as it registers its duties). A describer
is given every job of its types on one admin page at once and answers with one query, and it
describes a job only by a row of the job's own org: a payload naming another org's row describes
nothing, so the list never shows (or links to) what its reader may not reach.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

from django.db import models


@dataclass(frozen=True)
class Subject:
    """A row a job works on: ``label`` names it; ``model`` and ``pk`` find its admin page."""

    label: str
    model: type[models.Model]
    pk: object


# Jobs of the describer's types (any org) -> the subject of each job it could describe, by job id.
Describer = Callable[[Sequence], Mapping[UUID, Subject]]

_describers: dict[str, Describer] = {}

# Ids are bigint primary keys: a larger number names no row.
BIGINT_END = 2**63


def register(job_types: Iterable[str], describer: Describer) -> None:
    """Describe the jobs of ``job_types`` with ``describer``; registering a type again replaces its describer."""
    for job_type in job_types:
        _describers[job_type] = describer


def describe(jobs: Iterable) -> dict[UUID, Subject]:
    """The subject of each of ``jobs`` that has one, by job id: one call per describer, whatever the types."""
    batches: dict[Describer, list] = {}
    for job in jobs:
        describer = _describers.get(job.type)
        if describer is not None:
            batches.setdefault(describer, []).append(job)
    subjects: dict[UUID, Subject] = {}
    for describer, batch in batches.items():
        subjects.update(describer(batch))
    return subjects


def payload_ids(jobs: Iterable, key: str) -> dict[UUID, int]:
    """``payload[key]`` of each job where it is a row id (a positive bigint, or its digits); the others are left out.

    >>> from types import SimpleNamespace as Job
    >>> payload_ids([Job(pk=1, payload={"import_id": 7}), Job(pk=2, payload={"import_id": "8"}),
    ...              Job(pk=3, payload={"import_id": True}), Job(pk=4, payload={})], "import_id")
    {1: 7, 2: 8}
    """
    ids = {}
    for job in jobs:
        value = job.payload.get(key) if isinstance(job.payload, dict) else None
        if isinstance(value, str) and value.isascii() and value.isdigit():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value < BIGINT_END:
            ids[job.pk] = value
    return ids


def by_payload_id(key: str, rows: models.QuerySet, *, org_of: Callable[[models.Model], str],
                  label: Callable[[models.Model], str]) -> Describer:
    """A describer for types whose ``payload[key]`` is the id of one of ``rows``: one query per page.

    ``org_of(row)`` is the row's org id: a row of another org than the job's describes nothing.
    """

    def describe_jobs(jobs: Sequence) -> dict[UUID, Subject]:
        ids = payload_ids(jobs, key)
        found = rows.in_bulk(set(ids.values()))
        subjects = {}
        for job in jobs:
            row = found.get(ids.get(job.pk))
            if row is not None and org_of(row) == job.org_id:
                subjects[job.pk] = Subject(label(row), type(row), row.pk)
        return subjects

    return describe_jobs
