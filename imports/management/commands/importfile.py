from pathlib import Path

from django.core.files import File
from django.core.management.base import BaseCommand, CommandError
from django.db import OperationalError

from imports.cli import EXIT_FAILED, EXIT_NOT_QUEUED, EXIT_STOPPED, Waiter, failure_message, iso_date, print_report
from imports.formats import UnreadableFile
from imports.forms import PERIOD_NEEDED, date_warning, inspect_file
from imports.models import DateOrder
from imports.services import ACCEPTED, OUT_OF_SPACE, create_import, kind_for
from jobs.dbsession import first_line
from jobs.models import JobStatus
from seoinsight import storage
from seoinsight.models import SiteTarget


# Where an operator finds a target's id; said by --help and by the error for an id that is not a target.
WHERE_IDS_ARE = ("the id column of the admin's Site targets list (/admin/seoinsight/sitetarget/) or of the "
                 "targets on a site's page")
TARGETS_LISTED = 10


def not_queued(message: str) -> CommandError:
    return CommandError(message, returncode=EXIT_NOT_QUEUED)


def unknown_target(target: int, org: str | None) -> CommandError:
    """No such target (in ``org``): where ids are found, and the org's own targets when it was named."""
    message = f"no site target {target}" + (f" in org {org!r}" if org else "") + f". A target's id is {WHERE_IDS_ARE}"
    if org:
        known = list(SiteTarget.objects.filter(site__org_id=org).select_related("site")
                     .order_by("pk")[:TARGETS_LISTED + 1])
        if known:
            listed = ", ".join(f"{t.pk} ({t}, site {t.site})" for t in known[:TARGETS_LISTED])
            message += f"; org {org!r}'s targets: {listed}" + (", …" if len(known) > TARGETS_LISTED else "")
        else:
            message += f"; org {org!r} has no site targets"
    return not_queued(message + ".")


class Command(BaseCommand):
    help = (
        "Import a CSV / TSV / Excel / Search Console export into a site target, as an import_csv job. "
        "The job is run by a worker (`manage.py runjobs`), not by this command: start one if none is running. "
        "Exit codes: 0 queued or done, 1 the import failed (--wait), 2 nothing was queued, "
        "3 stopped waiting (the import goes on)."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", help=f"The file to import ({ACCEPTED}).")
        parser.add_argument("--target", type=int, required=True,
                            help=f"Id of the site target to import into: {WHERE_IDS_ARE}.")
        parser.add_argument("--org", help="Org the target must belong to (default: the target's own org).")
        parser.add_argument("--period-start", type=iso_date, metavar="YYYY-MM-DD",
                            help="Period of a file without a Date column (with --period-end).")
        parser.add_argument("--period-end", type=iso_date, metavar="YYYY-MM-DD")
        parser.add_argument("--sheet", default="",
                            help="Excel only: the sheet to read (default: the first sheet with a URL column).")
        parser.add_argument("--date-order", choices=list(DateOrder.values), default="",
                            help="How to read dates like 1/12/2026: dmy (day first) or mdy (month first). "
                                 "Default: decided from the file's dates, IMPORT_DATE_ORDER when they fit both.")
        parser.add_argument("--wait", action="store_true",
                            help="Show a progress bar until the job ends, then the report; exit 1 if it failed.")

    def handle(self, *args, path, target, org, period_start, period_end, sheet, date_order, wait, **options):
        source = Path(path)
        if not source.is_file():
            raise not_queued(f"no such file: {path}")
        if kind_for(source.name) is None:
            raise not_queued(f"cannot import {source.name!r}: the file must be one of {ACCEPTED}")
        if (period_start is None) != (period_end is None):
            raise not_queued("give both --period-start and --period-end, or neither")
        if period_start and period_end < period_start:
            raise not_queued("--period-end is before --period-start")
        targets = SiteTarget.objects.select_related("site")
        if org:
            targets = targets.filter(site__org_id=org)
        try:
            site_target = targets.filter(pk=target).first()
        except OperationalError as exc:  # the first query: nothing is written yet
            reason = first_line(exc) or type(exc).__name__
            raise not_queued(f"the database is unavailable, nothing was queued ({reason})") from None
        if site_target is None:
            raise unknown_target(target, org)
        # What the worker would refuse, said now: nothing is queued for a file that cannot be imported.
        try:
            # With the org's saved column mappings, as the worker will read it.
            found = inspect_file(source, source.name, sheet=sheet, date_order=date_order,
                                 org_id=site_target.site.org_id)
        except UnreadableFile as exc:
            raise not_queued(f"cannot import {source.name}: {exc}") from None
        if sheet and found.sheet is None:
            raise not_queued(f"--sheet: {source.name} is not an Excel workbook, it has no sheets")
        if found.needs_period and period_start is None:
            raise not_queued(f"cannot import {source.name}: {PERIOD_NEEDED}: "
                             "give it with --period-start and --period-end")

        try:
            with source.open("rb") as handle:
                imp = create_import(site_target=site_target, content=File(handle), filename=source.name,
                                    size=source.stat().st_size, period_start=period_start, period_end=period_end,
                                    sheet=sheet, date_order=date_order)
        except storage.OutOfSpace:
            raise not_queued(OUT_OF_SPACE) from None  # storage left nothing behind
        self.stdout.write(f"Import {imp.pk} queued as job {imp.job_id} (org {imp.org_id}, target {site_target}).")
        warning = date_warning(found, source.name, choose="import it again with --date-order")
        if warning:
            self.stdout.write(warning)
        if not wait:
            self.stdout.write("A worker runs it (`manage.py runjobs`); follow it at "
                              f"/imports/{imp.pk}/ or with --wait next time.")
            return
        try:
            job = Waiter(imp.job_id, self.stdout).run()
        except KeyboardInterrupt:
            self.stdout.write("")
            raise CommandError(f"stopped waiting; import {imp.pk} goes on in the background: /imports/{imp.pk}/",
                               returncode=EXIT_STOPPED) from None
        print_report(self.stdout, job, imp.pk)
        if job.status == JobStatus.FAILED:
            raise CommandError(failure_message(imp.pk, job), returncode=EXIT_FAILED)
