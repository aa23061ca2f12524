"""The raw queue loops the app's queue is judged by: no framework, one psycopg connection, autocommit.

Three ceilings, each a table and a loop of two statements per turn (claim, then a fenced finish):

- ``minimal``: a table with only what a queue needs (id, status, attempts, payload, three times) and
  one partial index of queued rows in claim order: what PostgreSQL itself can do.
- ``minimal`` with ``batch=10``: the same table, ten jobs claimed per UPDATE and finished by one:
  the ceiling of a worker that runs several jobs at once (``runjobs --concurrency N``).
- ``schema``: the jobs table's own columns, constraints and indexes (``LIKE jobs INCLUDING ALL``) and
  its state-rules trigger, the same two lean statements: how lean our SQL is, apart from what the
  schema costs.

Each consumer runs in a fresh interpreter (spawn: nothing inherited from the benchmark's Django).
"""

from __future__ import annotations

import multiprocessing

import psycopg
from psycopg import sql

from bench.common import TIMEOUT, connect, settle

MINIMAL = "bench_minimal"
SCHEMA = "bench_ceiling"

MINIMAL_TABLE = f"""
CREATE TABLE {MINIMAL} (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    status text NOT NULL DEFAULT 'queued',
    attempts integer NOT NULL DEFAULT 0,
    payload jsonb NOT NULL DEFAULT '{{}}',
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    started_at timestamptz,
    finished_at timestamptz
);
CREATE INDEX {MINIMAL}_queued ON {MINIMAL} (created_at) WHERE status = 'queued'
"""

# Claim the oldest queued rows no one else holds, mark them running: one statement. ``{match}`` is
# ``=`` for one row (an InitPlan, as the queue's own claim) and ``IN`` for several. ``{order}`` is the
# table's claim order, the one its queued index holds: the jobs schema's is by priority, then age.
CLAIM = """
UPDATE {table}
SET status = 'running', started_at = now(), attempts = attempts + 1
WHERE id {match} (
    SELECT id FROM {table}
    WHERE status = 'queued'
    ORDER BY {order}
    LIMIT {batch}
    FOR UPDATE SKIP LOCKED
)
RETURNING id, attempts, payload
"""
ORDER = {MINIMAL: "created_at", SCHEMA: "priority DESC, created_at"}
# Finish what was claimed, each row fenced on the attempt it was claimed with.
FINISH = """
UPDATE {table} AS t
SET status = 'done', finished_at = now()
FROM unnest(%s::{id_type}[], %s::int[]) AS f(id, attempts)
WHERE t.id = f.id AND t.status = 'running' AND t.attempts = f.attempts
"""
FINISH_ONE = """
UPDATE {table}
SET status = 'done', finished_at = now()
WHERE id = %s AND status = 'running' AND attempts = %s
"""

def create_minimal(db: psycopg.Connection) -> None:
    db.execute(f"DROP TABLE IF EXISTS {MINIMAL}")
    db.execute(MINIMAL_TABLE)


def create_schema(db: psycopg.Connection) -> None:
    """A copy of the jobs table, rules included: LIKE copies its constraints and indexes, not its trigger."""
    db.execute(f"CREATE TABLE {SCHEMA} (LIKE jobs INCLUDING ALL)")
    db.execute(f"CREATE TRIGGER {SCHEMA}_state_rules BEFORE INSERT OR UPDATE ON {SCHEMA}"
               " FOR EACH ROW EXECUTE FUNCTION jobs_check_states()")


def statements(table: str, batch: int) -> tuple[str, str]:
    """The claim and finish of one loop: ``batch`` 1 is one job per turn, fenced by id and attempt."""
    claim = CLAIM.format(table=table, batch=batch, match="=" if batch == 1 else "IN", order=ORDER[table])
    if batch == 1:
        return claim, FINISH_ONE.format(table=table)
    id_type = "bigint" if table == MINIMAL else "uuid"
    return claim, FINISH.format(table=table, id_type=id_type)


def loop(server: dict, dbname: str, table: str, batch: int) -> None:
    """One consumer: claim, finish, until the table has nothing queued."""
    claim, finish = statements(table, batch)
    with connect(server, dbname) as conn:
        while True:
            rows = conn.execute(claim).fetchall()
            if not rows:
                return
            if batch == 1:
                conn.execute(finish, (rows[0][0], rows[0][1]))
            else:
                conn.execute(finish, ([r[0] for r in rows], [r[1] for r in rows]))


class RawConsumer:
    """A raw loop in a fresh interpreter, with the interface the benchmarks' drain expects."""

    def __init__(self, server: dict, dbname: str, table: str, batch: int = 1):
        self.proc = multiprocessing.get_context("spawn").Process(target=loop, args=(server, dbname, table, batch))
        self.proc.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.is_alive()

    def wait(self) -> None:
        self.proc.join(TIMEOUT)
        if self.proc.exitcode != 0:
            raise RuntimeError(f"raw queue loop exited with {self.proc.exitcode}")

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


def fill(db: psycopg.Connection, table: str, rows: int) -> None:
    """Queue ``rows`` noop jobs, each a distinct created_at as one-at-a-time enqueues give."""
    ident = sql.Identifier(table)
    if table == MINIMAL:
        statement = sql.SQL("INSERT INTO {} (payload) SELECT '{{}}' FROM generate_series(1, %s)").format(ident)
    else:
        statement = sql.SQL(
            "INSERT INTO {} (org_id, type, payload, created_at) "
            "SELECT 'bench', 'noop', '{{}}', clock_timestamp() FROM generate_series(1, %s)").format(ident)
    db.execute(statement, (rows,))


def reset(db: psycopg.Connection, table: str, rows: int) -> None:
    """Empty ``table``, queue ``rows`` noop jobs, and give every drain the same starting state."""
    db.execute(sql.SQL("TRUNCATE {} CASCADE").format(sql.Identifier(table)))  # other apps' tables point at jobs
    if rows:
        fill(db, table, rows)
    settle(db, table)


def drained(db: psycopg.Connection, table: str, jobs: int) -> tuple[float, float]:
    """(rate, window) of a finished drain, on the database's clock: first claim to last finish.

    Raises unless all ``jobs`` are done.
    """
    done, window = db.execute(sql.SQL(
        "SELECT count(*) FILTER (WHERE status = 'done'), "
        "extract(epoch FROM max(finished_at) - min(started_at))::float8 FROM {}").format(sql.Identifier(table))
    ).fetchone()
    if done != jobs:
        raise RuntimeError(f"{table}: {done} of {jobs} jobs done after the drain")
    return jobs / window, window
