from django.core.management.base import BaseCommand, CommandError

from jobs import conf, dbsession, registry
from jobs.worker import Worker


class Command(BaseCommand):
    help = ("Run jobs from the queue, one at a time (--concurrency N: up to N at once, in threads), until stopped "
            "(SIGTERM/SIGINT finish the running jobs).")

    def add_arguments(self, parser):
        parser.add_argument("--burst", action="store_true", help="Exit as soon as nothing this worker can run is claimable.")
        parser.add_argument("--max-jobs", type=int, default=None, help="Exit after this many jobs (default: no limit).")
        parser.add_argument(
            "--poll-interval", type=float, default=None,
            help=f"Seconds between polls when idle (default: JOBS_POLL_INTERVAL, {conf.DEFAULTS['JOBS_POLL_INTERVAL']}).",
        )
        parser.add_argument(
            "--no-listen", action="store_true",
            help="Poll only, no LISTEN/NOTIFY (for PgBouncer in transaction mode; default: JOBS_LISTEN_NOTIFY).",
        )
        parser.add_argument(
            "--queue", default=None, metavar="NAME[,NAME...]",
            help="Claim only jobs in these queues, comma-separated (default: every queue).",
        )
        parser.add_argument(
            "--concurrency", type=int, default=1, metavar="N",
            help="Run up to N jobs at once, each in a thread with its own database connection (default: 1, "
                 "one job at a time in the main thread).",
        )

    def handle(self, *args, burst, max_jobs, poll_interval, no_listen, queue, concurrency, **options):
        if max_jobs is not None and max_jobs < 1:
            raise CommandError("--max-jobs must be at least 1")
        if concurrency < 1:
            raise CommandError("--concurrency must be at least 1")
        if poll_interval is not None and poll_interval <= 0:
            raise CommandError("--poll-interval must be positive")
        queues = None
        if queue is not None:
            queues = [name.strip() for name in queue.split(",")]
            for name in queues:
                try:
                    registry.check_queue(name)
                except ValueError as exc:
                    raise CommandError(f"--queue {queue!r}: {exc}") from None
        dbsession.configure("runjobs")
        worker = Worker(
            burst=burst,
            max_jobs=max_jobs,
            listen=False if no_listen else None,
            poll_interval=poll_interval,
            queues=queues,
            concurrency=concurrency,
        )
        worker.install_signal_handlers()
        worker.run()
