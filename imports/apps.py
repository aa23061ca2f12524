from django.apps import AppConfig


class ImportsConfig(AppConfig):
    name = "imports"
    verbose_name = "Imports"

    def ready(self):
        from . import checks  # noqa: F401  (checks register themselves)
