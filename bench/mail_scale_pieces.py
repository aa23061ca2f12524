"""Where one mailbox's poll goes, for ``bench.mail_scale``: its IMAP commands, its statements, CPU of both ends.

Three views, each cheap enough to take on a sample:

- a bare imapclient session per mailbox (the commands a poll with nothing new
  sends), each command timed, plus STATUS, which the poller does not send, for
  comparison; the ceiling runs such sessions over every mailbox, 4 at a time;
- the app's own per-mailbox work in this process: a fresh database connection
  (pollmail's pool threads close theirs after each mailbox), then
  ``Poller.poll`` with every statement timed through Django's
  ``execute_wrapper``; the cycle's claim, load and watchdog are timed once per
  cycle and shared by the mailboxes it claimed;
- CPU time from /proc: a process's own (all its threads), and Dovecot's whole
  process tree, the children that exited included (the master reaps them, so
  their time is in its ``cutime``/``cstime``).
"""

from __future__ import annotations

import os
import re
import time
from collections import defaultdict
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
_TABLE = re.compile(r'^\s*UPDATE\s+"?(\w+)|\b(?:FROM|INTO)\s+"?(\w+)', re.IGNORECASE)
# What each statement of a poll with nothing new is, by (first keyword, table).
STATEMENT_NAMES = {
    ("SELECT", "mailpoll_foldercursor"): "DB: cursor read (SELECT foldercursor)",
    ("INSERT", "mailpoll_foldercursor"): "DB: cursor write (SAVE_CURSOR upsert)",
    ("UPDATE", "mailpoll_mailbox"): "DB: success write (UPDATE mailbox)",
}
IMAP_STEPS = ("connect (TCP, greeting, CAPABILITY)", "LOGIN", "STATUS (not sent by the poller)", "EXAMINE (SELECT read-only)",
              "UID SEARCH n:*", "LOGOUT")


# -- CPU from /proc -----------------------------------------------------------------------------

def _stat(pid: int) -> tuple[int, int, int] | None:
    """``(ppid, own ticks, reaped children's ticks)`` of a process, or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    rest = text[text.rindex(")") + 2:].split()  # the name may hold spaces and parentheses
    return int(rest[1]), int(rest[11]) + int(rest[12]), int(rest[13]) + int(rest[14])


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system, every thread) of a running process; 0 once it is gone."""
    stat = _stat(pid)
    return stat[1] / TICK if stat else 0.0


def dovecot_master(config_path: Path) -> int:
    """The pid of the Dovecot master reading ``config_path`` (its command line names the file)."""
    wanted = str(config_path).encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                args = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if wanted in args and "dovecot" in os.path.basename(args[0].decode(errors="replace")):
                return int(entry.name)
    raise RuntimeError(f"no dovecot process reads {config_path}")


def tree_cpu(root: int) -> float:
    """CPU seconds of ``root`` and its children, living ones and the exited ones it reaped."""
    total = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat and (int(entry.name) == root or stat[0] == root):
                total += stat[1] + stat[2]
    return total / TICK


# -- the bare IMAP session ---------------------------------------------------------------------

def imap_session(host: str, port: int, user: str, password: str, *, status: bool = True) -> dict[str, float]:
    """The commands of a poll with nothing new, over imapclient, each timed (seconds, by IMAP_STEPS name)."""
    from imapclient import IMAPClient

    times = {}
    clock = time.perf_counter()

    def lap(step: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        times[step] = now - clock
        clock = now

    client = IMAPClient(host, port=port, ssl=False, timeout=30)
    lap(IMAP_STEPS[0])
    client.login(user, password)
    lap(IMAP_STEPS[1])
    if status:
        client.folder_status("INBOX", [b"UIDNEXT", b"UIDVALIDITY"])
        lap(IMAP_STEPS[2])
    client.select_folder("INBOX", readonly=True)
    lap(IMAP_STEPS[3])
    client.search(["UID", "2:*"])  # the cursor plan of a folder whose last UID is 1
    lap(IMAP_STEPS[4])
    client.logout()
    lap(IMAP_STEPS[5])
    return times


def ceiling_worker(host: str, port: int, accounts: list[tuple[str, str]], threads: int, barrier, results) -> None:
    """One process: a bare session per account, ``threads`` at a time, started with the others (``barrier``)."""
    from concurrent.futures import ThreadPoolExecutor

    barrier.wait()
    started, cpu = time.time(), time.process_time()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda account: imap_session(host, port, *account, status=False), accounts))
    results.put((started, time.time(), time.process_time() - cpu))


def ceiling(host: str, port: int, accounts: list[tuple[str, str]], processes: int, threads: int) -> dict:
    """Bare sessions over every account, split across ``processes`` spawned processes of ``threads`` threads."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")  # nothing inherited from this process
    barrier, results = context.Barrier(processes), context.Queue()
    workers = [context.Process(target=ceiling_worker, daemon=True,
                               args=(host, port, accounts[n::processes], threads, barrier, results))
               for n in range(processes)]
    for worker in workers:
        worker.start()
    runs = [results.get(timeout=300) for _ in workers]
    for worker in workers:
        worker.join(10)
    seconds = max(end for _, end, _ in runs) - min(start for start, _, _ in runs)
    return {"processes": processes, "threads": threads, "seconds": seconds, "rate": len(accounts) / seconds,
            "cpu": sum(cpu for _, _, cpu in runs) / len(accounts)}


def imap_pieces(imap, users: list[str], master: int) -> dict:
    """One bare session per user, one at a time: mean seconds per step, and Dovecot's CPU per session."""
    sums: dict[str, float] = defaultdict(float)
    cpu = tree_cpu(master)
    started = time.perf_counter()
    for user in users:
        for step, seconds in imap_session(imap.host, imap.port, user, imap.passwords[user]).items():
            sums[step] += seconds
    wall = time.perf_counter() - started
    time.sleep(0.5)  # the last session's processes exit and are reaped, their CPU counted
    return {"steps": {step: sums[step] / len(users) for step in IMAP_STEPS}, "wall": wall / len(users),
            "dovecot_cpu": (tree_cpu(master) - cpu) / len(users)}


# -- the app's own work per mailbox -----------------------------------------------------------------

class StatementTimer:
    """Django ``execute_wrapper``: seconds and count of every statement, by what it is."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.count: dict[str, int] = defaultdict(int)

    def __call__(self, execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            name = statement_name(sql)
            self.seconds[name] += time.perf_counter() - started
            self.count[name] += 1


def statement_name(sql: str) -> str:
    """What a statement is, for the report.

    >>> statement_name('SELECT "mailpoll_foldercursor"."id" FROM "mailpoll_foldercursor" WHERE x')
    'DB: cursor read (SELECT foldercursor)'
    >>> statement_name('UPDATE "mailpoll_mailbox" SET "last_success_at" = 1 WHERE "id" IN (SELECT 1 FROM x)')
    'DB: success write (UPDATE mailbox)'
    >>> statement_name('SET synchronous_commit = off')
    'DB: SET synchronous_commit = off'
    """
    match = _TABLE.search(sql)
    if match is None:
        return "DB: " + " ".join(sql.split())[:40]
    key = (sql.split(None, 1)[0].upper(), match.group(1) or match.group(2))
    return STATEMENT_NAMES.get(key, f"DB: {key[0]} {key[1]}")


def app_pieces(sample_ids: list[int]) -> dict:
    """The app's work for ``sample_ids``, as pollmail's cycles do it, in this thread; mean seconds per mailbox.

    Only the sample must be due: ``claim_due`` claims MAILPOLL_CLAIM_LIMIT of them per cycle.
    Each mailbox then gets what a pool thread gives it: a new connection, ``SET
    synchronous_commit = off``, ``Poller.poll``, the connection closed.
    """
    from django.db import connection

    from jobs import dbsession
    from mailpoll.sync import watchdog
    from mailpoll.models import FolderCursor, Mailbox
    from mailpoll.sync.poller import SYNC_COMMIT_OFF, Poller

    dbsession.configure("pollmail")  # pollmail's connection options (timeouts, keepalives), as its threads have
    poller = Poller(concurrency=1)
    sums: dict[str, float] = defaultdict(float)
    timer, again = StatementTimer(), StatementTimer()
    polled = 0
    wanted = set(sample_ids)
    while polled < len(sample_ids):
        clock = time.perf_counter()
        ids = poller.claim_due()
        sums["cycle: claim (CLAIM_DUE_MAILBOXES), per mailbox"] += time.perf_counter() - clock
        if not ids or not set(ids) <= wanted:
            raise RuntimeError(f"the claim returned {ids}, not mailboxes of the sample")
        clock = time.perf_counter()
        mailboxes = list(Mailbox.objects.filter(pk__in=ids).select_related("org").order_by("pk"))
        sums["cycle: load the claimed mailboxes, per mailbox"] += time.perf_counter() - clock
        for mailbox in mailboxes:
            dbsession.close_quietly()
            clock = time.perf_counter()
            connection.ensure_connection()
            sums["DB: connect (a new connection per mailbox)"] += time.perf_counter() - clock
            with connection.execute_wrapper(timer):
                with connection.cursor() as cur:
                    cur.execute(SYNC_COMMIT_OFF)
                clock = time.perf_counter()
                [result] = poller.poll(mailbox)
                sums["Poller.poll (all of it)"] += time.perf_counter() - clock
            if result.fetched or result.error or result.failed:
                raise RuntimeError(f"mailbox={mailbox.pk} was not a poll with nothing new: {result}")
            # The same read once more on the same connection: what the first one paid for a fresh backend.
            with connection.execute_wrapper(again):
                FolderCursor.objects.filter(mailbox=mailbox, folder=result.folder).first()
            polled += 1
        clock = time.perf_counter()
        watchdog.run_once()
        sums["cycle: watchdog, per mailbox"] += time.perf_counter() - clock
    dbsession.close_quietly()
    # A cycle's work is spread over the mailboxes it claimed, like the rest.
    return {"mean": {name: seconds / polled for name, seconds in sums.items()},
            "statements": {name: (timer.count[name] / polled, timer.seconds[name] / polled) for name in timer.seconds},
            "again": sum(again.seconds.values()) / polled}
