"""Mail benchmark: one ``pollmail --once`` over a Dovecot folder, against a bare imapclient ceiling.

    .venv/bin/python bench/mail_bench.py [--messages 2000] [--profile-messages 300]

Not a test: it prints figures and exits 0 unless something crashed. A private
Dovecot on 127.0.0.1 (tests/support/dovecot.py) gets a user whose INBOX holds
``--messages`` generated messages; everything else runs in a throw-away database
(``seoinsight_bench_mail``) on the app's server and a temporary MEDIA_ROOT. The
server, the database and the directory are gone at the end.
docs/benchmarks.md says what each figure means and keeps a recorded run.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import email
import email.policy
import multiprocessing
import os
import platform
import pstats
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path

import psycopg

# The queue benchmark's way to find the app's server and name a database on it
# (this script's directory is on sys.path when it runs).
from queue_bench import ROOT, app_bench_database, connect, worker_env

sys.path.insert(0, str(ROOT))  # tests.support.dovecot, tests.mailpoll.corpus

BENCH_DB = "seoinsight_bench_mail"
RATIO_GOAL = 0.5  # pollmail >= 0.5 x the ceiling (issue goal)
TIMEOUT = 600
# The message mix, by weight: what a reporting inbox sees from clients and tools.
MIX = {"plain": 45, "alternative": 30, "csv": 12, "pdf": 8, "inline image": 5}
FIRST_DATE = datetime.datetime(2026, 10, 1, 8, 0, tzinfo=datetime.timezone.utc)
WORDS = ("clicks impressions position report weekly monthly traffic organic ranking shop category product "
         "landing page drop growth query brand campaign attached please find below thanks regards").split()


# -- the messages ---------------------------------------------------------------------------

def sentence(rng: random.Random) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(6, 16))).capitalize() + "."


def csv_export(rng: random.Random, n: int) -> bytes:
    rows = ["Page,Clicks,Impressions,CTR,Position,Date"]
    for row in range(rng.randint(20, 300)):
        impressions = rng.randint(1, 5000)
        clicks = rng.randint(0, impressions // 10)
        rows.append(f"https://shop.example/p/{n}-{row},{clicks},{impressions},"
                    f"{clicks / impressions * 100:.2f}%,{rng.uniform(1, 60):.1f},2026-10-{rng.randint(1, 30):02d}")
    return ("\n".join(rows) + "\n").encode()


def generate(count: int, seed: int) -> tuple[list[bytes], dict[str, int]]:
    """``count`` raw messages of the MIX, each with its own Message-ID and content (so files differ too)."""
    from tests.mailpoll.corpus import png, tiny_pdf

    rng = random.Random(seed)
    kinds = rng.choices(list(MIX), weights=list(MIX.values()), k=count)
    logo = png(48, 16, seed=seed)  # a signature logo: the same one in every message that has it
    messages = []
    for n, kind in enumerate(kinds):
        msg = EmailMessage()
        msg["From"] = f"client{rng.randint(1, 40)}@client.example"
        msg["To"] = "seo@agency.example"
        msg["Subject"] = f"{sentence(rng)[:60]} #{n}"
        msg["Date"] = format_datetime(FIRST_DATE + datetime.timedelta(minutes=7 * n))
        msg["Message-ID"] = f"<bench-{seed}-{n}@client.example>"
        text = "\n\n".join(sentence(rng) for _ in range(rng.randint(2, 12)))
        msg.set_content(text)
        if kind in ("alternative", "inline image"):
            html = "".join(f"<p>{line}</p>" for line in text.split("\n\n"))
            if kind == "inline image":
                html += '<p><img src="cid:logo@client.example" alt="Client"></p>'
            msg.add_alternative(f"<html><body>{html}</body></html>", subtype="html")
            if kind == "inline image":
                msg.get_payload()[1].add_related(logo, maintype="image", subtype="png", cid="<logo@client.example>",
                                                 disposition="inline", filename="logo.png")
        elif kind == "csv":
            msg.add_attachment(csv_export(rng, n), maintype="text", subtype="csv", filename=f"export-{n}.csv")
        elif kind == "pdf":
            msg.add_attachment(tiny_pdf(f"Clicks report {seed}-{n}"), maintype="application", subtype="pdf",
                               filename=f"report-{n}.pdf")
        messages.append(msg.as_bytes())
    return messages, {kind: kinds.count(kind) for kind in MIX}


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

def settle(db) -> None:
    """Same starting state for every timed run: statistics fresh, no dirty pages of the last run."""
    db.execute("VACUUM ANALYZE")
    try:
        db.execute("CHECKPOINT")
    except psycopg.errors.InsufficientPrivilege:
        pass


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
    with tempfile.TemporaryFile() as output:
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "manage.py", "pollmail", "--once"], cwd=ROOT,
                                env=worker_env(url, media), stdout=output, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + TIMEOUT
            # wait4, not Popen.wait: it also returns the child's resource usage.
            while not (waited := os.wait4(proc.pid, os.WNOHANG))[0]:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"pollmail still running after {TIMEOUT}s")
                time.sleep(0.02)
            proc.returncode = os.waitstatus_to_exitcode(waited[1])
        finally:
            if proc.returncode is None:
                proc.kill()
                proc.wait()
        wall = time.perf_counter() - started
        output.seek(0)
        log = output.read().decode(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"pollmail exited with {proc.returncode}:\n{log[-4000:]}")
    return {"wall": wall, "cpu": waited[2].ru_utime + waited[2].ru_stime, "log": log}


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


# -- where the time goes ----------------------------------------------------------------------

# (group, module path suffix, function, only when called from this function or None)
GROUPS = [
    ("IMAP: login, select, search, sizes, fetch", "mailpoll/providers/imap.py", name, None)
    for name in ("connect", "close", "folder_status", "search", "sizes", "fetch", "fetch_headers")
] + [
    ("parse (mailpoll.parse)", "mailpoll/parse.py", "parse_message", None),
    ("triage (mailpoll.triage)", "mailpoll/triage.py", "triage", None),
    ("file writes (save_content)", "mailpoll/store.py", "save_content", None),
    ("DB: dedup SELECT (stored_refs, one per batch)", "mailpoll/store.py", "stored_refs", None),
    # BEGIN, INSERT_MESSAGES, the jobs' INSERT and COMMIT: one transaction per batch.
    ("DB: insert rows, queue jobs, COMMIT (_insert)", "mailpoll/store.py", "_insert", None),
]


def profile_poll(mailbox, trace: Path) -> tuple[pstats.Stats, float]:
    """Poller.poll under cProfile, with libpq's trace of every message to and from PostgreSQL."""
    from django.db import connection

    from mailpoll.poller import Poller

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
        if path.endswith("mailpoll/poller.py") and name == "poll":
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


# -- report ---------------------------------------------------------------------------------

def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def report(r: dict, args, version: str) -> str:
    def row(label, value, ratio="", goal=""):
        return f"{label:<46}{value:>16}{ratio:>12}  {goal}".rstrip()

    n = args.messages
    best = min(r["ceilings"], key=lambda c: c["seconds"])
    poll_rate, ceiling_rate = n / r["poll"]["seconds"], n / best["seconds"]
    ratio = poll_rate / ceiling_rate
    mix = ", ".join(f"{count:,} {kind}" for kind, count in r["mix"].items())
    docs = ", ".join(f"{count:,} {kind}" for kind, count in sorted(r["stored"]["documents"].items()))
    lines = [
        f"seoinsight mail benchmark  {datetime.datetime.now():%Y-%m-%d %H:%M}  "
        f"{os.cpu_count()} CPU(s), {platform.python_implementation()} {platform.python_version()}, {version}, "
        f"{r['dovecot']}; 1-min load before the run {r['load']}",
        f"messages: {n:,} ({mix}), {r['bytes'] / 1e6:,.1f} MB; fetch batch {r['batch']}",
        "",
        row("figure", "value", "vs ceiling", "goal"),
        "-" * 100,
        row("ceiling: imapclient + email parser, 1 proc", f"{ceiling_rate:,.0f} msg/s", "1.00x"),
        row("pollmail --once", f"{poll_rate:,.0f} msg/s", f"{ratio:.2f}x",
            f">= {RATIO_GOAL}x  {verdict(ratio >= RATIO_GOAL)}"),
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
            version = "PostgreSQL " + db.execute("SHOW server_version").fetchone()[0]
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
