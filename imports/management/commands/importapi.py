from django.core.management.base import BaseCommand, CommandError

from imports.cli import Waiter, iso_date, print_report
from imports.searchconsole_api import DEFAULT_DAYS, ROW_LIMIT, SETTLING_DAYS, create_api_import, settled_period
from jobs.models import JobStatus
from seoinsight.models import SiteTarget


class Command(BaseCommand):
    help = (
        "Pull Search Console Search Analytics (by page, and by date unless --totals) for a site target, "
        "as an import_api job run by a worker (`manage.py runjobs`). The target needs a Search Console "
        "property and a service-account key (set in the admin)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--target", type=int, required=True, help="Id of the site target.")
        parser.add_argument("--start", type=iso_date, metavar="YYYY-MM-DD",
                            help=f"First day (default: {DEFAULT_DAYS} days before --end).")
        parser.add_argument("--end", type=iso_date, metavar="YYYY-MM-DD",
                            help=f"Last day (default: {SETTLING_DAYS} days ago, the last settled day).")
        parser.add_argument("--totals", action="store_true",
                            help="One row per page for the whole period instead of one per page and day.")
        parser.add_argument("--row-limit", type=int, default=ROW_LIMIT,
                            help=f"Rows per API request (default {ROW_LIMIT}, the API's maximum).")
        parser.add_argument("--wait", action="store_true",
                            help="Show a progress bar until the job ends, then the report; exit 1 if it failed.")

    def handle(self, *args, target, start, end, totals, row_limit, wait, **options):
        site_target = SiteTarget.objects.select_related("site").filter(pk=target).first()
        if site_target is None:
            raise CommandError(f"no site target {target}")
        if not site_target.search_console_property:
            raise CommandError(f"site target {target} has no Search Console property")
        if not site_target.has_search_console_credentials:
            raise CommandError(f"site target {target} has no service-account key: add one in the admin")
        start, end = settled_period(start, end)
        if end < start:
            raise CommandError("--end is before --start")
        if not 1 <= row_limit <= ROW_LIMIT:
            raise CommandError(f"--row-limit must be between 1 and {ROW_LIMIT}")

        imp = create_api_import(site_target, start, end, by_date=not totals, row_limit=row_limit)
        self.stdout.write(f"Import {imp.pk} queued as job {imp.job_id}: {site_target.search_console_property} "
                          f"from {start} to {end}.")
        if not wait:
            return
        job = Waiter(imp.job_id, self.stdout).run()
        print_report(self.stdout, job, imp.pk)
        if job.status == JobStatus.FAILED:
            raise CommandError(f"import {imp.pk} failed: {job.error}")
