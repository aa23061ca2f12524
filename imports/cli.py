"""Terminal helpers shared by the import commands: follow a job on one line, print its report.

Exit codes of ``importfile`` and ``importapi`` (docs/imports.md):

0  queued (without --wait), or the import is done
1  the import failed (with --wait); the message says why
2  nothing was queued: a wrong argument, a refused file, a missing period, a full disk
3  stopped following (Ctrl-C) before the end; the import goes on in the background
"""

from __future__ import annotations

import argparse
import shutil
import time
from datetime import date

from django.db import InterfaceError, OperationalError

from jobs import conf as jobs_conf
from jobs.dbsession import close_quietly
from jobs.models import Job, JobStatus
from seoinsight.backoff import doubling

from .models import Import
from .outcomes import SHOWN_LABELS, outcome_reason, skipped_hosts, top_hosts
from .reimport import suggest
from .reports import notes, operator_error, period_read, report_of, what_was_read

EXIT_FAILED = 1
EXIT_NOT_QUEUED = 2
EXIT_STOPPED = 3

POLL_INTERVAL = 0.5
# Seconds without any change to a job (a heartbeat included) before the line asks for a worker.
WORKER_HINT_AFTER = 10.0
BAR_WIDTH = 10
ERROR_SAMPLES_SHOWN = 5
# Waits between tries while the database is unreachable: doubling, capped.
RECONNECT_FIRST = 0.5
RECONNECT_MAX = 10.0


def iso_date(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a date as YYYY-MM-DD, got {value!r}") from None


def progress_line(done: int | None, total: int | None, note: str = "", width: int = 80) -> str:
    """The one status line, at most ``width - 1`` columns (writing the last column wraps some terminals).

    The longest form that fits wins: the bar shrinks, then goes, then the note is cut.

    >>> progress_line(520, 1000)
    '[#####.....] 52% 520/1000 rows'
    >>> progress_line(520, 1000, "no progress for 12 s — is a worker running?", width=40)
    '52% · no progress for 12 s — is a work…'
    """
    limit = max(width - 1, 8)
    if not isinstance(done, int) or not isinstance(total, int) or total <= 0:
        return _clip(note or "starting…", limit)
    fraction = max(0.0, min(1.0, done / total))
    percent = f"{fraction * 100:.0f}%"
    tail = f" · {note}" if note else ""
    candidates = [f"{_bar(fraction, BAR_WIDTH)} {percent} {done}/{total} rows{tail}",
                  f"{_bar(fraction, 5)} {percent} {done}/{total} rows{tail}",
                  f"{percent} {done}/{total} rows{tail}"]
    fitting = next((line for line in candidates if len(line) <= limit), None)
    return fitting or _clip(f"{percent}{tail}", limit)


def _bar(fraction: float, width: int) -> str:
    filled = int(fraction * width)
    return f"[{'#' * filled}{'.' * (width - filled)}]"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def reconnect_delay(failures: int) -> float:
    """Seconds before try number ``failures + 1`` to reach the database.

    >>> [reconnect_delay(n) for n in (1, 2, 3, 5, 9)]
    [0.5, 1.0, 2.0, 8.0, 10.0]
    """
    return doubling(failures, RECONNECT_FIRST, RECONNECT_MAX)


def default_hint_after() -> float:
    """Long enough that a live worker's heartbeat always comes first."""
    return max(WORKER_HINT_AFTER, 2 * float(jobs_conf.get("JOBS_HEARTBEAT_INTERVAL")) + POLL_INTERVAL)


class Waiter:
    """Follows one job until it ends, redrawing one line that fits the terminal.

    A database outage is waited out (reconnecting with backoff) and shown on the
    line; so is a job nobody works on: queued, or running without a heartbeat
    (its worker died) for ``hint_after`` seconds.
    """

    def __init__(self, job_id, out, interval: float = POLL_INTERVAL, hint_after: float | None = None,
                 width: int | None = None):
        self.job_id, self.out, self.interval = job_id, out, interval
        self.hint_after = default_hint_after() if hint_after is None else hint_after
        self.width = width

    def run(self) -> Job:
        last_line, failures = None, 0
        seen, seen_at = None, time.monotonic()
        while True:
            try:
                job = Job.objects.get(pk=self.job_id)
            except (OperationalError, InterfaceError):
                # The server went away (restart, failover): the job goes on without us.
                failures += 1
                delay = reconnect_delay(failures)
                close_quietly()  # the next query opens a new connection
                # The outage alone: the progress known is from before it, and the note must fit 40 columns.
                last_line = self._draw({}, f"database unavailable — retrying in {delay:g} s", last_line)
                time.sleep(delay)
                continue
            failures = 0
            progress = job.progress if isinstance(job.progress, dict) else {}
            if job.is_finished:
                self._finish(job, progress)
                return job
            state = (job.status, job.attempts, repr(progress))  # a heartbeat changes progress.updated_at
            now = time.monotonic()
            if state != seen:
                seen, seen_at = state, now
            idle = now - seen_at
            note = ""
            if job.status == JobStatus.QUEUED:
                note = "waiting for a worker…"
                if idle > self.hint_after:
                    note = f"queued for {idle:.0f} s — is a worker running?"
            elif idle > self.hint_after:
                note = f"no progress for {idle:.0f} s — is a worker running?"
            shown = progress if job.status == JobStatus.RUNNING else {}
            last_line = self._draw(shown, note, last_line)
            time.sleep(self.interval)

    def _columns(self) -> int:
        return self.width or shutil.get_terminal_size((80, 24)).columns

    def _draw(self, progress: dict, note: str, last_line: str | None) -> str:
        columns = self._columns()
        line = progress_line(progress.get("done"), progress.get("total"), note, width=columns)
        if line != last_line:
            self._write(line, columns)
        return line

    def _finish(self, job: Job, progress: dict) -> None:
        columns = self._columns()
        if job.status == JobStatus.FAILED:
            line = f"failed after {progress.get('done') or 0} rows"
        elif isinstance(progress.get("total"), int):
            line = progress_line(progress["total"], progress["total"], width=columns)
        else:
            line = "done"
        self._write(line, columns, end="\n")

    def _write(self, line: str, columns: int, end: str = "") -> None:
        # Padded to the full line so a shorter one hides the longer one before it.
        self.out.write("\r" + line.ljust(max(columns - 1, 8)) + end, ending="")
        self.out.flush()


def print_report(out, job, import_id) -> None:
    """Counts, what was read, notes, skipped reasons and the first error samples of an ended import job."""
    report = report_of(job)
    if not report:
        return
    out.write("  ".join(f"{name} {report.get(name, 0)}"
               for name in ("read", "inserted", "updated", "skipped", "errors")))
    period = period_read(report)
    if period is not None:
        out.write(f"  Period: {period[0]} to {period[1]}" + (f", read from {period[2]}." if period[2] else "."))
    for line in what_was_read(report):
        out.write(f"  {line}")
    print_outcome(out, report, import_id)
    for what, count in notes(report):
        out.write(f"  kept {count}: {what}")
    for reason, count in sorted((report.get("skipped_reasons") or {}).items()):
        out.write(f"  skipped {count}: {reason}")
    samples = report.get("error_samples") or []
    for sample in samples[:ERROR_SAMPLES_SHOWN]:
        out.write(f"  row {sample.get('row')}: {sample.get('reason')}")
    if report.get("errors", 0) > min(len(samples), ERROR_SAMPLES_SHOWN):
        more = report["errors"] - min(len(samples), ERROR_SAMPLES_SHOWN)
        out.write(f"  … and {more} more errors: see /imports/{import_id}/")


def print_outcome(out, report: dict, import_id) -> None:
    """For an import that was mostly or wholly skipped: why, the hosts it skipped, and the site they are on."""
    outcome = report.get("outcome")
    reason = outcome_reason(outcome, read=report.get("read", 0), skipped=report.get("skipped", 0),
                            errors=report.get("errors", 0), skipped_reasons=report.get("skipped_reasons"))
    if not reason:
        return
    out.write(f"  {SHOWN_LABELS[outcome]}: {reason}")
    hosts = top_hosts(skipped_hosts(report))
    if hosts:
        out.write("  Hosts outside the target: " + ", ".join(f"{host} ({count})" for host, count in hosts))
    imp = Import.objects.select_related("site_target").get(pk=import_id)
    offer = suggest(imp, report)
    if offer is not None:
        where = ("These rows are on {}, outside this target" if offer.site.pk == imp.site_target.site_id
                 else "This file looks like it is for {}").format(offer.site)
        out.write(f"  {where}: import it into another target from /imports/{import_id}/")


def failure_message(import_id, job) -> str:
    """What the command says when the import failed: the operator's message, no exception name."""
    return f"import {import_id} failed: {operator_error(job.error or 'no error recorded')}"
