import logging

from django.core.management.base import BaseCommand, CommandError

from jobs import conf, retention

log = logging.getLogger("jobs.retention")


class Command(BaseCommand):
    help = ("Delete finished jobs older than the given ages, in short batches that never wait on the queue. "
            f"Kept whatever their age: queued and running jobs, {', '.join(retention.ALWAYS_KEPT)} (the Imports "
            "event log), the types in JOBS_PRUNE_KEEP_TYPES, and jobs another row points at (an Import's job).")

    def add_arguments(self, parser):
        parser.add_argument(
            "--done-older-than", metavar="AGE", default=None,
            help="Delete done jobs finished longer ago than this: 14d, 12h, 30m, 1d12h, or 'never' "
                 f"(default: JOBS_PRUNE_DONE_AFTER, {conf.DEFAULTS['JOBS_PRUNE_DONE_AFTER']}).",
        )
        parser.add_argument(
            "--failed-older-than", metavar="AGE", default=None,
            help="The same for failed jobs "
                 f"(default: JOBS_PRUNE_FAILED_AFTER, {conf.DEFAULTS['JOBS_PRUNE_FAILED_AFTER']}).",
        )
        parser.add_argument(
            "--batch-size", type=int, default=None,
            help=f"Jobs per delete statement (default: JOBS_PRUNE_BATCH, {conf.DEFAULTS['JOBS_PRUNE_BATCH']}).",
        )
        parser.add_argument("--dry-run", action="store_true",
                            help="Print what would be deleted, by status and type; delete nothing.")

    def handle(self, *args, done_older_than, failed_older_than, batch_size, dry_run, **options):
        done_after = _age("--done-older-than", done_older_than, "JOBS_PRUNE_DONE_AFTER")
        failed_after = _age("--failed-older-than", failed_older_than, "JOBS_PRUNE_FAILED_AFTER")
        if done_after is None and failed_after is None:
            raise CommandError("nothing to prune: both done and failed jobs are kept ('never')")
        if batch_size is not None and batch_size < 1:
            raise CommandError("--batch-size must be at least 1")
        try:
            prune = retention.Prune.start(done_after=done_after, failed_after=failed_after, batch_size=batch_size)
        except ValueError as exc:  # JOBS_PRUNE_BATCH below 1
            raise CommandError(f"JOBS_PRUNE_BATCH: {exc}") from None
        for each in prune.passes:
            self.stdout.write(f"{each.status} jobs finished before {each.cutoff:%Y-%m-%d %H:%M:%S %Z} "
                              f"(older than {retention.format_age(each.older_than)})")
        kept = ", ".join([*prune.kept, *(f"jobs {table}.{column} points at" for table, column in prune.references)])
        self.stdout.write(f"kept whatever their age: {kept}")
        if dry_run:
            found = prune.count()
            self._counts(found, "would be deleted")
            self.stdout.write(f"dry run: {sum(found.values())} job(s) would be deleted; nothing was")
            return
        prune.run()
        self._counts(prune.deleted, "deleted")
        self.stdout.write(prune.summary())
        log.info("prunejobs: %s", prune.summary())

    def _counts(self, counts, verb: str) -> None:
        for status in retention.FINISHED:
            rows = sorted(((t, n) for (s, t), n in counts.items() if s == status), key=lambda r: (-r[1], r[0]))
            if not rows:
                continue
            self.stdout.write(f"{status}: {sum(n for _t, n in rows)} {verb}")
            for job_type, n in rows:
                self.stdout.write(f"  {job_type:<40} {n:>10}")


def _age(flag: str, given: str | None, setting: str):
    text = given if given is not None else conf.get(setting)
    try:
        return retention.parse_age(text)
    except ValueError as exc:
        source = flag if given is not None else setting
        raise CommandError(f"{source}: {exc}") from None
