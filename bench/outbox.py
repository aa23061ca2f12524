"""Outbox benchmark: deliver_outbox senders in runjobs against a loopback downstream, and plain POSTs (the ceiling).

    .venv/bin/python -m bench.outbox [--entries 1000] [--file-every 4] [--file-kb 48] [--profile-entries 300]

Not a test: it prints figures and exits 0 unless something crashed. The
downstream is bench/outbox_server.py on 127.0.0.1, in its own process, answering
200 at once. Entries are held the way intake holds them (``outbox.entries.add``
in the accept's transaction, a stored file for one in ``--file-every``), in a
throw-away database (``seoinsight_bench_outbox``) on the app's server and a
temporary MEDIA_ROOT, gone at the end. docs/benchmarks.md says what each figure
means and keeps a recorded run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing
import os
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from bench.common import AppProcess, app_bench_database, connect, headline, server_version, settle, table
from bench.outbox_pieces import CpuWatch, deliver_timed, posts_alone, process_cpu, report_lines
from bench.outbox_server import Downstream

BENCH_DB = "seoinsight_bench_outbox"
ORG = "bench"
TIMEOUT = 240
POLL = 0.005  # seconds between two looks at the outbox while a drain runs
WORDS = ("clicks impressions position report weekly monthly traffic organic ranking shop category product "
         "landing page drop growth query brand campaign attached please find below thanks regards").split()


# -- the entries ---------------------------------------------------------------------------

def text(rng: random.Random, chars: int) -> str:
    words = []
    while sum(map(len, words)) + len(words) < chars:
        words.append(rng.choice(WORDS))
    return " ".join(words)


def hold(n: int, file_every: int, file_kb: int, seed: int) -> int:
    """Hold ``n`` documents as intake does, one accept transaction each; returns how many have a file.

    A body document has no file (its text is the body); one in ``file_every`` is a
    PDF stored under MEDIA_ROOT first (as intake stores it before the accept), with
    its extracted text and the message body beside it. The body is the one
    mailpoll.attachments.downstream_document builds.
    """
    from django.db import transaction

    from outbox import entries
    from seoinsight import storage

    rng = random.Random(seed)
    received = datetime.datetime(2026, 11, 2, 8, 0, tzinfo=datetime.UTC)
    files = 0
    for i in range(n):
        pdf = bool(file_every) and i % file_every == 0
        name, size, sha256 = "", 0, ""
        if pdf:
            content = b"%PDF-1.4\n" + rng.randbytes(file_kb * 1024)
            name, sha256 = storage.save_content("mail", content)
            size = len(content)
            files += 1
        document = {
            "source": "imap", "org": ORG, "mailbox": {"id": 1, "name": "reports"},
            "message_id": f"<bench-{seed}-{i}@shop.example>", "provider_message_id": f"INBOX:{i + 1}",
            "sender": "reports@shop.example", "subject": f"Weekly report {i}",
            "received_at": (received + datetime.timedelta(minutes=i)).isoformat(),
            "document_type": "pdf" if pdf else "body", "filename": f"report-{i}.pdf" if pdf else "",
            "mime": "application/pdf" if pdf else "text/plain", "size": size, "sha256": sha256,
            "text": text(rng, 2000 if pdf else 1500), "context_text": text(rng, 400) if pdf else "",
        }
        with transaction.atomic():  # the accept's transaction: the entry and its sender's job commit together
            if not entries.add(org_id=ORG, document_ref=f"bench.document:{seed}:{i}", source="imap",
                               document=document, file=name, file_size=size, file_sha256=sha256):
                raise RuntimeError("entries.add held nothing: is DOWNSTREAM_URL set?")
    return files


def requests_of_held() -> list[tuple]:
    """What the senders will send, in their claim order: (key, document, filename, mime, file bytes or None)."""
    from outbox.models import Entry
    from seoinsight import storage

    out = []
    for e in Entry.objects.order_by("next_attempt_at", "id"):
        data = storage.read_verified(e.file, e.file_size, e.file_sha256) if e.file else None
        out.append((str(e.key), e.document, e.document.get("filename") or "document",
                    e.document.get("mime") or "application/octet-stream", data))
    return out


# -- the ceiling ---------------------------------------------------------------------------

def ceiling_run(url: str, timeout: float, batch: list[tuple]) -> dict:
    """The same requests as outbox.sender.post builds them, one after another in a requests.Session.

    Runs in a fresh interpreter; the files are in memory already, so this is the
    HTTP alone (the sender's file read and check are in "where the time goes").
    """
    import requests

    started, cpu = time.perf_counter(), time.process_time()
    with requests.Session() as session:
        for key, document, filename, mime, data in batch:
            headers = {"Idempotency-Key": key}
            if data is not None:
                files = {"document": (None, json.dumps(document), "application/json"), "file": (filename, data, mime)}
                answer = session.post(url, files=files, headers=headers, timeout=(timeout, timeout))
            else:
                answer = session.post(url, json=document, headers=headers, timeout=(timeout, timeout))
            if not 200 <= answer.status_code < 300:
                raise RuntimeError(f"the downstream answered {answer.status_code}")
    return {"seconds": time.perf_counter() - started, "cpu": time.process_time() - cpu}


def ceiling(downstream: Downstream, batch: list[tuple]) -> dict:
    from outbox import conf

    downstream.reset()
    context = multiprocessing.get_context("spawn")  # nothing inherited from this process
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        pool.submit(int).result(TIMEOUT)  # the pool's process is up before the downstream's CPU is read
        server_cpu = process_cpu(downstream.proc.pid)
        run = pool.submit(ceiling_run, downstream.url, float(conf.get("DOWNSTREAM_TIMEOUT")), batch).result(TIMEOUT)
        run["downstream_cpu"] = process_cpu(downstream.proc.pid) - server_cpu
    stats = downstream.stats()
    run["body_bytes"] = stats["body_bytes"]
    check_delivered(stats, batch, "the ceiling")
    downstream.reset()
    return run


# -- the drain -----------------------------------------------------------------------------

def drain(server: dict, db, url: str, media, downstream: Downstream, workers: int, n: int) -> dict:
    """``workers`` × ``runjobs`` start behind a lock on the jobs table, are released together, drain, are stopped.

    As in bench.queue, the lock keeps Django's start-up out of the figure: each
    worker blocks in its first sweep. The window runs from the release to the
    moment this process sees the outbox empty (polled every POLL seconds); then
    SIGTERM. Not ``--burst``: a second worker would find nothing claimable and
    exit before the first sender queued the second (its fan-out, on its first
    entry), as no long-running worker does.
    """
    gate = connect(server, BENCH_DB, autocommit=False)
    consumers = []
    try:
        gate.execute("LOCK TABLE jobs IN EXCLUSIVE MODE")
        consumers = [AppProcess(url, "runjobs", media=media) for _ in range(workers)]
        deadline = time.monotonic() + TIMEOUT
        waiting = "SELECT count(*) FROM pg_locks WHERE relation = 'jobs'::regclass AND NOT granted"
        while db.execute(waiting).fetchone()[0] < workers:
            for consumer in consumers:
                if not consumer.alive():
                    consumer.wait()  # raises with its output
                    raise RuntimeError("a runjobs worker exited before the drain started")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{workers} worker(s) never reached the gate")
            time.sleep(0.02)
        (opened,) = db.execute("SELECT statement_timestamp()").fetchone()
        ours = (db.info.backend_pid, gate.info.backend_pid)
        cpu = CpuWatch({"runjobs": lambda: [c.pid for c in consumers],
                        "their PostgreSQL backends": lambda: backends(db, ours),
                        "the downstream": lambda: [downstream.proc.pid]})
        cpu.start()
        gate.commit()
        released = time.perf_counter()
        while db.execute("SELECT EXISTS (SELECT 1 FROM outbox_entry)").fetchone()[0]:
            if time.perf_counter() - released > TIMEOUT:
                raise RuntimeError(f"the outbox is not empty after {TIMEOUT}s")
            time.sleep(POLL)
        window = time.perf_counter() - released
        spent = cpu.stop()
        for consumer in consumers:
            consumer.stop()
    finally:
        gate.close()
        for consumer in consumers:
            consumer.kill()  # only if something failed: by now they have exited
    # This drain's senders: every one started after the gate opened (an earlier drain's, before).
    senders = db.execute("SELECT status, report FROM jobs WHERE type = 'deliver_outbox' AND started_at >= %s "
                         "ORDER BY started_at", (opened,)).fetchall()
    if any(status != "done" for status, _ in senders):
        raise RuntimeError(f"a deliver_outbox job did not end done: {senders}")
    delivered = [r.get("delivered", 0) for _, r in senders if r and "delivered" in r]
    if sum(delivered) != n:
        raise RuntimeError(f"the senders report {sum(delivered)} delivered of {n}: {senders}")
    return {"window": window, "rate": n / window, "split": [d for d in delivered if d], "cpu": spent}


def backends(db, ours) -> list[int]:
    """The PostgreSQL backends of the bench database's other sessions (the workers', all their threads')."""
    rows = db.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> ALL(%s)",
                      (BENCH_DB, list(ours))).fetchall()
    return [pid for (pid,) in rows]


# -- the checks ----------------------------------------------------------------------------

def check_delivered(stats: dict, batch: list[tuple], who: str, same_as: dict | None = None) -> None:
    """Every request of ``batch`` arrived once (by Idempotency-Key), never two at once; raises otherwise."""
    keys = {key for key, *_ in batch}
    files = sum(1 for *_, data in batch if data is not None)
    twice = [k for k, tries in stats["tries"].items() if tries > 1]
    problems = []
    if set(stats["tries"]) != keys:
        problems.append(f"{len(keys - set(stats['tries']))} keys missing, {len(set(stats['tries']) - keys)} unknown")
    if twice:
        problems.append(f"{len(twice)} keys arrived more than once")
    if stats["overlaps"]:
        problems.append(f"{stats['overlaps']} concurrent duplicates")
    if stats["multipart"] != files:
        problems.append(f"{stats['multipart']} multipart requests for {files} files")
    if same_as is not None and stats["body_bytes"] != same_as:
        differ = sum(1 for k in keys if stats["body_bytes"].get(k) != same_as.get(k))
        problems.append(f"{differ} bodies differ in length from the ceiling's")
    if problems:
        raise RuntimeError(f"{who}: " + "; ".join(problems))


# -- the report ----------------------------------------------------------------------------

def best(runs: list[dict]) -> dict:
    return min(runs, key=lambda run: run["seconds"])


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def report(r: dict, args, version: str) -> str:
    row, head = table(46, 18, 100)
    n = args.entries
    lines = [
        f"{headline('outbox', version)}; synchronous_commit={r['sync']}",
        f"load average (1, 5, 15 min): before {r['load_before']}, after {r['load_after']}",
        f"entries per run: {n:,}, {r['files']:,} with a {args.file_kb} KB file (multipart), the rest a JSON "
        f"body; downstream: HTTP/1.1 keep-alive, 200 at once",
        "",
        *head,
    ]
    for workers in (1, 2):
        c, d = best(r[f"ceilings_{workers}"]), r[f"drain_{workers}"]
        runs = " and ".join(f"{n / run['seconds']:,.0f}" for run in r[f"ceilings_{workers}"])
        lines.append(row("ceiling: requests.Session POST loop, 1 proc", f"{n / c['seconds']:,.0f} entries/s",
                         "1.00x", f"the faster of {runs} (before, after)"))
        split = " + ".join(str(x) for x in d["split"])
        lines.append(row(f"drain: runjobs, {workers} worker{'s' * (workers > 1)}",
                         f"{d['rate']:,.0f} entries/s", f"{d['rate'] / (n / c['seconds']):.2f}x",
                         f"senders delivered {split}"))
    lines += ["", "CPU per entry (ms; /proc, 10 ms ticks), while the clock ran:"]
    for workers in (1, 2):
        c, d = best(r[f"ceilings_{workers}"]), r[f"drain_{workers}"]
        lines.append(f"  ceiling of the {workers}-worker drain: the loop {c['cpu'] / n * 1000:.2f}, "
                     f"the downstream {c['downstream_cpu'] / n * 1000:.2f}")
        spent = ", ".join(f"{name} {seconds / n * 1000:.2f}" for name, seconds in d["cpu"].items())
        busy = sum(d["cpu"].values()) / d["window"]
        lines.append(f"  drain, {workers} worker{'s' * (workers > 1)}: {spent}; "
                     f"{busy:.2f} of {os.cpu_count()} CPUs busy with them")
    lines += [
        "",
        "each drain ran between its two ceilings; every run checked: each key arrived once, no two at once, "
        "bodies the ceiling's length",
        "",
        *report_lines(r["pieces"], best(r["ceilings_1"])["seconds"] / n * 1000),
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1000, help="entries per drain (default: 1000)")
    parser.add_argument("--file-every", type=int, default=4,
                        help="one entry in this many carries a file, the others a JSON body only (default: 4; 0: none)")
    parser.add_argument("--file-kb", type=int, default=48, help="size of each file in KB (default: 48)")
    parser.add_argument("--profile-entries", type=int, default=300,
                        help="entries delivered one by one in this process, for where the time goes (default: 300)")
    args = parser.parse_args()
    if args.entries < 10 or args.file_every < 0 or args.file_kb < 1 or args.profile_entries < 10:
        parser.error("--entries and --profile-entries must be at least 10, --file-every at least 0, --file-kb 1")

    results = {"load_before": load()}
    with Downstream() as downstream:
        # Every app process of the run (the runjobs workers inherit it) sends to this server, nowhere else.
        os.environ["DOWNSTREAM_URL"] = downstream.url
        with app_bench_database(BENCH_DB, "outbox-bench-") as (server, url, media), connect(server, BENCH_DB) as db:
            from seoinsight.models import Org

            version = server_version(db)
            results["sync"] = db.execute("SHOW synchronous_commit").fetchone()[0]
            Org.objects.create(id=ORG, name="Bench")
            for workers, seed in ((1, 1), (2, 2)):
                print(f"holding {args.entries:,} entries ...", flush=True)
                results["files"] = hold(args.entries, args.file_every, args.file_kb, seed)
                batch = requests_of_held()
                settle(db)
                # Ceiling, drain, ceiling: the faster ceiling is the bar, whichever caught the quieter moment.
                print(f"ceiling: {args.entries:,} POSTs ...", flush=True)
                c = ceiling(downstream, batch)
                print(f"drain: {workers} runjobs ...", flush=True)
                settle(db)
                results[f"drain_{workers}"] = drain(server, db, url, media, downstream, workers, args.entries)
                check_delivered(downstream.stats(), batch, f"the {workers}-worker drain", same_as=c["body_bytes"])
                print(f"ceiling again: {args.entries:,} POSTs ...", flush=True)
                results[f"ceilings_{workers}"] = [c, ceiling(downstream, batch)]
            print(f"where the time goes: {args.profile_entries:,} entries one by one ...", flush=True)
            hold(args.profile_entries, args.file_every, args.file_kb, seed=3)
            batch = requests_of_held()
            settle(db)
            results["pieces"], claimed = deliver_timed(args.profile_entries)
            check_delivered(downstream.stats(), batch, "the timed driver")
            downstream.reset()
            results["pieces"]["posts_alone"] = posts_alone(claimed)
            check_delivered(downstream.stats(), batch, "the posts again")
    results["load_after"] = load()
    print()
    print(report(results, args, version))
    return 0


if __name__ == "__main__":
    sys.exit(main())
