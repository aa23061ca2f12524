from pathlib import Path

from django.core.files import File
from django.core.management.base import BaseCommand, CommandError

from imports.cli import Waiter, iso_date, print_report
from imports.forms import ACCEPTED, OUT_OF_SPACE, create_import, kind_for
from jobs.models import JobStatus
from seoinsight import storage
from seoinsight.models import SiteTarget

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

        try:
            with source.open("rb") as handle:
                imp = create_import(site_target=site_target, content=File(handle), filename=source.name,
                                    size=source.stat().st_size, period_start=period_start, period_end=period_end)
        except storage.OutOfSpace:
            raise CommandError(OUT_OF_SPACE) from None  # storage left nothing behind
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
        print_report(self.stdout, job, imp.pk)
        if job.status == JobStatus.FAILED:
            raise CommandError(f"import {imp.pk} failed: {job.error}")
