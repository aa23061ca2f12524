"""Mail benchmark: one ``pollmail --once`` over a Dovecot folder, against a bare imapclient ceiling.

    .venv/bin/python -m bench.mail [--messages 2000] [--profile-messages 300]

Not a test: it prints figures and exits 0 unless something crashed. A private
Dovecot on 127.0.0.1 (tests/support/dovecot.py) gets a user whose INBOX holds
``--messages`` generated messages; everything else runs in a throw-away database
(``seoinsight_bench_mail``) on the app's server and a temporary MEDIA_ROOT. The
server, the database and the directory are gone at the end.
docs/benchmarks.md says what each figure means and keeps a recorded run.
"""

from __future__ import annotations

import argparse
import email
import email.policy
import multiprocessing
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from bench.common import AppProcess, app_bench_database, connect, headline, ratio_goal, server_version, settle, table
from bench.mail_data import generate
from bench.mail_profile import profile_poll, statements, time_groups, top_entries

BENCH_DB = "seoinsight_bench_mail"
RATIO_GOAL = 0.5  # pollmail >= 0.5 x the ceiling (issue goal)
TIMEOUT = 600


# -- the ceiling ----------------------------------------------------------------------------

def ceiling_run(host: str, port: int, user: str, password: str, batch: int) -> dict:
    """Log in, select, UID SEARCH ALL, FETCH BODY.PEEK[] ``batch`` at a time, parse and walk each message.

    Runs in a fresh interpreter; the clock runs from the connection to the
    logout, the same stretch the poller's claim-to-success window covers.
    """
    from imapclient import IMAPClient

    started, cpu = time.perf_counter(), time.process_time()
    client = IMAPClient(host, port=port, ssl=False, timeout=60)
    client.login(user, password)
    client.select_folder("INBOX", readonly=True)
    uids = client.search(["ALL"])
    messages = 0
    for start in range(0, len(uids), batch):
        for data in client.fetch(uids[start:start + batch], ["BODY.PEEK[]"]).values():
            raw = data[b"BODY[]"]
            message = email.message_from_bytes(raw, policy=email.policy.default)
            for part in message.walk():
                if not part.is_multipart():
                    part.get_payload(decode=True)
            messages += 1
    client.logout()
    return {"seconds": time.perf_counter() - started, "cpu": time.process_time() - cpu, "messages": messages}


def ceiling(imap, user: str, batch: int, expected: int) -> dict:
    context = multiprocessing.get_context("spawn")  # nothing inherited from this process
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        run = pool.submit(ceiling_run, imap.host, imap.port, user, imap.passwords[user], batch).result(TIMEOUT)
    if run["messages"] != expected:
        raise RuntimeError(f"the ceiling read {run['messages']} of {expected} messages")
    return run


# -- pollmail -------------------------------------------------------------------------------

def new_mailbox(imap, org_id: str, user: str):
    """An org, its site target, and a Mailbox reading ``user``'s INBOX on the private Dovecot, everything."""
    from mailpoll.models import Mailbox
    from seoinsight.models import Org, Site, SiteTarget

    org = Org.objects.create(id=org_id, name=org_id.title())
    target = SiteTarget.objects.create(site=Site.objects.create(org=org, domain="shop.example"),
                                       url_prefix="https://shop.example/")
    mailbox = Mailbox(org=org, name="reports", host=imap.host, port=imap.port, security="none", username=user,
                      folders=["INBOX"], initial_mode="full", site_target=target)
    mailbox.set_secret(imap.passwords[user])
    mailbox.save()
    return mailbox


def run_pollmail(url: str, media: Path) -> dict:
    """One ``manage.py pollmail --once`` process: wall time, and its CPU time from wait4()."""
    proc = AppProcess(url, "pollmail", "--once", media=media)
    wall, usage = proc.wait_usage(TIMEOUT)
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "log": proc.output}


def pollmail(db, url: str, media: Path, mailbox_id: int, idle: dict) -> dict:
    """The timed run; its window is the poller's own, from the database.

    ``last_polled_at`` is set by the claim (the database's now()) before the poller
    connects; ``last_success_at`` after the last message is committed and the
    IMAP session logged out. Interpreter and Django start-up come before the
    first, the watchdog and process exit after the second: neither is counted.
    The CPU figure subtracts ``idle``'s, a run that found no mailbox due.
    """
    run = run_pollmail(url, media)
    window, error = db.execute("SELECT extract(epoch FROM last_success_at - last_polled_at)::float8, last_error "
                               "FROM mailpoll_mailbox WHERE id = %s", (mailbox_id,)).fetchone()
    if window is None or error:
        raise RuntimeError(f"the poll did not succeed: {error or 'no last_success_at'}\n{run['log'][-4000:]}")
    return {**run, "seconds": window, "poll_cpu": run["cpu"] - idle["cpu"]}


def check_stored(db, mailbox_id: int, expected: int) -> dict:
    accepted, rejected = db.execute(
        "SELECT count(*) FILTER (WHERE status = 'accepted'), count(*) FILTER (WHERE status = 'rejected') "
        "FROM mailpoll_request WHERE mailbox_id = %s", (mailbox_id,)).fetchone()
    if accepted + rejected != expected or rejected:
        raise RuntimeError(f"{accepted} accepted and {rejected} rejected Requests for {expected} messages")
    documents = dict(db.execute(
        "SELECT a.document_type, count(*) FROM mailpoll_attachment a JOIN mailpoll_request r ON r.id = a.request_id "
        "WHERE r.mailbox_id = %s GROUP BY 1", (mailbox_id,)).fetchall())
    return {"requests": accepted, "documents": documents}


# -- report ---------------------------------------------------------------------------------

def report(r: dict, args, version: str) -> str:
    row, head = table(46, 16, 100)
    n = args.messages
    best = min(r["ceilings"], key=lambda c: c["seconds"])
    poll_rate, ceiling_rate = n / r["poll"]["seconds"], n / best["seconds"]
    ratio = poll_rate / ceiling_rate
    mix = ", ".join(f"{count:,} {kind}" for kind, count in r["mix"].items())
    docs = ", ".join(f"{count:,} {kind}" for kind, count in sorted(r["stored"]["documents"].items()))
    lines = [
        f"{headline('mail', version)}, {r['dovecot']}; 1-min load before the run {r['load']}",
        f"messages: {n:,} ({mix}), {r['bytes'] / 1e6:,.1f} MB; fetch batch {r['batch']}",
        "",
        *head,
        row("ceiling: imapclient + email parser, 1 proc", f"{ceiling_rate:,.0f} msg/s", "1.00x"),
        row("pollmail --once", f"{poll_rate:,.0f} msg/s", f"{ratio:.2f}x", ratio_goal(ratio, RATIO_GOAL)),
        "",
        row("CPU of the process, ceiling", f"{best['cpu'] / n * 1000:.2f} ms/msg"),
        row("CPU of the process, pollmail (start-up out)", f"{r['poll']['poll_cpu'] / n * 1000:.2f} ms/msg", "",
            "(PostgreSQL's own CPU not included)"),
        "",
        f"stored: {r['stored']['requests']:,} Requests for {n:,} messages (all accepted); documents: {docs}",
        "times (connection to logout; pollmail: its claim's last_polled_at to its last_success_at):",
    ]
    for number, c in enumerate(r["ceilings"], 1):
        lines.append(f"  ceiling run {number}  {c['seconds']:6.2f} s  {n / c['seconds']:7,.0f} msg/s"
                     f"{'  (the one used)' if c is best else ''}")
    lines.append(f"  pollmail       {r['poll']['seconds']:6.2f} s  {poll_rate:7,.0f} msg/s   "
                 f"process wall {r['poll']['wall']:.2f} s (start-up, watchdog and exit included)")
    if "profile" in r:
        p = r["profile"]
        lines += ["", f"where pollmail's time goes: Poller.poll under cProfile, {p['messages']:,} other messages "
                      f"of the same mix, in this process ({p['messages'] / p['wall']:,.0f} msg/s profiled)"]
        for group, seconds in sorted(p["groups"].items(), key=lambda item: -item[1]):
            lines.append(f"  {group:<44}{seconds:7.2f} s {seconds / p['total'] * 100:5.1f} %"
                         f"  {seconds / p['messages'] * 1000:6.2f} ms/msg")
        lines.append(f"  {'total (Poller.poll)':<44}{p['total']:7.2f} s")
        sent = sum(count for count, _ in p["statements"].values())
        waited = sum(seconds for _, seconds in p["statements"].values())
        lines += ["", f"statements sent to PostgreSQL: {sent / p['messages']:.1f} per message; from sending each to "
                      f"its answer {waited:.2f} s, {waited / p['total'] * 100:.0f} % of the poll (libpq trace)"]
        for kind, (count, seconds) in sorted(p["statements"].items(), key=lambda item: -item[1][1]):
            lines.append(f"  {kind:<10}{count:6,} sent {count / p['messages']:6.2f} per message "
                         f"{seconds / count * 1000:6.2f} ms each")
        lines += ["", "most time of their own (own s, cumulative s, calls):"]
        for own, cumulative, calls, where in p["top"]:
            lines.append(f"  {own:7.2f} {cumulative:7.2f} {calls:>8,}  {where}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000, help="messages in the folder (default: 2000)")
    parser.add_argument("--profile-messages", type=int, default=300,
                        help="messages polled again under cProfile, for where the time goes (default: 300; 0: none)")
    args = parser.parse_args()
    if args.messages < 100 or args.profile_messages < 0:
        parser.error("--messages must be at least 100 and --profile-messages at least 0")

    from tests.support.dovecot import dovecot_binary, dovecot_server

    # Other work on the machine shows in every figure: the report says how busy it was before we started.
    load = f"{os.getloadavg()[0]:.2f}"
    with app_bench_database(BENCH_DB, "mail-bench-") as (server, url, media):
        from mailpoll import conf

        results = {"batch": conf.get("MAILPOLL_FETCH_BATCH"), "load": load}
        print(f"generating {args.messages:,} messages ...", flush=True)
        messages, results["mix"] = generate(args.messages, seed=1)
        results["bytes"] = sum(map(len, messages))
        with dovecot_server() as imap, connect(server, BENCH_DB) as db:
            version = server_version(db)
            results["dovecot"] = "Dovecot " + subprocess.run([dovecot_binary(), "--version"], capture_output=True,
                                                             text=True).stdout.split()[0]
            print(f"APPEND to a private Dovecot on {imap.host}:{imap.port} ...", flush=True)
            user, _password = imap.add_user("bench")
            imap.append_many(user, "INBOX", messages)

            print("pollmail with nothing due, for its start-up CPU time ...", flush=True)
            idle = run_pollmail(url, media)
            box = new_mailbox(imap, "bench", user)
            # Ceiling, pollmail, ceiling: the faster ceiling is the bar, whichever had the warmer caches.
            print(f"ceiling: {args.messages:,} messages ...", flush=True)
            results["ceilings"] = [ceiling(imap, user, results["batch"], args.messages)]
            print(f"pollmail --once: {args.messages:,} messages ...", flush=True)
            settle(db)
            results["poll"] = pollmail(db, url, media, box.pk, idle)
            print(f"ceiling again: {args.messages:,} messages ...", flush=True)
            results["ceilings"].append(ceiling(imap, user, results["batch"], args.messages))
            results["stored"] = check_stored(db, box.pk, args.messages)

            if args.profile_messages:
                print(f"profile: {args.profile_messages:,} other messages, Poller.poll under cProfile ...",
                      flush=True)
                other, _mix = generate(args.profile_messages, seed=2)
                profile_user, _password = imap.add_user("profile")
                imap.append_many(profile_user, "INBOX", other)
                box = new_mailbox(imap, "profile", profile_user)
                settle(db)
                stats, wall = profile_poll(box, media / "libpq.trace")
                check_stored(db, box.pk, args.profile_messages)
                total, groups = time_groups(stats)
                results["profile"] = {"messages": args.profile_messages, "wall": wall, "total": total,
                                      "groups": groups, "top": top_entries(stats, 12),
                                      "statements": statements(media / "libpq.trace")}
    print()
    print(report(results, args, version))
    return 0


if __name__ == "__main__":
    sys.exit(main())
