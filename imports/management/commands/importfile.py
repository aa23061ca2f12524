import argparse
import time
from datetime import date
from pathlib import Path

from django.core.files import File
from django.core.management.base import BaseCommand, CommandError

from imports.forms import ACCEPTED, create_import, kind_for
from jobs.models import Job, JobStatus
from seoinsight.models import SiteTarget

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


class Command(BaseCommand):
    help = (
        "Import a CSV / TSV / Excel / Search Console export into a site target, as an import_csv job. "
        "The job is run by a worker (`manage.py runjobs`), not by this command: start one if none is running."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", help=f"The file to import ({ACCEPTED}).")
        parser.add_argument("--target", type=int, required=True, help="Id of the site target to import into.")
        parser.add_argument("--org", help="Org the target must belong to (default: the target's own org).")
        parser.add_argument("--period-start", type=iso_date, metavar="YYYY-MM-DD",
                            help="Period of a file without a Date column (with --period-end).")
        parser.add_argument("--period-end", type=iso_date, metavar="YYYY-MM-DD")
        parser.add_argument("--wait", action="store_true",
                            help="Show a progress bar until the job ends, then the report; exit 1 if it failed.")

    def handle(self, *args, path, target, org, period_start, period_end, wait, **options):
        source = Path(path)
        if not source.is_file():
            raise CommandError(f"no such file: {path}")
        if kind_for(source.name) is None:
            raise CommandError(f"cannot import {source.name!r}: the file must be one of {ACCEPTED}")
        if (period_start is None) != (period_end is None):
            raise CommandError("give both --period-start and --period-end, or neither")
        if period_start and period_end < period_start:
            raise CommandError("--period-end is before --period-start")
        targets = SiteTarget.objects.select_related("site")
        if org:
            targets = targets.filter(site__org_id=org)
        site_target = targets.filter(pk=target).first()
        if site_target is None:
            raise CommandError(f"no site target {target}" + (f" in org {org!r}" if org else ""))

        with source.open("rb") as handle:
            imp = create_import(site_target=site_target, content=File(handle), filename=source.name,
                                size=source.stat().st_size, period_start=period_start, period_end=period_end)
        self.stdout.write(f"Import {imp.pk} queued as job {imp.job_id} (org {imp.org_id}, target {site_target}).")
        if not wait:
            self.stdout.write("A worker runs it (`manage.py runjobs`); follow it at "
                              f"/imports/{imp.pk}/ or with --wait next time.")
            return
        try:
            job = Waiter(imp.job_id, self.stdout).run()
        except KeyboardInterrupt:
            self.stdout.write("\nStopped waiting; the import goes on in the background.")
            return
        self.print_report(job, imp.pk)
        if job.status == JobStatus.FAILED:
            raise CommandError(f"import {imp.pk} failed: {job.error}")

    def print_report(self, job, import_id) -> None:
        progress = job.progress if isinstance(job.progress, dict) else {}
        # A failed job's report is its traceback; the counts reached are in its checkpoint.
        report = job.report if job.status == JobStatus.DONE and isinstance(job.report, dict) else progress.get("counts")
        if not isinstance(report, dict):
            return
        self.stdout.write("  ".join(f"{name} {report.get(name, 0)}"
                                    for name in ("read", "inserted", "updated", "skipped", "errors")))
        for reason, count in sorted((report.get("skipped_reasons") or {}).items()):
            self.stdout.write(f"  skipped {count}: {reason}")
        samples = report.get("error_samples") or []
        for sample in samples[:ERROR_SAMPLES_SHOWN]:
            self.stdout.write(f"  row {sample.get('row')}: {sample.get('reason')}")
        if report.get("errors", 0) > min(len(samples), ERROR_SAMPLES_SHOWN):
            more = report["errors"] - min(len(samples), ERROR_SAMPLES_SHOWN)
            self.stdout.write(f"  … and {more} more errors: see /imports/{import_id}/")
