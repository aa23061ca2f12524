"""What bench.live watches while it delivers: the appends, the Request rows, and pollmail's own log.

Every time is ``time.time()`` of this machine, the clock pollmail's log lines
and PostgreSQL's ``now()`` read too, so times taken in three processes line up.
Each watcher runs on a thread of its own until its ``stop``; none asserts, they
only record, and ``bench.live`` turns the records into figures.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime

from bench.common import AppProcess, connect

DB_POLL = 0.005  # seconds between the arrival watcher's looks at mailpoll_request
SYNC_LINE = re.compile(r"live (?P<why>[a-z ]+): fetched=(?P<fetched>\d+) stored=(?P<stored>\d+)")


def message(mode: str, n: int, token: str) -> bytes:
    """A small plain-text report, its own Message-ID and subject (``<mode> <n>``) naming the delivery."""
    return (f"From: Reports <reports@shop.example>\r\nTo: intake@seoinsight.example\r\n"
            f"Subject: live bench {mode} {n}\r\nMessage-ID: <{mode}-{n}-{token}@bench.seoinsight.example>\r\n"
            f"Date: {time.strftime('%a, %d %b %Y %H:%M:%S +0000', time.gmtime())}\r\nMIME-Version: 1.0\r\n"
            f"Content-Type: text/plain; charset=utf-8\r\n\r\n"
            f"Weekly report {n}: https://shop.example/page-{n} lost 3 positions.\r\n").encode()


def subject_number(subject: str, mode: str) -> int | None:
    prefix = f"live bench {mode} "
    return int(subject[len(prefix):]) if subject.startswith(prefix) else None


@dataclass
class Delivery:
    n: int  # 1-based: the n-th message of the folder, so EXISTS n announces it
    before: float = 0.0  # just before APPEND was sent
    appended: float = 0.0  # APPEND's tagged OK read
    inserted: float | None = None  # the Request's created_at: now() of the storing transaction
    seen: float | None = None  # the arrival watcher found the committed row
    copies: int = 0  # Requests found for it (exactly once: 1)

    @property
    def latency(self) -> float | None:
        return None if self.seen is None else self.seen - self.before


def schedule(count: int, pace: float, seed: int) -> list[float]:
    """Seconds from the start of each APPEND: gaps drawn uniformly from 0.8-1.2 x ``pace``, the same every run.

    Not a fixed beat: mail arrives at any point of the live loop's cycle (in IDLE, or reading the folder).
    """
    rand = random.Random(seed)
    at, times = 0.0, []
    for _ in range(count):
        times.append(at)
        at += pace * rand.uniform(0.8, 1.2)
    return times


def appender(imap, user: str, mode: str, deliveries: list[Delivery], times: list[float], token: str) -> None:
    """APPEND one message at each of ``times`` over one session (a schedule, so no drift)."""
    client = imap.connect(user)
    try:
        start = time.monotonic()
        for d, at in zip(deliveries, times, strict=True):
            delay = start + at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            raw = message(mode, d.n, token)
            d.before = time.time()
            client.append("INBOX", raw)
            d.appended = time.time()
    finally:
        client.logout()


class ArrivalWatch(threading.Thread):
    """Looks at the mailbox's Requests every DB_POLL seconds (own connection): when each is first seen, committed."""

    def __init__(self, server: dict, dbname: str, mailbox_id: int, mode: str, deliveries: list[Delivery]):
        super().__init__(daemon=True, name="bench-arrivals")
        self.db = connect(server, dbname)
        self.mailbox_id, self.mode = mailbox_id, mode
        self.by_n = {d.n: d for d in deliveries}
        self.stop = threading.Event()
        self.others = 0  # Requests that are none of ours (there should be none)
        self.statuses: dict[str, int] = {}
        self.batches: dict[float, int] = {}  # created_at (one per storing transaction) -> Requests

    def run(self) -> None:
        last = 0
        try:
            while not self.stop.is_set():
                rows = self.db.execute(
                    "SELECT id, subject, status, extract(epoch FROM created_at)::float8 FROM mailpoll_request "
                    "WHERE mailbox_id = %s AND id > %s ORDER BY id", (self.mailbox_id, last)).fetchall()
                now = time.time()
                for pk, subject, status, created in rows:
                    last = pk
                    self.statuses[status] = self.statuses.get(status, 0) + 1
                    self.batches[created] = self.batches.get(created, 0) + 1
                    d = self.by_n.get(subject_number(subject, self.mode))
                    if d is None:
                        self.others += 1
                        continue
                    d.copies += 1
                    if d.seen is None:
                        d.seen, d.inserted = now, created
                time.sleep(DB_POLL)
        finally:
            self.db.close()

    def all_seen(self) -> bool:
        return all(d.seen is not None for d in self.by_n.values())


class LoggedProcess(AppProcess):
    """``AppProcess`` with settings of its own (its log level, JSON lines, short timers), its log read as it runs."""

    def lines(self) -> list[dict]:
        """The JSON log lines written so far (readable while it runs)."""
        return parse_log(self.log.read_text(errors="replace") if self.log.exists() else self.output)


def parse_log(text: str) -> list[dict]:
    lines = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "time" in record:
            record["at"] = datetime.fromisoformat(record["time"]).timestamp()
            lines.append(record)
    return lines


@dataclass
class Syncs:
    """The live loop's reads of its folder, from its INFO lines: what each read on new mail stored."""

    stored: list[int] = field(default_factory=list)  # one per read on new mail
    other: int = 0  # reads for another reason (connected, check after silence)

    @classmethod
    def from_log(cls, lines: list[dict]) -> Syncs:
        syncs = cls()
        for record in lines:
            match = SYNC_LINE.search(record.get("message", ""))
            if match is None:
                continue
            if match["why"] == "new mail":
                syncs.stored.append(int(match["stored"]))
            else:
                syncs.other += 1
        return syncs


@dataclass
class Read:
    """One read of the folder on new mail, from the live thread's DEBUG lines (imaplib's protocol trace)."""

    woke: float  # "left IDLE (new-mail)": the EXISTS was read and DONE answered
    fetched: float | None = None  # the last FETCH's tagged OK: the IMAP part is over
    ended: float | None = None  # the read's INFO line: stored, committed, cursor saved
    idled: float | None = None  # "+ idling": back in IDLE
    stored: int = 0


def reads_from_trace(lines: list[dict]) -> list[Read]:
    reads: list[Read] = []
    current = None
    for record in lines:
        if not str(record.get("thread", "")).startswith("pollmail-live-"):
            continue
        text, at = record.get("message", ""), record["at"]
        if "left IDLE (new-mail)" in text:
            current = Read(at)
        elif current is not None and text.startswith("< b'") and " OK Fetch completed" in text:
            current.fetched = at
        elif current is not None and (match := SYNC_LINE.search(text)) and match["why"] == "new mail":
            current.ended, current.stored = at, int(match["stored"])
            reads.append(current)
            current = None
        elif reads and reads[-1].idled is None and text.startswith("< b'+ idling"):
            reads[-1].idled = at
    return [read for read in reads if read.fetched is not None and read.idled is not None]


def read_of(reads: list[Read], inserted: float) -> Read | None:
    """The read that stored a Request inserted at ``inserted``: woken before it, ended after it."""
    return next((r for r in reads if r.woke <= inserted + 0.001 and r.ended >= inserted - 0.001), None)
