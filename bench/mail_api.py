"""API mail benchmark: ``pollmail --once`` over a Gmail label and a Graph folder, against IMAP in the same run.

    .venv/bin/python -m bench.mail_api [--messages 2000]

Not a test: it prints figures and exits 0 unless something crashed. The same
``--messages`` messages (the hostile corpus of tests/mailpoll/corpus.py, copied
until there are enough, each copy its own message) sit in three places on
127.0.0.1: a private Dovecot's INBOX, tests/support/fake_gmail.py's INBOX label and
tests/support/fake_graph.py's inbox (HTTPS with a CA made for the run). Each is
read by its own mailbox, in an org of its own, by one ``pollmail --once`` process,
first poll ``full``: the Gmail mailbox with a service account, the Graph one
app-only. The figure is the poller's own window (the claim's ``last_polled_at`` to
``last_success_at``), as in ``bench.mail``; the IMAP run is the baseline, and the
fakes' request logs say how many HTTP requests each message cost. The fakes run
in this process, so their CPU competes with the poller's: the API figures are a
floor. docs/benchmarks.md keeps a recorded run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

from bench.common import AppProcess, app_bench_database, connect, headline, server_version, settle, table

BENCH_DB = "seoinsight_bench_mail_api"
TIMEOUT = 900
MESSAGE_ID = re.compile(rb"^(Message-ID:\s*<)", re.IGNORECASE | re.MULTILINE)


def corpus(count: int) -> tuple[list[bytes], int]:
    """``count`` messages, and how many cases: the hostile corpus over and over, each copy a message of its own.

    A copy gets a header of its own and its Message-ID a prefix, so dedup (by
    Message-ID, else by the raw bytes) sees ``count`` different messages.
    """
    from tests.mailpoll.corpus import hostile_corpus

    cases = [raw for _name, raw in hostile_corpus()]
    messages = []
    for n in range(count):
        raw = cases[n % len(cases)]
        raw = MESSAGE_ID.sub(rb"\g<1>" + f"copy{n}.".encode(), raw, count=1)
        messages.append(f"X-Bench-Copy: {n}\r\n".encode() + raw)
    return messages, len(cases)


def new_mailbox(org_id: str, **fields):
    from mailpoll.models import Mailbox
    from seoinsight.models import Org, Site, SiteTarget

    org = Org.objects.create(id=org_id, name=org_id.title())
    target = SiteTarget.objects.create(site=Site.objects.create(org=org, domain="shop.example"),
                                       url_prefix="https://shop.example/")
    mailbox = Mailbox(org=org, name="reports", folders=["INBOX"], initial_mode="full", site_target=target,
                      enabled=False, **fields)
    return mailbox


def poll_one(db, url: str, media: Path, mailbox) -> dict:
    """One ``pollmail --once`` with only ``mailbox`` enabled; the poller's own window, from the database."""
    from mailpoll.models import Mailbox

    Mailbox.objects.update(enabled=False)
    Mailbox.objects.filter(pk=mailbox.pk).update(enabled=True, last_polled_at=None)
    settle(db)
    proc = AppProcess(url, "pollmail", "--once", media=media)
    wall, usage = proc.wait_usage(TIMEOUT)
    window, error = db.execute("SELECT extract(epoch FROM last_success_at - last_polled_at)::float8, last_error "
                               "FROM mailpoll_mailbox WHERE id = %s", (mailbox.pk,)).fetchone()
    if window is None or error:
        raise RuntimeError(f"{mailbox.provider}: the poll did not succeed: {error or 'no last_success_at'}\n"
                           f"{proc.output[-4000:]}")
    stored = db.execute("SELECT count(*) FROM mailpoll_request WHERE mailbox_id = %s", (mailbox.pk,)).fetchone()[0]
    return {"seconds": window, "wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "stored": stored}


def report(r: dict, n: int, version: str) -> str:
    row, head = table(44, 16, 96)
    imap_rate = n / r["imap"]["seconds"]
    lines = [
        f"{headline('mail-api', version)}; 1-min load before the run {r['load']}",
        f"messages: {n:,} (the hostile corpus, {r['cases']} cases, copied), {r['bytes'] / 1e6:,.1f} MB",
        "",
        *head,
        row("IMAP (Dovecot), pollmail --once", f"{imap_rate:,.0f} msg/s", "1.00x"),
    ]
    for key, label in (("gmail", "Gmail API (service account)"), ("graph", "Graph (app-only, HTTPS)")):
        rate = n / r[key]["seconds"]
        lines.append(row(f"{label}, pollmail --once", f"{rate:,.0f} msg/s", f"{rate / imap_rate:.2f}x",
                         "vs IMAP of this run"))
    lines += ["", "per message:"]
    for key in ("imap", "gmail", "graph"):
        run = r[key]
        lines.append(f"  {key:<6} {run['seconds'] / n * 1000:6.2f} ms wall  {run['cpu'] / n * 1000:6.2f} ms CPU of "
                     f"pollmail (start-up included)  stored {run['stored']:,}")
    g, m = r["gmail_requests"], r["graph_requests"]
    lines += [
        "",
        f"Gmail requests: {g['http']:,} HTTP requests ({g['http'] / n:.3f} per message) carrying {g['calls']:,} "
        f"API calls ({g['calls'] / n:.2f} per message: sizes, then raw, in batches of up to 50); "
        f"{g['tokens']} token request(s)",
        f"Graph requests: {m['http']:,} ({m['http'] / n:.3f} per message: delta pages + one $value each); "
        f"{m['tokens']} token request(s)",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000, help="messages in each mailbox (default: 2000)")
    args = parser.parse_args()
    if args.messages < 50:
        parser.error("--messages must be at least 50")

    from tests.support.dovecot import dovecot_server
    from tests.support.fake_gmail import FakeGmail
    from tests.support.fake_graph import CLIENT_ID, CLIENT_SECRET, TENANT, USER, FakeGraph
    from tests.support.google import service_account_key

    load = f"{os.getloadavg()[0]:.2f}"
    messages, cases = corpus(args.messages)
    results = {"load": load, "bytes": sum(map(len, messages)), "cases": cases}
    gmail, graph = FakeGmail().start(), FakeGraph(page_size=50)
    # The pollmail processes inherit this process's environment (bench.common.worker_env).
    os.environ.update({
        "MAILPOLL_GMAIL_API_URL": gmail.endpoint, "MAILPOLL_GOOGLE_TOKEN_URL": gmail.token_uri,
        "MAILPOLL_GRAPH_API_URL": graph.graph_url, "MAILPOLL_MICROSOFT_AUTHORITY": graph.origin,
        "MAILPOLL_MICROSOFT_TENANT": TENANT, "MAILPOLL_MICROSOFT_CLIENT_ID": CLIENT_ID,
        "MAILPOLL_MICROSOFT_CLIENT_SECRET": CLIENT_SECRET, "MAILPOLL_API_CA_BUNDLE": graph.ca_file,
    })
    try:
        with app_bench_database(BENCH_DB, "mail-api-bench-") as (server, url, media), \
                dovecot_server() as imap, connect(server, BENCH_DB) as db:
            version = server_version(db)
            print(f"{args.messages:,} messages into Dovecot, the Gmail fake and the Graph fake ...", flush=True)
            user, _password = imap.add_user("bench")
            imap.append_many(user, "INBOX", messages)
            for raw in messages:
                gmail.add(raw)
                graph.add("inbox", raw)

            boxes = {}
            boxes["imap"] = new_mailbox("bench-imap", provider="imap", auth="password", host=imap.host,
                                        port=imap.port, security="none", username=user)
            boxes["imap"].set_secret(imap.passwords[user])
            boxes["gmail"] = new_mailbox("bench-gmail", provider="gmail", auth="service", username="bench@x.example")
            boxes["gmail"].set_app_secret(json.dumps(service_account_key(gmail.token_uri)))
            boxes["graph"] = new_mailbox("bench-graph", provider="graph", auth="service", username=USER)
            for box in boxes.values():
                box.save()
            for key in ("imap", "gmail", "graph"):
                print(f"pollmail --once: {key} ...", flush=True)
                results[key] = poll_one(db, url, media, boxes[key])
                if results[key]["stored"] != args.messages:
                    raise RuntimeError(f"{key}: {results[key]['stored']:,} Requests for {args.messages:,} messages")
            # A batch is one HTTP request carrying its parts (each a Call with batched=True).
            results["gmail_requests"] = {"http": sum(not c.batched for c in gmail.calls) + len(gmail.batch_sizes),
                                         "calls": len(gmail.calls), "tokens": gmail.token_requests}
            results["graph_requests"] = {"http": len([r for r in graph.requests if r[1].startswith("/v1.0/")]),
                                         "tokens": len(graph.token_grants)}
    finally:
        gmail.stop()
        graph.stop()
    print()
    print(report(results, args.messages, version))
    return 0


if __name__ == "__main__":
    sys.exit(main())
