from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from imports.cli import iso_date
from insight.alerts.describe import headline, period
from insight.alerts.detect import detect
from seoinsight.models import Org


class Command(BaseCommand):
    help = ("Record alerts for sites whose clicks fell (the site, or one of its top 20 pages: the last 7 days with "
            "data against the 7 before) or whose data is late; prints what this run recorded. An alert already "
            "recorded is not recorded again. The daily job does the same for every org.")

    def add_arguments(self, parser):
        parser.add_argument("--org", help="Only this org (its id); default: every org.")
        parser.add_argument("--today", type=iso_date, metavar="YYYY-MM-DD",
                            help="Judge as of this day, which is not complete (default: today, UTC).")

    def handle(self, *args, org=None, today=None, **options):
        today = today or timezone.now().date()
        orgs = Org.objects.order_by("pk")
        if org is not None:
            orgs = orgs.filter(pk=org)
            if not orgs.exists():
                raise CommandError(f"no org {org!r}")
        total = 0
        for each in orgs:
            alerts = detect(each, today)
            total += len(alerts)
            for alert in alerts:
                self.stdout.write(f"{each.pk} · {alert.site.domain} · {alert.kind} · {period(alert)} · "
                                  f"{headline(alert)}")
        self.stdout.write(f"{total} alert(s) recorded as of {today}.")
