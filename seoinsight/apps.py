from django.apps import AppConfig


class SeoinsightConfig(AppConfig):
    name = "seoinsight"
    verbose_name = "Organisations and sites"

    def ready(self):
        from . import checks  # noqa: F401  (checks register themselves)
