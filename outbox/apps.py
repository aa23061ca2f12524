from django.apps import AppConfig


class OutboxConfig(AppConfig):
    name = "outbox"
    verbose_name = "Downstream outbox"

    def ready(self):
        from . import checks  # noqa: F401  (checks register themselves)
