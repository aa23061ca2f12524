from django.apps import AppConfig


class OutboxConfig(AppConfig):
    name = "outbox"
    verbose_name = "Downstream outbox"

    def ready(self):
        from jobs import duties

        from . import checks  # noqa: F401  (checks register themselves)
        from . import conf, watch

        # Every worker looks for due documents nobody is sending (outbox.watch).
        duties.register("outbox.wake_if_due", watch.wake_if_due, every=lambda: conf.get("OUTBOX_WATCH_SECONDS"))
