from django.apps import AppConfig


class MailpollConfig(AppConfig):
    name = "mailpoll"
    verbose_name = "Mail intake"

    def ready(self):
        from . import checks  # noqa: F401  (checks register themselves)
        from . import grant_checks  # noqa: F401
        from . import waiting_queues
        from .job_subjects import register_job_subjects

        register_job_subjects()
        waiting_queues.register()  # the admin index's failing mailboxes (seoinsight.waiting)
