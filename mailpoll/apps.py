from django.apps import AppConfig


class MailpollConfig(AppConfig):
    name = "mailpoll"
    verbose_name = "Mail intake"
