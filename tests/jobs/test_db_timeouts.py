"""Database timeouts of runjobs and pollmail (jobs.dbsession): a lock held elsewhere, a database that stops answering."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from jobs import dbsession
from jobs.models import Job, JobStatus
from jobs.queue import enqueue
from tests.support.pgproxy import PgProxy
from tests.support.processes import ManagedProcess, database_url, process_env, runjobs, wait_for


@pytest.mark.parametrize("overrides, expected", [
    ({}, {"connect_timeout": 10, "keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10,
          "keepalives_count": 3, "tcp_user_timeout": 60000,
          "options": "-c statement_timeout=300000 -c lock_timeout=30000 -c plan_cache_mode=force_generic_plan"}),
    ({"JOBS_DB_CONNECT_TIMEOUT": 0, "JOBS_DB_KEEPALIVES_IDLE": 0, "JOBS_DB_STATEMENT_TIMEOUT": 0,
      "JOBS_DB_LOCK_TIMEOUT": 0, "JOBS_PREPARED_STATEMENTS": False}, {}),
    ({"JOBS_DB_STATEMENT_TIMEOUT": 2.5, "JOBS_DB_LOCK_TIMEOUT": 0, "JOBS_DB_KEEPALIVES_IDLE": 0},
     {"connect_timeout": 10, "options": "-c statement_timeout=2500 -c plan_cache_mode=force_generic_plan"}),
])
def test_connection_options(settings, overrides, expected):
    for name, value in overrides.items():
        setattr(settings, name, value)
    assert dbsession.connection_options() == expected


@pytest.mark.django_db
def test_the_web_keeps_its_own_values():
    """Nothing but the background commands calls dbsession.configure: web connections have no such limits."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('statement_timeout'), current_setting('lock_timeout')")
        assert cursor.fetchone() == ("0", "0")


def test_timeout_fired_names_the_setting():
    assert dbsession.timeout_fired(psycopg.errors.LockNotAvailable("canceling statement due to lock timeout")) \
        == "JOBS_DB_LOCK_TIMEOUT"
    assert dbsession.timeout_fired(psycopg.errors.QueryCanceled("canceling statement due to statement timeout")) \
        == "JOBS_DB_STATEMENT_TIMEOUT"
    assert dbsession.timeout_fired(psycopg.OperationalError("connection timeout expired")) == "JOBS_DB_CONNECT_TIMEOUT"
    assert dbsession.timeout_fired(psycopg.errors.QueryCanceled("canceling statement due to user request")) is None




@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_a_table_lock_held_elsewhere_times_the_claim_out_with_a_log_line(processes):
    with psycopg.connect(database_url()) as locker:
        locker.execute("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE")  # held until the block ends
        worker = processes(runjobs, JOBS_DB_LOCK_TIMEOUT=1)
        wait_for(lambda: "JOBS_DB_LOCK_TIMEOUT fired" in worker.output(), timeout=30,
                 message="the worker to say its claim timed out on the lock")
        assert "canceling statement due to lock timeout" in worker.output()
        assert worker.alive()
    job = enqueue("noop", org_id="locks")
    wait_for(lambda: Job.objects.get(pk=job.id).status == JobStatus.DONE, timeout=30,
             message="the worker to go on once the lock is gone")


def through(proxy: PgProxy) -> str:
    return proxy.url(connection.settings_dict["NAME"])


def proxy_to_test_database() -> PgProxy:
    return PgProxy(connection.settings_dict["HOST"], int(connection.settings_dict["PORT"] or 5432))


TIMEOUTS = {"JOBS_DB_STATEMENT_TIMEOUT": 2, "JOBS_DB_CONNECT_TIMEOUT": 2}


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_a_worker_whose_database_stops_answering_gives_up_on_it_and_comes_back(processes):
    with proxy_to_test_database() as proxy:
        worker = processes(runjobs, DATABASE_URL=through(proxy), **TIMEOUTS)
        # Up and claiming: its start-up sweep is done, so its loop sends a claim every poll interval
        # (before that sweep the loop sends nothing, and only reconnections would time out).
        first = enqueue("noop", org_id="silence")
        wait_for(lambda: Job.objects.get(pk=first.id).status == JobStatus.DONE, timeout=30,
                 message="the worker to run a first job")
        proxy.blackhole()  # connections stay open, nothing comes back
        wait_for(lambda: "no answer from the database" in worker.output(), timeout=30,
                 message="the worker to give up on the silent database")
        assert "runjobs: no answer from the database for 7s" in worker.output()
        wait_for(lambda: "JOBS_DB_CONNECT_TIMEOUT fired" in worker.output(), timeout=30,
                 message="the reconnection to time out too")
        assert worker.alive()
        proxy.restore()
        job = enqueue("noop", org_id="silence")
        wait_for(lambda: Job.objects.get(pk=job.id).status == JobStatus.DONE, timeout=40,
                 message="the worker to come back when the database answers")


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_a_poller_whose_database_stops_answering_says_so(processes):
    from mailpoll.models import Mailbox
    from tests.mailpoll.factories import MailboxFactory
    from tests.support.loopback import free_port

    mailbox = MailboxFactory(host="127.0.0.1", port=free_port(), security="none")  # refused at once
    with proxy_to_test_database() as proxy:
        poller = processes(lambda: ManagedProcess("pollmail", "--interval", "0.5",
                                                  env=process_env(DATABASE_URL=through(proxy), **TIMEOUTS)))
        # Its connection is up once it has claimed the mailbox: from then on every cycle sends a
        # claim on it (a blackhole before that leaves only connection attempts, which time out).
        wait_for(lambda: Mailbox.objects.filter(pk=mailbox.pk, last_polled_at__isnull=False).exists(),
                 timeout=30, message="the poller to claim its mailbox")
        proxy.blackhole()
        wait_for(lambda: "pollmail: no answer from the database" in poller.output(), timeout=30,
                 message="the poller to give up on the silent database")
        assert poller.alive()
        proxy.restore()


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_a_table_lock_held_elsewhere_times_a_poll_cycle_out_with_a_log_line(processes):
    from mailpoll.models import Mailbox

    with psycopg.connect(database_url()) as locker:
        locker.execute(f"LOCK TABLE {Mailbox._meta.db_table} IN ACCESS EXCLUSIVE MODE")
        poller = processes(lambda: ManagedProcess("pollmail", "--interval", "0.5",
                                                  env=process_env(JOBS_DB_LOCK_TIMEOUT=1)))
        wait_for(lambda: "canceling statement due to lock timeout" in poller.output(), timeout=30,
                 message="the poller to say its cycle timed out on the lock")
        assert "poll cycle failed" in poller.output()
        assert poller.alive()
