"""Terminal helpers shared by the import commands: follow a job with a progress bar, print its report."""

import argparse
import time
from datetime import date

from jobs.models import Job, JobStatus

POLL_INTERVAL = 0.5
WORKER_HINT_AFTER = 10.0
BAR_WIDTH = 10
ERROR_SAMPLES_SHOWN = 5


def iso_date(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a date as YYYY-MM-DD, got {value!r}") from None


def progress_line(done: int | None, total: int | None, width: int = BAR_WIDTH) -> str:
    """The terminal bar: ``progress_line(520, 1000)`` is ``'[#####.....] 52% 520/1000 rows'``."""
    if not isinstance(done, int) or not isinstance(total, int) or total <= 0:
        return f"[{'.' * width}] starting…"
    fraction = max(0.0, min(1.0, done / total))
    filled = int(fraction * width)
    return f"[{'#' * filled}{'.' * (width - filled)}] {fraction * 100:.0f}% {done}/{total} rows"


class Waiter:
    """Follows one job until it ends, redrawing a one-line bar; says so when no worker takes it."""

    def __init__(self, job_id, out, interval: float = POLL_INTERVAL, hint_after: float = WORKER_HINT_AFTER):
        self.job_id, self.out, self.interval, self.hint_after = job_id, out, interval, hint_after

    def run(self) -> Job:
        last_line, queued_since, hinted = "", None, False
        while True:
            job = Job.objects.get(pk=self.job_id)
            progress = job.progress if isinstance(job.progress, dict) else {}
            if job.status == JobStatus.QUEUED:
                line = "waiting for a worker…"
            else:
                line = progress_line(progress.get("done"), progress.get("total"))
            if job.is_finished:
                if job.status == JobStatus.FAILED:
                    line = f"failed after {progress.get('done') or 0} rows"
                elif isinstance(progress.get("total"), int):
                    line = progress_line(progress["total"], progress["total"])
                else:
                    line = "done"
                self.out.write(f"\r{line:<60}\n", ending="")
                return job
            if line != last_line:
                self.out.write(f"\r{line:<60}", ending="")
                self.out.flush()
                last_line = line
            # Only a queued job can be stuck for want of a worker: a running one has one.
            if job.status != JobStatus.QUEUED:
                queued_since = None
            elif queued_since is None:
                queued_since = time.monotonic()
            elif not hinted and time.monotonic() - queued_since > self.hint_after:
                self.out.write(f"\nStill queued after {self.hint_after:.0f} s: is a worker running? "
                               "Start one with `manage.py runjobs`.\n", ending="")
                hinted, last_line = True, ""
            time.sleep(self.interval)


def print_report(out, job, import_id) -> None:
    """Counts, skipped reasons and the first error samples of a finished import job."""
    progress = job.progress if isinstance(job.progress, dict) else {}
    # A failed job's report is its traceback; the counts reached are in its checkpoint.
    report = job.report if job.status == JobStatus.DONE and isinstance(job.report, dict) else progress.get("counts")
    if not isinstance(report, dict):
        return
    out.write("  ".join(f"{name} {report.get(name, 0)}"
               for name in ("read", "inserted", "updated", "skipped", "errors")))
    for reason, count in sorted((report.get("skipped_reasons") or {}).items()):
        out.write(f"  skipped {count}: {reason}")
    samples = report.get("error_samples") or []
    for sample in samples[:ERROR_SAMPLES_SHOWN]:
        out.write(f"  row {sample.get('row')}: {sample.get('reason')}")
    if report.get("errors", 0) > min(len(samples), ERROR_SAMPLES_SHOWN):
        more = report["errors"] - min(len(samples), ERROR_SAMPLES_SHOWN)
        out.write(f"  … and {more} more errors: see /imports/{import_id}/")
