"""Retention's pure rules (jobs.retention): ages as operators write them, the id bound, the passes of a prune."""

import os
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from jobs import retention
from jobs.retention import format_age, ids_before, parse_age, plan

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def uuid7_at(moment: datetime) -> uuid.UUID:
    """A UUIDv7 as uuidv7() makes it at ``moment``: its millisecond, then random bits, version 7, variant 10."""
    rest = bytearray(os.urandom(10))
    rest[0] = (rest[0] & 0x0F) | 0x70
    rest[2] = (rest[2] & 0x3F) | 0x80
    millis = (moment - retention.EPOCH) // timedelta(milliseconds=1)
    return uuid.UUID(bytes=millis.to_bytes(6, "big") + bytes(rest))


@pytest.mark.parametrize(("text", "age"), [
    ("14d", timedelta(days=14)),
    ("90d", timedelta(days=90)),
    ("12h", timedelta(hours=12)),
    ("30m", timedelta(minutes=30)),
    ("45s", timedelta(seconds=45)),
    ("2w", timedelta(weeks=2)),
    ("1d12h", timedelta(days=1, hours=12)),
    (" 14D ", timedelta(days=14)),
    ("1d 6h", timedelta(days=1, hours=6)),
    ("never", None),
    ("NEVER", None),
])
def test_an_age_is_a_number_and_a_unit_or_never(text, age):
    assert parse_age(text) == age


@pytest.mark.parametrize(("text", "says"), [
    ("14", "write a number and a unit"),
    ("", "write a number and a unit"),
    ("d", "write a number and a unit"),
    ("14 days", "write a number and a unit"),
    ("14y", "write a number and a unit"),
    ("-3d", "write a number and a unit"),
    ("1.5d", "write a number and a unit"),
    ("14d!", "write a number and a unit"),
    ("0d", "more than zero"),
    ("0h0m", "more than zero"),
])
def test_anything_else_is_refused_saying_what_is_accepted(text, says):
    with pytest.raises(ValueError, match=says):
        parse_age(text)


@pytest.mark.parametrize(("age", "text"), [
    (timedelta(days=14), "14d"),
    (timedelta(weeks=2), "14d"),
    (timedelta(hours=36), "36h"),
    (timedelta(minutes=90), "90m"),
    (timedelta(seconds=61), "61s"),
    (None, "never"),
])
def test_an_age_is_written_back_in_its_largest_whole_unit(age, text):
    assert format_age(age) == text
    assert parse_age(text) == age


@pytest.mark.parametrize("offset_ms", [-86_400_000, -1, -0.5, 0, 0.4])
def test_an_id_made_at_or_before_a_moment_is_below_its_bound(offset_ms):
    moment = NOW + timedelta(microseconds=123_456)
    made = moment + timedelta(milliseconds=offset_ms)
    assert uuid7_at(made) < ids_before(moment)


@pytest.mark.parametrize("offset_ms", [1, 2, 86_400_000])
def test_an_id_made_a_millisecond_later_or_more_is_not(offset_ms):
    moment = NOW.replace(microsecond=0)
    assert uuid7_at(moment + timedelta(milliseconds=offset_ms)) >= ids_before(moment)


def test_the_bound_sorts_as_postgresql_sorts_uuids_byte_by_byte():
    # Python's UUID order is the 128-bit integer's, i.e. the bytes' big-endian order: PostgreSQL's memcmp.
    early, late = ids_before(NOW), ids_before(NOW + timedelta(milliseconds=1))
    assert early.bytes < late.bytes and early < late
    assert early.bytes[6:] == bytes(10)


@pytest.mark.parametrize(("done_after", "failed_after", "statuses"), [
    (timedelta(days=14), timedelta(days=90), ["done", "failed"]),
    (timedelta(days=14), None, ["done"]),
    (None, timedelta(days=90), ["failed"]),
    (None, None, []),
])
def test_a_prune_has_one_pass_per_status_with_an_age(done_after, failed_after, statuses):
    passes = plan(now=NOW, done_after=done_after, failed_after=failed_after)
    assert [p.status for p in passes] == statuses
    for p in passes:
        age = done_after if p.status == "done" else failed_after
        assert (p.older_than, p.cutoff, p.id_below) == (age, NOW - age, ids_before(NOW - age))


def test_map_reconcile_is_kept_whatever_the_settings_say(settings):
    settings.JOBS_PRUNE_KEEP_TYPES = ["audit", "map_reconcile", " "]
    assert retention.kept_types() == ("map_reconcile", "audit")
    settings.JOBS_PRUNE_KEEP_TYPES = []
    assert retention.kept_types() == ("map_reconcile",)


@pytest.mark.parametrize(("values", "ids"), [
    ({}, []),
    ({"JOBS_PRUNE_DONE_AFTER": "never", "JOBS_PRUNE_FAILED_AFTER": "1d12h"}, []),
    ({"JOBS_PRUNE_DONE_AFTER": "14"}, ["jobs.E020"]),
    ({"JOBS_PRUNE_DONE_AFTER": "0d", "JOBS_PRUNE_FAILED_AFTER": "ninety days"}, ["jobs.E020", "jobs.E020"]),
    ({"JOBS_PRUNE_BATCH": 0}, ["jobs.E021"]),
])
def test_the_system_check_names_prune_settings_the_prune_cannot_use(settings, values, ids):
    for name, value in values.items():
        setattr(settings, name, value)
    assert [e.id for e in retention.check_prune_settings()] == ids
