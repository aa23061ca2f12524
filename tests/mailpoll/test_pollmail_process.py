"""`pollmail` as a real process: it survives losing the database and stops cleanly on SIGTERM."""

import signal
from datetime import timedelta

import pytest
from django.db import connection

from mailpoll.models import Request
from tests.mailpoll.factories import MailboxFactory, mail
from tests.support.processes import ManagedProcess, process_env, wait_for

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


def terminate_other_backends():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def test_pollmail_survives_its_connections_being_killed_and_exits_0_on_sigterm(dovecot, processes, media):
    user, password = dovecot.add_user()
    MailboxFactory(host=dovecot.host, port=dovecot.port, username=user, password=password,
                   poll_interval=timedelta(seconds=1))
    dovecot.append(user, "INBOX", mail("first"))
    poller = processes(lambda: ManagedProcess("pollmail", "--interval", "0.5", env=process_env(MEDIA_ROOT=media)))
    wait_for(lambda: Request.objects.filter(subject="first").exists(), timeout=60, message="the first message")

    assert terminate_other_backends() >= 1
    dovecot.append(user, "INBOX", mail("after-outage"))
    wait_for(lambda: Request.objects.filter(subject="after-outage").exists(), timeout=60,
             message="a message after the database connection was killed")
    assert poller.alive()

    poller.signal(signal.SIGTERM)
    assert poller.wait(timeout=20) == 0
    assert "SIGTERM received" in poller.output()
