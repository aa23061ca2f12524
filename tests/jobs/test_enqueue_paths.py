"""enqueue and enqueue_many on their lean paths (issue 22), against the real database.

``enqueue`` builds the Job it returns from what its INSERT returns and what it was given
(``rows.queued_job``): held here to the row read back, field by field. ``enqueue_many`` sends its
items as two texts (``sql.ENQUEUE_MANY``) and skips ``ON CONFLICT`` for keyless batches: held
here to the same rules as before (order, skipped keys, exact payloads and keys, one NOTIFY).
"""

from __future__ import annotations

import decimal
import tempfile
import uuid
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import psycopg
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from jobs import conf, queue, rows, sql
from jobs.models import Job, JobStatus
from tests.support.processes import database_url

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("test_types")]

PARIS = ZoneInfo("Europe/Paris")


def as_read(job: Job) -> dict:
    """Every field's value, as ``Job`` holds it."""
    return {f.attname: getattr(job, f.attname) for f in Job._meta.concrete_fields}


@pytest.mark.parametrize("kwargs", [
    {},
    {"payload": {}},
    {"payload": None},
    {"payload": {"site_target_id": 7, "import_id": 12}},
    # jsonb orders keys its own way and writes numbers its own way: the returned job holds the database's.
    {"payload": {"zz": 1, "a": [1, 2.5, None, True], "nested": {"b": "é\n\t\"\\", "a": 1e20}, "big": 10**30}},
    # What DjangoJSONEncoder turns into strings.
    {"payload": {"when": datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC), "amount": decimal.Decimal("1.10"),
                 "ref": uuid.UUID(int=5)}},
    {"payload": ["not", "a", "dict"]},
    {"dedup_key": "noop:site-1"},
    {"run_after": datetime(2031, 3, 4, 5, 6, 7, 123456, tzinfo=PARIS)},
    {"run_after": datetime(2031, 3, 4, 5, 6, 7, tzinfo=timezone(timedelta(hours=-7)))},
    {"priority": -100, "queue_name": "reports"},
    {"priority": 100, "dedup_key": "noop:prio", "payload": {"x": "y"}, "run_after": datetime(2030, 1, 1, tzinfo=UTC)},
])
def test_the_job_enqueue_returns_is_the_row_it_inserted(kwargs):
    job = queue.enqueue("noop", org_id="demo", **kwargs)
    assert not job.get_deferred_fields()
    assert not job._state.adding and job._state.db == "default"
    read = Job.objects.get(pk=job.pk)
    assert as_read(job) == as_read(read)
    for name, value in as_read(read).items():
        # Same types too (a jsonb number read back as an int stays an int), and the same zone.
        assert type(getattr(job, name)) is type(value), name
        if isinstance(value, datetime):
            assert getattr(job, name).utcoffset() == value.utcoffset(), name
    assert job.status == JobStatus.QUEUED and job.worker_ids == []


def test_a_claimed_job_is_the_one_django_would_make_of_its_row():
    """``rows._as_job`` fills the instance without ``Model.__init__``: the same fields, the same deferred ones
    (read on first access), the same state as ``Job.from_db`` of the same row."""
    queued = queue.enqueue("noop", org_id="demo", payload={"a": [1, 2]}, dedup_key="noop:claimed", priority=3)
    claimed = queue.claim(worker_id="host:1")
    assert claimed.id == queued.id
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {sql.JOB_COLUMNS} FROM jobs WHERE id = %s", [queued.id])
        row = cursor.fetchone()
    django_made = Job.from_db("default", rows._JOB_FIELDS, [
        f.from_db_value(v, None, connection) if v is not None and hasattr(f, "from_db_value") else v
        for f, v in zip([Job._meta.get_field(n) for n in rows._JOB_FIELDS], row, strict=True)])
    ours = rows._as_job(row)
    assert ours.get_deferred_fields() == django_made.get_deferred_fields() == claimed.get_deferred_fields() != set()
    assert {k: v for k, v in vars(ours).items() if k != "_state"} == \
        {k: v for k, v in vars(django_made).items() if k != "_state"}
    assert (ours._state.adding, ours._state.db) == (django_made._state.adding, django_made._state.db) == (False, "default")
    assert ours.payload == {"a": [1, 2]} and ours.status == JobStatus.RUNNING
    # A deferred field is read when asked for, as on any Job.
    assert (ours.priority, ours.worker_ids) == (3, ["host:1"])
    assert ours == claimed and str(ours) == str(claimed)
    # The queue's cursor reads timestamptz with psycopg's own loader (rows._new_cursor): the same values, the same zone.
    assert [(t, t.tzinfo) for t in (claimed.created_at, claimed.started_at)] == \
        [(t, t.tzinfo) for t in (django_made.created_at, django_made.started_at)]


def test_each_returned_job_has_lists_of_its_own():
    first, second = queue.enqueue("noop", org_id="demo"), queue.enqueue("noop", org_id="demo")
    first.worker_ids.append("host:1")
    assert second.worker_ids == []


def test_a_conflict_returns_the_holder_as_read_from_the_database():
    holder = queue.enqueue("noop", org_id="demo", dedup_key="noop:held", payload={"first": True})
    again = queue.enqueue("noop", org_id="demo", dedup_key="noop:held", payload={"second": True})
    assert again.id == holder.id and again.payload == {"first": True}
    assert as_read(again) == as_read(Job.objects.get(pk=holder.pk))


@pytest.mark.parametrize("org_id", ["", None, 7, b"demo"])
def test_org_id_must_be_a_non_empty_string_before_anything_is_queued(org_id):
    with pytest.raises(ValueError, match="org_id is required"):
        queue.enqueue("noop", org_id=org_id)
    with pytest.raises(ValueError, match="org_id is required"):
        queue.enqueue_many("noop", org_id=org_id, items=[({}, None)])
    assert not Job.objects.exists()


@pytest.mark.parametrize("dedup_key", [7, b"noop:1", ("noop", 1)])
def test_a_dedup_key_is_a_string(dedup_key):
    with pytest.raises(ValueError, match="dedup_key must be a string"):
        queue.enqueue("noop", org_id="demo", dedup_key=dedup_key)
    assert not Job.objects.exists()


class Trace:
    """The client's side of the wire (libpq's trace) while the block runs: how many round trips it took."""

    def __enter__(self):
        self.file = tempfile.TemporaryFile("w+")
        self.pgconn = connection.connection.pgconn
        self.pgconn.trace(self.file.fileno())
        return self

    def __exit__(self, *exc):
        self.pgconn.untrace()
        self.file.seek(0)
        self.lines = self.file.read().splitlines()
        self.file.close()

    @property
    def round_trips(self) -> int:
        # Outside a pipeline, the client waits for the server's answer after every Sync it sends.
        return sum(1 for line in self.lines if line.split("\t")[1:2] == ["F"] and "\tSync" in line)


@pytest.mark.parametrize("dedup_key, payload, statement", [
    (None, {"n": 1}, sql.ENQUEUE_KEYLESS),
    ("noop:trip", {"n": 1}, sql.ENQUEUE),
    # Nothing to read back: the payload is the column's default.
    (None, {}, sql.ENQUEUE_KEYLESS_NO_PAYLOAD),
    ("noop:trip", None, sql.ENQUEUE_NO_PAYLOAD),
])
def test_an_enqueue_is_one_statement_and_one_round_trip(dedup_key, payload, statement):
    # Prepares the statement.
    queue.enqueue("noop", org_id="demo", dedup_key=dedup_key and "noop:prepare", payload=payload)
    with CaptureQueriesContext(connection) as captured, Trace() as trace:
        queue.enqueue("noop", org_id="demo", dedup_key=dedup_key, payload=payload)
    assert [q["sql"] for q in captured.captured_queries] == [statement]
    assert trace.round_trips == 1


@pytest.mark.parametrize("keyed, statement", [(False, sql.ENQUEUE_MANY_KEYLESS), (True, sql.ENQUEUE_MANY)])
def test_enqueue_many_is_one_statement_and_one_round_trip(keyed, statement):
    items = [({"n": n}, f"noop:{n}" if keyed and n % 2 else None) for n in range(50)]
    queue.enqueue_many("noop", org_id="demo", items=items[:2])  # the connection has prepared the statement
    with CaptureQueriesContext(connection) as captured, Trace() as trace:
        assert queue.enqueue_many("noop", org_id="demo", items=items[2:]) == 48
    assert [q["sql"] for q in captured.captured_queries] == [statement]
    assert trace.round_trips == 1


def in_insertion_order() -> list[Job]:
    """The jobs as their rows lie in the table: the order they were inserted in (a fresh table, nothing deleted)."""
    return list(Job.objects.raw("SELECT * FROM jobs ORDER BY ctid"))


# Payloads and keys that a join on line breaks or an array literal could get wrong.
AWKWARD = ["line\nbreak", "cr\rlf\r\n", "tab\t", "back\\slash", "quote\" and ' and `", "{braces}", "comma,",
           "null", "NULL", "", " ", "é ü 漢字 🙂", "\u2028\u2029", "\x1e\x1f", "[1, 2]"]


@pytest.mark.parametrize("keyed", [False, True])
def test_enqueue_many_keeps_payloads_keys_and_order_exactly(keyed):
    items = [({"text": text, "n": n, "nested": {"list": [text, None, 1.5]}}, f"noop:{text}:{n}" if keyed else None)
             for n, text in enumerate(AWKWARD)]
    assert queue.enqueue_many("noop", org_id="demo", items=items) == len(items)
    jobs = in_insertion_order()
    assert [(job.payload, job.dedup_key, job.enqueued_key) for job in jobs] == [(p, k, k) for p, k in items]
    assert {(job.org_id, job.type, job.status, job.priority, job.queue_name, job.run_after) for job in jobs} == {
        ("demo", "noop", JobStatus.QUEUED, 0, "default", None)}


def test_enqueue_many_gives_falsy_payloads_an_empty_object_and_takes_the_placement():
    run_after = datetime(2031, 1, 1, tzinfo=PARIS)
    items = [(None, None), ({}, None), ({"a": 1}, None)]
    assert queue.enqueue_many("noop", org_id="demo", items=items, run_after=run_after, priority=5,
                              queue_name="bulk") == 3
    jobs = in_insertion_order()
    assert [job.payload for job in jobs] == [{}, {}, {"a": 1}]
    assert {(job.run_after, job.priority, job.queue_name) for job in jobs} == {(run_after, 5, "bulk")}


def test_enqueue_many_skips_keys_held_by_live_jobs_and_repeated_within_the_batch():
    held = queue.enqueue("noop", org_id="demo", dedup_key="noop:held")
    items = [({"n": 1}, "noop:held"), ({"n": 2}, "noop:new"), ({"n": 3}, "noop:new"), ({"n": 4}, None),
             ({"n": 5}, None)]
    assert queue.enqueue_many("noop", org_id="demo", items=items) == 3
    assert Job.objects.get(dedup_key="noop:held").id == held.id
    assert Job.objects.get(dedup_key="noop:new").payload == {"n": 2}
    assert queue.enqueue_many("noop", org_id="demo", items=[({"n": 6}, "noop:held")]) == 0


# Transactional: the table is emptied by TRUNCATE after, so no thousand dead index entries are left
# behind to sway the plans other tests of this database hold to an index (test_concurrency's).
@pytest.mark.django_db(transaction=True)
def test_one_enqueue_many_of_a_thousand_keyless_items_queues_them_all():
    assert queue.enqueue_many("noop", org_id="demo", items=[({}, None)] * 1000) == 1000
    assert Job.objects.filter(status=JobStatus.QUEUED).count() == 1000


@pytest.fixture
def listener():
    """A connection LISTENing on the queue's channel; ``received()`` drains what reached it so far."""
    conn = psycopg.connect(database_url(), autocommit=True)
    conn.execute(f"LISTEN {conf.NOTIFY_CHANNEL}")

    def received(timeout: float = 0.5) -> int:
        return sum(1 for _ in conn.notifies(timeout=timeout))

    yield received
    conn.close()


@pytest.mark.django_db(transaction=True)
def test_enqueues_notify_once_per_commit_that_queued_something(listener):
    with transaction.atomic():
        queue.enqueue_many("noop", org_id="demo", items=[({"n": n}, None) for n in range(10)])
        queue.enqueue_many("noop", org_id="demo", items=[({"n": n}, f"noop:{n}") for n in range(10)])
        queue.enqueue("noop", org_id="demo")
        assert listener(timeout=0.2) == 0  # nothing before the commit
    assert listener() == 1  # PostgreSQL folds one transaction's identical notifications
    # Nothing queued, nothing notified: every key is held, the only key conflicts.
    assert queue.enqueue_many("noop", org_id="demo", items=[({}, "noop:1"), ({}, "noop:2")]) == 0
    assert queue.enqueue("noop", org_id="demo", dedup_key="noop:3") is not None
    assert listener(timeout=0.3) == 0
    assert queue.enqueue_many("noop", org_id="demo", items=[({}, None)]) == 1
    assert listener() == 1


def test_a_rolled_back_enqueue_many_leaves_nothing():
    with pytest.raises(RuntimeError), transaction.atomic():
        queue.enqueue_many("noop", org_id="demo", items=[({}, None), ({}, "noop:k")])
        raise RuntimeError("the business write failed")
    assert not Job.objects.exists()


# -- the queue's cursors ----------------------------------------------------------------------

@pytest.fixture
def preparing():
    if not conf.get("JOBS_PREPARED_STATEMENTS"):
        pytest.skip("JOBS_PREPARED_STATEMENTS is off here")


@pytest.mark.usefixtures("preparing")
def test_a_closed_queue_cursor_is_handed_out_again_and_never_to_two_statements_at_once():
    with rows.queue_cursor() as outer:
        with rows.queue_cursor() as inner:  # a statement sent while another's cursor is out
            assert inner.cursor is not outer.cursor
            inner.execute("SELECT 1")
        outer.execute("SELECT 2")
        assert outer.fetchone() == (2,)
    free = getattr(connection.connection, rows.FREE_CURSORS)
    assert {id(outer.cursor), id(inner.cursor)} <= {id(c) for c in free}
    with rows.queue_cursor() as again:
        assert again.cursor is outer.cursor or again.cursor is inner.cursor
        again.execute("SELECT 3")
        assert again.fetchone() == (3,)


@pytest.mark.usefixtures("preparing")
def test_a_queue_cursor_works_again_after_a_failed_statement():
    queue.enqueue("noop", org_id="demo", dedup_key="noop:x")
    with pytest.raises(Exception, match="duplicate key"), transaction.atomic():
        with rows.queue_cursor() as cursor:
            failed = cursor.cursor
            cursor.execute("INSERT INTO jobs (org_id, type, dedup_key) VALUES ('demo', 'noop', 'noop:x')")
    with rows.queue_cursor() as cursor:
        assert cursor.cursor is failed
    assert queue.enqueue("noop", org_id="demo").status == JobStatus.QUEUED


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("preparing")
def test_a_new_connection_has_cursors_of_its_own():
    queue.enqueue("noop", org_id="demo")
    before = connection.connection
    connection.close()
    queue.enqueue("noop", org_id="demo")
    assert connection.connection is not before
    assert all(c.connection is connection.connection for c in getattr(connection.connection, rows.FREE_CURSORS))


def test_with_prepared_statements_off_enqueue_is_the_same(settings):
    settings.JOBS_PREPARED_STATEMENTS = False
    job = queue.enqueue("noop", org_id="demo", payload={"b": 1, "a": 2}, run_after=datetime(2031, 1, 1, tzinfo=PARIS))
    assert as_read(job) == as_read(Job.objects.get(pk=job.pk))
    assert queue.enqueue_many("noop", org_id="demo", items=[({"n": 1}, "noop:off"), ({"n": 2}, None)]) == 2
    assert queue.enqueue_many("noop", org_id="demo", items=[({"n": 3}, None)]) == 1


def test_the_many_statements_split_on_the_line_break_enqueue_many_joins_with():
    # to_json never writes a line break of its own: the one thing the split relies on.
    for text in AWKWARD:
        assert "\n" not in rows.to_json({"k": text, text: [text]})
    assert "E'\\n'" in sql.ENQUEUE_MANY and "E'\\n'" in sql.ENQUEUE_MANY_KEYLESS
