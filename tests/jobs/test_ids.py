"""jobs.ids: the UUIDv7 ids enqueue and enqueue_many make, laid out as the database's uuidv7() lays them out."""

from __future__ import annotations

import time
import uuid

import pytest
from django.db import connection

from jobs import ids, queue
from jobs.models import Job


def millis(value: uuid.UUID) -> int:
    return value.int >> 80


@pytest.mark.parametrize("make", [lambda: [ids.new_id()], lambda: [uuid.UUID(line) for line in
                                                                     ids.new_ids_text(50).splitlines()]])
def test_ids_are_version_7_of_the_rfc_variant_stamped_with_the_time_in_milliseconds(make):
    before = time.time_ns() // 1_000_000
    made = make()
    after = time.time_ns() // 1_000_000
    for value in made:
        assert value.version == 7 and value.variant == uuid.RFC_4122
        assert before <= millis(value) <= after


def test_a_batch_of_ids_is_one_line_each_all_distinct_in_postgresqls_short_form():
    lines = ids.new_ids_text(2000).splitlines()
    assert len(lines) == 2000 == len(set(lines))
    assert all(len(line) == 32 and int(line, 16) >= 0 for line in lines)
    assert ids.new_ids_text(1).count("\n") == 0


def test_the_random_bits_vary_in_every_position():
    """74 random bits: every one of them takes both values over a few hundred ids."""
    values = [ids.new_id().int for _ in range(400)]
    random_mask = (0xFFF << 64) | ((1 << 62) - 1)
    seen_set, seen_clear = 0, 0
    for value in values:
        seen_set |= value & random_mask
        seen_clear |= ~value & random_mask
    assert seen_set == seen_clear == random_mask


@pytest.mark.django_db
def test_the_database_reads_them_as_the_ids_enqueue_returns():
    job = queue.enqueue("noop", org_id="demo")
    assert job.id.version == 7 and Job.objects.get(pk=job.id).org_id == "demo"
    assert queue.enqueue_many("noop", org_id="demo", items=[({"n": n}, None) for n in range(3)]) == 3
    with connection.cursor() as cursor:
        # The id's time and the row's created_at (the database's clock, the same machine's) agree.
        cursor.execute("SELECT id, created_at FROM jobs WHERE org_id = 'demo'")
        for value, created_at in cursor.fetchall():
            assert value.version == 7
            assert abs(millis(value) - created_at.timestamp() * 1000) < 60_000
