"""jobs.ids: the UUIDv7 ids enqueue and enqueue_many make, laid out as the database's uuidv7() lays them out."""

from __future__ import annotations

import itertools
import threading
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


class Clock:
    """time.time_ns for jobs.ids, moved by hand (milliseconds)."""

    def __init__(self, millis: int):
        self.millis = millis

    def __call__(self) -> int:
        return self.millis * 1_000_000


@pytest.fixture
def clock(monkeypatch):
    fake = Clock(time.time_ns() // 1_000_000 + 1000)
    monkeypatch.setattr(ids.time, "time_ns", fake)
    monkeypatch.setattr(ids, "_last", (0, 0))  # this test's ids start from its clock; restored after
    return fake


def test_the_random_bits_vary_in_every_position(clock):
    """74 random bits, drawn afresh each millisecond: every one of them takes both values over a few hundred ids."""
    values = []
    for _ in range(400):
        clock.millis += 1
        values.append(ids.new_id().int)
    random_mask = (0xFFF << 64) | ((1 << 62) - 1)
    seen_set, seen_clear = 0, 0
    for value in values:
        seen_set |= value & random_mask
        seen_clear |= ~value & random_mask
    assert seen_set == seen_clear == random_mask


def test_ids_only_grow_within_a_millisecond_and_when_the_clock_steps_back(clock):
    made = [ids.new_id() for _ in range(50)]  # one millisecond
    made += [uuid.UUID(line) for line in ids.new_ids_text(50).splitlines()]
    clock.millis -= 500  # an NTP step back
    made += [ids.new_id() for _ in range(5)]
    assert made == sorted(made) and len(set(made)) == len(made)
    assert {millis(value) for value in made} == {clock.millis + 500}
    steps = {b.int - a.int for a, b in itertools.pairwise(made)}
    assert len(steps) > 90  # random steps, not a counter: the next id is not guessable


def test_a_spent_millisecond_borrows_the_next(clock):
    ids._last = (clock.millis, (1 << 74) - 2)
    value = ids.new_id()
    assert millis(value) == clock.millis + 1 and value > uuid.UUID(int=clock.millis << 80)


def test_threads_share_one_order():
    made: dict[int, list[uuid.UUID]] = {}

    def make(n):
        made[n] = [ids.new_id() for _ in range(2000)]

    threads = [threading.Thread(target=make, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [value for values in made.values() for value in values]
    assert len(set(every)) == len(every) == 8000
    assert all(values == sorted(values) for values in made.values())


@pytest.mark.django_db
def test_jobs_queued_in_one_transaction_are_claimed_in_the_order_queued():
    """They tie on created_at (the transaction's start): the ids keep their order."""
    queued = [queue.enqueue("noop", org_id="demo", payload={"n": n}).id for n in range(5)]
    queue.enqueue_many("noop", org_id="demo", items=[({"n": n}, None) for n in range(5, 10)])
    queued += [queue.enqueue("noop", org_id="demo", payload={"n": 10}).id]
    claimed = [queue.claim(worker_id="t:1") for _ in range(11)]
    assert [job.payload["n"] for job in claimed] == list(range(11))
    assert [claimed[n].id for n in (0, 1, 2, 3, 4, 10)] == queued


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
