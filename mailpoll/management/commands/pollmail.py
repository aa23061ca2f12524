from django.core.management.base import BaseCommand, CommandError

from jobs import dbsession
from mailpoll import conf
from mailpoll.sync.poller import Poller


class Command(BaseCommand):
    help = ("Poll the due mailboxes for mail, every --interval seconds, until SIGTERM/SIGINT. "
            "Run several: replicas share the work through row locks.")

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="Run one cycle and exit (cron, tests).")
        parser.add_argument(
            "--interval", type=float, default=None,
            help=f"Seconds between cycles (default: MAILPOLL_INTERVAL, {conf.DEFAULTS['MAILPOLL_INTERVAL']:.0f}).",
        )

    def handle(self, *args, once, interval, **options):
        if interval is not None and interval <= 0:
            raise CommandError("--interval must be positive")
        for name in ("MAILPOLL_CONCURRENCY", "MAILPOLL_POLL_DEADLINE", "MAILPOLL_SOCKET_TIMEOUT"):
            if conf.get(name) <= 0:
                raise CommandError(f"{name} must be positive (it is {conf.get(name)})")
        dbsession.configure("pollmail")  # the background database timeouts (JOBS_DB_*)
        poller = Poller(interval=interval)
        poller.install_signal_handlers()
        poller.run(once=once)
