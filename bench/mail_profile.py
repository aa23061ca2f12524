"""Where pollmail's time goes: Poller.poll under cProfile in this process, with libpq's trace of its statements."""

from __future__ import annotations

import cProfile
import datetime
import pstats
import time
from pathlib import Path

from bench.common import ROOT

# (group, module path suffix, function, only when called from this function or None)
GROUPS = [
    ("IMAP: login, select, search, sizes, fetch", "mailpoll/providers/imap.py", name, None)
    for name in ("connect", "close", "folder_status", "search", "sizes", "fetch", "fetch_headers")
] + [
    ("parse (mailpoll.parse)", "mailpoll/message/parse.py", "parse_message", None),
    ("triage (mailpoll.triage)", "mailpoll/message/triage.py", "triage", None),
    ("file writes (save_content)", "mailpoll/sync/store.py", "save_content", None),
    ("DB: dedup SELECT (stored_refs, one per batch)", "mailpoll/sync/store.py", "stored_refs", None),
    # BEGIN, INSERT_MESSAGES, the jobs' INSERT and COMMIT: one transaction per batch.
    ("DB: insert rows, queue jobs, COMMIT (_insert)", "mailpoll/sync/store.py", "_insert", None),
]


def profile_poll(mailbox, trace: Path) -> tuple[pstats.Stats, float]:
    """Poller.poll under cProfile, with libpq's trace of every message to and from PostgreSQL."""
    from django.db import connection

    from mailpoll.sync.poller import Poller

    connection.ensure_connection()
    profiler = cProfile.Profile()
    with trace.open("w") as out:
        connection.connection.pgconn.trace(out.fileno())
        started = time.perf_counter()
        profiler.enable()
        try:
            Poller().poll(mailbox)
        finally:
            profiler.disable()
            connection.connection.pgconn.untrace()
    return pstats.Stats(profiler), time.perf_counter() - started


def statements(trace: Path) -> dict[str, list]:
    """Statements sent, by first keyword: [count, seconds from sending to ReadyForQuery].

    A libpq trace line is "timestamp, F|B, length, message, contents"; a statement's
    text may run over several lines, so its keyword can be on the next one.
    """
    found: dict[str, list] = {}
    pending = sent = None
    for line in trace.read_text(errors="replace").splitlines():
        fields = line.split("\t")
        if len(fields) >= 4 and fields[0][:2] == "20" and fields[1] in ("F", "B"):
            when = datetime.datetime.strptime(fields[0], "%Y-%m-%d %H:%M:%S.%f").timestamp()
            if fields[1] == "F" and fields[3] == "Query":
                pending, sent = fields[4].strip(' "') if len(fields) > 4 else "", when
            elif fields[1] == "B" and fields[3] == "ReadyForQuery" and sent is not None:
                keyword = (pending or "?").split()[0] if pending else "?"
                entry = found.setdefault(keyword, [0, 0.0])
                entry[0] += 1
                entry[1] += when - sent
                pending = sent = None
        elif pending == "" and line.strip():
            pending = line.strip()  # the statement began on the next line
    return found


def time_groups(stats: pstats.Stats) -> tuple[float, dict[str, float]]:
    """Cumulative seconds per group, and the whole poll's. The groups do not nest in one another."""
    total, groups = 0.0, {}
    for (path, _line, name), (_cc, _nc, _tt, cumulative, callers) in stats.stats.items():
        if path.endswith("mailpoll/sync/poller.py") and name == "poll":
            total = cumulative
        for group, suffix, function, caller in GROUPS:
            if path.endswith(suffix) and name == function:
                if caller is not None:
                    cumulative = sum(c[3] for key, c in callers.items() if key[2] == caller)
                groups[group] = groups.get(group, 0.0) + cumulative
    groups["other (loop, cursor, ORM overhead)"] = total - sum(groups.values())
    return total, groups


def top_entries(stats: pstats.Stats, limit: int) -> list[tuple[float, float, int, str]]:
    """The functions with the most time of their own (builtins included): where the clock actually ran."""
    rows = []
    for (path, line, name), (_cc, calls, own, cumulative, _callers) in stats.stats.items():
        short = path.split("site-packages/")[-1].replace(str(ROOT) + "/", "")
        where = name if path == "~" else f"{short.split('/lib/python3')[-1].lstrip('.0123456789/')}:{line}({name})"
        rows.append((own, cumulative, calls, where))
    return sorted(rows, reverse=True)[:limit]
