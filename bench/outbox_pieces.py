"""Where a delivery's time goes: claim, POST, done, timed one by one in this process through outbox.sender.

The driver does what a sender does for each entry (``sender.run`` →
``entries.claim``, ``sender.post`` in a ``requests.Session``, ``entries.done``)
without runjobs, the sender slot or the fan-out, which a sender pays once and
not per entry. A Django execute wrapper counts the statements each piece sends
and the time from sending each to its answer (its commit included: every one
runs in autocommit); the rest of a piece is Python. A file's read and SHA-256
check (``storage.read_verified``, inside ``post``) is timed apart on a second
read of the same file, as warm in the page cache as the first.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float | None:
    """CPU seconds (user + system, every thread) of a running process; None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    rest = text[text.rindex(")") + 2:].split()  # the name may hold spaces and parentheses
    return (int(rest[11]) + int(rest[12])) / TICK


class CpuWatch:
    """CPU seconds each group of processes spends between ``start`` and ``stop`` (from /proc, 10 ms ticks).

    A group is a list of pids, read again at ``stop`` (a backend that connected
    meanwhile counts from zero); a process gone by then is left out.
    """

    def __init__(self, groups):
        self.groups = groups  # name -> callable returning the group's pids now
        self.before: dict[int, float] = {}

    def start(self) -> None:
        self.before = {pid: cpu for pids in self.groups.values() for pid in pids()
                       if (cpu := process_cpu(pid)) is not None}

    def stop(self) -> dict[str, float]:
        spent = {}
        for name, pids in self.groups.items():
            now = {pid: cpu for pid in pids() if (cpu := process_cpu(pid)) is not None}
            spent[name] = sum(cpu - self.before.get(pid, 0.0) for pid, cpu in now.items())
        return spent


class Statements:
    """A Django execute wrapper: statements sent and seconds waited, for the piece named in ``piece``."""

    def __init__(self):
        self.piece = ""
        self.count: dict[str, int] = defaultdict(int)
        self.seconds: dict[str, float] = defaultdict(float)
        self.last = 0.0

    def uncount_last(self) -> None:
        """Take the last statement out of its piece's figures (the empty claim that ends the drain)."""
        self.count[self.piece] -= 1
        self.seconds[self.piece] -= self.last

    def __call__(self, execute, sql_text, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql_text, params, many, context)
        finally:
            self.last = time.perf_counter() - started
            self.seconds[self.piece] += self.last
            self.count[self.piece] += 1


def deliver_timed(expected: int) -> tuple[dict, list]:
    """Deliver every held entry, one at a time, timing its pieces; raises unless ``expected`` were delivered.

    Returns the figures and the entries as they were claimed (for ``posts_alone``).
    """
    import requests
    from django.db import connection

    from outbox import entries, sender
    from seoinsight import storage

    pieces = ("claim", "post", "done")
    wall = defaultdict(float)
    watch = Statements()
    delivered, files, read_seconds, claimed = 0, 0, 0.0, []
    worker = sender.worker_name()
    inside = server_side(worker)
    started = time.perf_counter()
    with requests.Session() as session, connection.execute_wrapper(watch):
        while True:
            watch.piece = "claim"
            t0 = time.perf_counter()
            entry = entries.claim(worker)
            t1 = time.perf_counter()
            if entry is None:
                watch.uncount_last()
                break
            wall["claim"] += t1 - t0
            if entry.file:
                storage.read_verified(entry.file, entry.file_size, entry.file_sha256)
                read_seconds += time.perf_counter() - t1
                files += 1
                t1 = time.perf_counter()
            watch.piece = "post"
            sender.post(entry, session)
            t2 = time.perf_counter()
            watch.piece = "done"
            if not entries.done(entry):
                raise RuntimeError(f"outbox entry {entry.id} was gone before its done()")
            t3 = time.perf_counter()
            wall["post"] += t2 - t1
            wall["done"] += t3 - t2
            delivered += 1
            claimed.append(entry)
    total = time.perf_counter() - started - read_seconds - (t1 - t0)  # without the extra reads and the empty claim
    if delivered != expected:
        raise RuntimeError(f"the timed driver delivered {delivered} of {expected} entries")
    return {"entries": delivered, "files": files, "total": total, "read_verified": read_seconds,
            "baselines": baselines(), "server_side": inside,
            "pieces": {p: {"wall": wall[p], "statements": watch.count[p], "db": watch.seconds[p]} for p in pieces}
            }, claimed


def posts_alone(claimed: list) -> float:
    """Milliseconds per ``sender.post`` of the same entries again, back to back: the POST without the DB between.

    Set beside the driver's "post" it shows what the hand-offs cost (sender →
    PostgreSQL → sender → downstream, each a process woken on a busy machine)
    rather than the code. The downstream counts these as second tries: reset it after.
    """
    import requests

    from outbox import sender

    with requests.Session() as session:
        started = time.perf_counter()
        for entry in claimed:
            sender.post(entry, session)
        return (time.perf_counter() - started) / len(claimed) * 1000


def explain(statement: str, params: dict) -> tuple[float, float]:
    """(planning ms, execution ms) of one run of ``statement`` on the server, rolled back: its own cost there."""
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, params)
        (plan,) = cursor.fetchone()
        transaction.set_rollback(True)
    if isinstance(plan, str):
        plan = json.loads(plan)
    return plan[0]["Planning Time"], plan[0]["Execution Time"]


def server_side(worker: str) -> dict:
    """What the claim and the done cost inside PostgreSQL, on the outbox as the driver is about to find it."""
    from outbox import conf, sql
    from outbox.models import Entry

    first = Entry.objects.order_by("next_attempt_at", "id").values_list("id", flat=True).first()
    return {"claim": explain(sql.CLAIM, {"worker": worker, "lease": float(conf.get("OUTBOX_LEASE_SECONDS"))}),
            "done": explain(sql.DONE, {"id": first})}


def baselines(count: int = 300) -> dict:
    """Milliseconds of a round trip (``SELECT 1``) and of a one-row write with its commit, on this connection.

    The two halves of a claim's or a done's DB time: each is one statement in
    autocommit, so each waits for its commit's WAL flush (synchronous_commit=on).
    The write goes to a logged table made for it (a temporary table writes no WAL).
    """
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE bench_tick (id int PRIMARY KEY, n int NOT NULL)")
        cursor.execute("INSERT INTO bench_tick VALUES (1, 0)")
        timed = {}
        for name, statement in (("select", "SELECT 1"), ("write", "UPDATE bench_tick SET n = n + 1 WHERE id = 1")):
            started = time.perf_counter()
            for _ in range(count):
                cursor.execute(statement)
            timed[name] = (time.perf_counter() - started) / count * 1000
        cursor.execute("DROP TABLE bench_tick")
    return timed


def report_lines(p: dict, ceiling_ms: float) -> list[str]:
    """The report's "where the time goes" block, per entry."""
    n = p["entries"]
    lines = [f"where the time goes: {n:,} other entries ({p['files']:,} with a file) delivered one by one in "
             f"this process through outbox.sender (no runjobs, slot or fan-out): {n / p['total']:,.0f} entries/s",
             f"  {'piece':<30}{'ms/entry':>9}{'of it: DB':>11}{'statements':>12}{'share':>8}"]
    for name, piece in p["pieces"].items():
        lines.append(f"  {name:<30}{piece['wall'] / n * 1000:9.2f}{piece['db'] / n * 1000:11.2f}"
                     f"{piece['statements'] / n:12.2f}{piece['wall'] / p['total'] * 100:7.0f} %")
    if p["files"]:
        lines.append(f"  {'  of post: file read + sha256':<30}{p['read_verified'] / n * 1000:9.2f}"
                     f"{'':>31}  ({p['read_verified'] / p['files'] * 1000:.2f} ms per file, timed apart)")
    lines.append(f"  {'  post again, back to back':<30}{p['posts_alone']:9.2f}{'':>31}  (the same posts, no DB between)")
    lines.append(f"  {'the ceiling, one POST':<30}{ceiling_ms:9.2f}{'':>31}  (the 1-worker drain's)")
    for name, (planning, execution) in p["server_side"].items():
        lines.append(f"  {name} inside PostgreSQL (EXPLAIN ANALYZE, once): planning {planning:.2f} ms, "
                     f"execution {execution:.2f} ms; the rest of its DB time is the round trip and the commit")
    b = p["baselines"]
    lines.append(f"  for scale: a round trip (SELECT 1) {b['select']:.2f} ms, a one-row UPDATE with its commit "
                 f"{b['write']:.2f} ms, on the same connection")
    return lines
