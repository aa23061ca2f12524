"""Mail scale benchmark: 1,000 IMAP mailboxes with nothing new, polled by 1 and by 3 ``pollmail`` processes.

    .venv/bin/python -m bench.mail_scale [--mailboxes 1000] [--sample 100]

Not a test: it prints figures and exits 0 unless something crashed. A private
Dovecot on 127.0.0.1 (tests/support/dovecot.py) gets ``--mailboxes`` users (a
passwd-file each), each INBOX holding one old message; a throw-away database
(``seoinsight_bench_mail_scale``) gets one Mailbox per user, and a first poll by
3 pollers stores that message and sets every cursor. Then, for 1 and for 3
``manage.py pollmail`` processes already running and idle, every mailbox is
made due at once and the clock runs until each has a ``last_success_at`` past
that instant. The baseline of the same run is a bare imapclient session per
mailbox (the commands a poll with nothing new sends), 4 at a time per process
like ``MAILPOLL_CONCURRENCY``. The pollers keep the shipped settings except the
pause between cycles (``--interval``), so that a poller already running sees
the mailboxes due at once; a last pass starts one ``pollmail`` with the shipped
settings throughout (a cycle that claimed ``MAILPOLL_CLAIM_LIMIT`` mailboxes is
followed by the next at once, see ``mailpoll.sync.poller.pause_after``). Where a mailbox's time goes is measured in this
process over ``--sample`` of them (bench/mail_scale_pieces.py).
docs/benchmarks.md says what each figure means and keeps a recorded run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

from bench.common import AppProcess, app_bench_database, connect, headline, server_version, settle, table
from bench.mail_scale_pieces import (
    IMAP_STEPS,
    app_pieces,
    ceiling,
    dovecot_master,
    imap_pieces,
    process_cpu,
    tree_cpu,
)

BENCH_DB = "seoinsight_bench_mail_scale"
CYCLE_PAUSE = 0.05  # seconds between a poller's cycles in the timed passes (--interval)
PASS_TIMEOUT = 240.0  # a pass still unfinished after this is reported as such
POLL_INTERVAL = timedelta(seconds=120)  # every mailbox's (the model's default)
DOVECOT_LIMITS = ("default_process_limit", "default_client_limit", "service/imap-login/process_limit",
                  "service/imap-login/service_count", "service/imap/process_limit", "service/imap/client_limit",
                  "mail_max_userip_connections")

OLD_MESSAGE = """\
From: Search Console <reports@shop.example>
To: {user}@bench.example
Subject: Weekly report {user}
Message-ID: <old-{user}@bench.example>
Date: Mon, 30 Nov 2026 08:00:00 +0000
Content-Type: text/plain; charset=utf-8

An old message, stored by the first poll.
"""

# Every mailbox due at once, as if its interval had just run out; the statement's now() is the start.
MAKE_DUE = """
WITH due AS (UPDATE mailpoll_mailbox SET last_polled_at = now() - poll_interval - interval '1 second' RETURNING 1)
SELECT now(), count(*) FROM due
"""
NOT_DUE = "UPDATE mailpoll_mailbox SET last_polled_at = now()"
PROGRESS = """
SELECT count(*) FILTER (WHERE last_success_at >= %(t0)s),
       count(*) FILTER (WHERE last_error_at >= %(t0)s AND (last_success_at IS NULL OR last_success_at < %(t0)s))
FROM mailpoll_mailbox
"""
TIMES = """
SELECT extract(epoch FROM last_polled_at - %(t0)s)::float8, extract(epoch FROM last_success_at - %(t0)s)::float8,
       extract(epoch FROM poll_interval)::float8
FROM mailpoll_mailbox WHERE last_success_at >= %(t0)s
"""


# -- setup ----------------------------------------------------------------------------------

def add_mailboxes(imap, count: int) -> list[str]:
    """``count`` Dovecot users, each INBOX with one old message, and a Mailbox each, in one org."""
    from mailpoll.models import Mailbox
    from seoinsight.models import Org, Site, SiteTarget

    users = [imap.add_user(f"box{n:04d}")[0] for n in range(count)]
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda user: imap.append(user, "INBOX", OLD_MESSAGE.format(user=user).encode(),
                                               flags=[b"\\Seen"]), users))
    org = Org.objects.create(id="bench", name="Bench")
    target = SiteTarget.objects.create(site=Site.objects.create(org=org, domain="shop.example"),
                                       url_prefix="https://shop.example/")
    rows = []
    for user in users:
        mailbox = Mailbox(org=org, name=user, host=imap.host, port=imap.port, security="none", username=user,
                          folders=["INBOX"], initial_mode="full", site_target=target, poll_interval=POLL_INTERVAL)
        mailbox.set_secret(imap.passwords[user])
        rows.append(mailbox)
    Mailbox.objects.bulk_create(rows, batch_size=250)
    return users


def dovecot_limits(imap) -> dict[str, str]:
    """The Dovecot settings that bound concurrent sessions, as the running config has them."""
    out = subprocess.run(["doveconf", "-c", str(imap.config_path), "-f", "protocol=imap", *DOVECOT_LIMITS],
                         capture_output=True, text=True, check=True).stdout
    return dict(line.split(" = ", 1) for line in out.splitlines() if " = " in line)


# -- one timed pass -------------------------------------------------------------------------

def wait_registered(db, count: int, procs: list[AppProcess]) -> None:
    """Until ``count`` pollmail processes are in the process list: start-up over, their loop running."""
    deadline = time.monotonic() + 60
    while db.execute("SELECT count(*) FROM jobs_process WHERE kind = 'pollmail'").fetchone()[0] < count:
        if time.monotonic() > deadline or not all(p.alive() for p in procs):
            raise RuntimeError("the pollers did not start:\n" + "\n".join(p.log.read_text()[-2000:] for p in procs))
        time.sleep(0.1)


def timed_pass(db, url: str, media: Path, master: int, pollers: int, total: int) -> dict:
    """Every mailbox due at t0, ``pollers`` idle pollmail processes running: the time until all have succeeded."""
    db.execute(NOT_DUE)
    procs = [AppProcess(url, "pollmail", "--interval", str(CYCLE_PAUSE), media=media) for _ in range(pollers)]
    try:
        wait_registered(db, pollers, procs)
        settle(db, "mailpoll_mailbox")
        load = os.getloadavg()
        cpu = [process_cpu(p.pid) for p in procs], tree_cpu(master)
        t0, due = db.execute(MAKE_DUE).fetchone()
        started = time.monotonic()
        done = failed = 0
        while done + failed < total and time.monotonic() - started < PASS_TIMEOUT:
            time.sleep(0.1)
            done, failed = db.execute(PROGRESS, {"t0": t0}).fetchone()
        wall = time.monotonic() - started
        poller_cpu = sum(process_cpu(p.pid) for p in procs) - sum(cpu[0])
        time.sleep(0.3)  # the last sessions' processes are reaped, their CPU counted
        dovecot_cpu = tree_cpu(master) - cpu[1]
    finally:
        for proc in procs:
            proc.stop(30)
    times = db.execute(TIMES, {"t0": t0}).fetchall()
    claims, successes = [t[0] for t in times], [t[1] for t in times]
    return {"pollers": pollers, "due": due, "done": done, "failed": failed, "wall": wall, "load": load,
            "all_done": max(successes), "first_claim": min(claims), "last_claim": max(claims),
            "median_done": statistics.median(successes),
            # Due at t0 - 1 s: polled within its interval if claimed before t0 - 1 s + poll_interval.
            "late": sum(1 for claim, _s, interval in times if claim > interval - 1),
            "poller_cpu": poller_cpu / max(done, 1), "dovecot_cpu": dovecot_cpu / max(done, 1)}


def first_poll(db, url: str, media: Path, total: int) -> dict:
    """The first poll of every mailbox (one old message each) by 3 pollers; cursors set for the timed passes."""
    procs = [AppProcess(url, "pollmail", "--interval", str(CYCLE_PAUSE), media=media) for _ in range(3)]
    started = time.monotonic()
    try:
        done = 0
        while done < total and time.monotonic() - started < PASS_TIMEOUT:
            time.sleep(0.2)
            done = db.execute("SELECT count(*) FROM mailpoll_mailbox WHERE last_success_at IS NOT NULL").fetchone()[0]
    finally:
        for proc in procs:
            proc.stop(30)
    stored, cursors = db.execute("SELECT (SELECT count(*) FROM mailpoll_request), "
                                 "(SELECT count(*) FROM mailpoll_foldercursor WHERE last_uid = 1)").fetchone()
    if done < total or stored != total or cursors != total:
        raise RuntimeError(f"first poll: {done} of {total} polled, {stored} Requests, {cursors} cursors at UID 1")
    return {"wall": time.monotonic() - started}


def shipped_pass(db, url: str, media: Path, total: int) -> dict:
    """One ``pollmail`` with the shipped settings, started with every mailbox due: until all have succeeded.

    Its start-up is on the clock (the poller must see the mailboxes due on its
    first cycle: started idle, it would first sleep one MAILPOLL_INTERVAL).
    """
    t0, _ = db.execute(MAKE_DUE).fetchone()
    started = time.monotonic()
    proc = AppProcess(url, "pollmail", media=media)
    try:
        done = failed = 0
        while done + failed < total and time.monotonic() - started < PASS_TIMEOUT:
            time.sleep(0.1)
            done, failed = db.execute(PROGRESS, {"t0": t0}).fetchone()
    finally:
        proc.stop(30)
    times = db.execute(TIMES, {"t0": t0}).fetchall()
    return {"done": done, "failed": failed, "all_done": max(t[1] for t in times),
            "late": sum(1 for claim, _s, interval in times if claim > interval - 1)}


def check_nothing_new(db, total: int) -> None:
    stored, errors = db.execute("SELECT (SELECT count(*) FROM mailpoll_request), "
                                "(SELECT count(*) FROM mailpoll_mailbox WHERE last_error <> '')").fetchone()
    if stored != total or errors:
        raise RuntimeError(f"{stored} Requests for {total} old messages, {errors} mailbox(es) with an error")


# -- report ---------------------------------------------------------------------------------

def report(r: dict, args, version: str) -> str:
    from mailpoll import conf

    row, head = table(52, 18, 110)
    n = args.mailboxes
    ceilings = {c["processes"]: c for c in r["ceilings"]}
    limits = ", ".join(f"{k.replace('service/', '')} {v}" for k, v in r["limits"].items())
    lines = [f"{headline('mail-scale', version)}, {r['dovecot']}",
             f"uptime: load {r['load']} before the run, {r['load_after']} after it",
             f"{n:,} mailboxes (Dovecot users, a passwd-file each; INBOX with 1 old message, cursor set by a first "
             f"poll; nothing new), poll_interval {POLL_INTERVAL.seconds} s",
             f"pollmail: MAILPOLL_CONCURRENCY {conf.get('MAILPOLL_CONCURRENCY')}, MAILPOLL_CLAIM_LIMIT "
             f"{conf.get('MAILPOLL_CLAIM_LIMIT')}, --interval {CYCLE_PAUSE} (shipped MAILPOLL_INTERVAL "
             f"{conf.get('MAILPOLL_INTERVAL'):.0f} s); Dovecot limits as set: {limits}", "", *head]
    for c in r["ceilings"]:
        lines.append(row(f"ceiling: bare IMAP sessions, {c['processes']} proc x {c['threads']} threads", f"{c['rate']:,.0f} mbx/s",
                         "1.00x"))
    for p in r["passes"]:
        rate = p["done"] / p["all_done"]
        lines.append(row(f"pollmail x {p['pollers']}: all polled once in {p['all_done']:.1f} s",
                         f"{rate:,.0f} mbx/s", f"{rate / ceilings[p['pollers']]['rate']:.2f}x",
                         f"every mailbox within its {POLL_INTERVAL.seconds} s: "
                         f"{'PASS' if p['late'] == 0 and p['done'] == n else 'MISS'}"))
    one = r["passes"][0]
    serves = one["done"] / one["all_done"] * POLL_INTERVAL.seconds
    s = r["shipped"]
    lines += ["", f"one poller at a {POLL_INTERVAL.seconds} s interval: rate x {POLL_INTERVAL.seconds} = "
                  f"{serves:,.0f} mailboxes",
              f"shipped settings (MAILPOLL_INTERVAL {conf.get('MAILPOLL_INTERVAL'):.0f} s), one pollmail started with "
              f"all {n:,} due, its start-up included: {s['done']:,} polled in {s['all_done']:.1f} s, {s['failed']} "
              f"failed; every mailbox within its {POLL_INTERVAL.seconds} s: "
              f"{'PASS' if s['late'] == 0 and s['done'] == n else 'MISS'}", "",
              "passes (clock from the UPDATE that made every mailbox due, database time):"]
    for p in r["passes"]:
        lines.append(f"  {p['pollers']} poller(s): {p['done']:,} of {p['due']:,} succeeded, {p['failed']} failed; "
                     f"claims {p['first_claim']:.2f}-{p['last_claim']:.2f} s, median success {p['median_done']:.1f} s, "
                     f"last {p['all_done']:.1f} s; claimed after its interval: {p['late']}; load before "
                     f"{p['load'][0]:.2f}")
        lines.append(f"      CPU per mailbox: pollmail {p['poller_cpu'] * 1000:.1f} ms (all its processes), "
                     f"Dovecot {p['dovecot_cpu'] * 1000:.1f} ms (whole process tree)")
    for c in r["ceilings"]:
        lines.append(f"  ceiling {c['processes']} proc: {c['seconds']:.1f} s, client CPU {c['cpu'] * 1000:.1f} ms "
                     f"per mailbox")
    lines.append(f"  first poll (1 new message each, 3 pollers): {r['first']['wall']:.1f} s wall")
    imap, app = r["imap"], r["app"]
    lines += ["", f"where one mailbox's time goes: {args.sample} mailboxes one at a time in this process (mean ms)",
              f"  bare imapclient session, {imap['wall'] * 1000:.2f} ms in all; Dovecot CPU "
              f"{imap['dovecot_cpu'] * 1000:.2f} ms per session"]
    for step in IMAP_STEPS:
        lines.append(f"    {step:<48}{imap['steps'][step] * 1000:8.2f}")
    poll = app["mean"]["Poller.poll (all of it)"]
    in_poll = sum(seconds for name, (_c, seconds) in app["statements"].items() if not name.startswith("DB: SET"))
    mean = app["mean"]
    session = sum(imap["steps"][s] for s in IMAP_STEPS if not s.startswith("STATUS"))
    statements = [(name, count, seconds) for name, (count, seconds) in sorted(app["statements"].items())]
    lines += ["  the app's poll of one mailbox (a pool thread's work)",
              f"    {'DB: connect (a new connection per mailbox)':<48}{mean['DB: connect (a new connection per mailbox)'] * 1000:8.2f}",
              *(f"    {name:<48}{seconds * 1000:8.2f}  ({count:.1f} per mailbox)"
                for name, count, seconds in statements if name.startswith("DB: SET")),
              f"    {'Poller.poll, in all':<48}{poll * 1000:8.2f}",
              *(f"      {name:<46}{seconds * 1000:8.2f}  ({count:.1f} per mailbox)"
                for name, count, seconds in statements if not name.startswith("DB: SET")),
              f"      {'the rest: IMAP and Python':<46}{(poll - in_poll) * 1000:8.2f}  "
              f"(the bare session without STATUS: {session * 1000:.2f})",
              "  the cycle's share of each mailbox (one per cycle of MAILPOLL_CLAIM_LIMIT mailboxes)",
              *(f"    {name[7:]:<48}{seconds * 1000:8.2f}" for name, seconds in mean.items() if name.startswith("cycle: ")),
              f"  the cursor read once more on the same connection, after the poll: {app['again'] * 1000:.2f} ms"]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mailboxes", type=int, default=1000, help="mailboxes, one Dovecot user each (default: 1000)")
    parser.add_argument("--sample", type=int, default=100,
                        help="mailboxes polled in this process for where the time goes (default: 100)")
    args = parser.parse_args()
    if args.mailboxes < 30 or not 10 <= args.sample <= args.mailboxes:
        parser.error("--mailboxes must be at least 30, --sample between 10 and --mailboxes")

    from tests.support.dovecot import dovecot_binary, dovecot_server

    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    with app_bench_database(BENCH_DB, "mail-scale-bench-") as (server, url, media):
        from mailpoll import conf

        results = {"load": load}
        with dovecot_server() as imap, connect(server, BENCH_DB) as db:
            version = server_version(db)
            results["dovecot"] = "Dovecot " + subprocess.run([dovecot_binary(), "--version"], capture_output=True,
                                                             text=True).stdout.split()[0]
            results["limits"] = dovecot_limits(imap)
            master = dovecot_master(imap.config_path)
            concurrency = conf.get("MAILPOLL_CONCURRENCY")  # the ceiling's threads per process, as pollmail's
            print(f"{args.mailboxes:,} Dovecot users with one message each, and their mailboxes ...", flush=True)
            users = add_mailboxes(imap, args.mailboxes)
            accounts = [(user, imap.passwords[user]) for user in users]
            print("first poll (3 pollers): one old message each, cursors set ...", flush=True)
            results["first"] = first_poll(db, url, media, args.mailboxes)
            results["ceilings"], results["passes"] = [], []
            for count in (1, 3):
                print(f"ceiling, {count} process(es) ...", flush=True)
                results["ceilings"].append(ceiling(imap.host, imap.port, accounts, count, concurrency))
                print(f"{count} pollmail process(es): every mailbox due at once ...", flush=True)
                results["passes"].append(timed_pass(db, url, media, master, count, args.mailboxes))
            check_nothing_new(db, args.mailboxes)
            print("one pollmail with the shipped settings, every mailbox due ...", flush=True)
            results["shipped"] = shipped_pass(db, url, media, args.mailboxes)

            print(f"where the time goes: {args.sample} mailboxes in this process ...", flush=True)
            step = args.mailboxes // args.sample
            sample = users[::step][:args.sample]
            results["imap"] = imap_pieces(imap, sample, master)
            db.execute(NOT_DUE)
            ids = [row[0] for row in db.execute("SELECT id FROM mailpoll_mailbox WHERE username = ANY(%s)",
                                                (sample,)).fetchall()]
            db.execute("UPDATE mailpoll_mailbox SET last_polled_at = now() - interval '1 day' WHERE id = ANY(%s)",
                       (ids,))
            results["app"] = app_pieces(ids)
            check_nothing_new(db, args.mailboxes)
    results["load_after"] = " ".join(f"{v:.2f}" for v in os.getloadavg())
    print()
    print(report(results, args, version))
    return 0


if __name__ == "__main__":
    sys.exit(main())
