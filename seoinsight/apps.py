from django.apps import AppConfig


class SeoinsightConfig(AppConfig):
    name = "seoinsight"
    verbose_name = "Organisations and sites"
