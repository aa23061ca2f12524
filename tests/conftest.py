import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest
from django.db import connection

from tests.support.handlers import EXECUTIONS_DDL
from tests.support.processes import ManagedProcess
from tests.support.test_database import clone_test_database


_MEDIA = pytest.StashKey[Path]()


def pytest_configure(config):
    """A MEDIA_ROOT of this pytest process's own, which the processes its tests start inherit.

    Several pytest processes run at once (``make test``); what one stores must not land among another's files.
    """
    from django.conf import settings

    # A shell starts a background command (`cmd &`) with SIGINT ignored, and the processes the tests
    # start would inherit that: a Ctrl-C test would see its Ctrl-C ignored. A handler of Python's own
    # is reset to the default in every child, as a terminal's user would have it.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)

    media = Path(tempfile.mkdtemp(prefix="seoinsight-media-"))
    os.environ["MEDIA_ROOT"] = str(media)
    settings.MEDIA_ROOT = config.stash[_MEDIA] = media
    # The mail tests' servers (Dovecot, the scripted fakes) listen on 127.0.0.1 at ports of their own, which a
    # deployment keeps closed (mailpoll.providers.destination). From the environment, as a deployment sets them,
    # so the processes the tests start inherit them; their warnings silenced, as an on-premise deployment would.
    allowances = {"MAILPOLL_ALLOW_PRIVATE_HOSTS": "1", "MAILPOLL_EXTRA_PORTS": "*",
                  "SILENCED_SYSTEM_CHECKS": "mailpoll.W006,mailpoll.W007"}
    for name, value in allowances.items():
        os.environ.setdefault(name, value)
    settings.SILENCED_SYSTEM_CHECKS = [*settings.SILENCED_SYSTEM_CHECKS, "mailpoll.W006", "mailpoll.W007"]


def pytest_unconfigure(config):
    shutil.rmtree(config.stash.get(_MEDIA, ""), ignore_errors=True)


def pytest_ignore_collect(collection_path, config):
    """Only test modules are collected here: --doctest-modules is for the code's docstrings.

    Importing some support modules has effects for the process's whole life (worker_types and
    extra_handlers register job types), which only a worker subprocess or the test that loads
    them may cause.
    """
    if collection_path.suffix == ".py" and not collection_path.name.startswith(("test_", "conftest")):
        return True
    return None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """The slow tests (real processes, a browser) first, so a parallel run does not end on one of them alone.

    Runs after pytest-django's own order (plain ``db`` tests, then transactional ones, then those
    without the test database), which it keeps: a transactional test empties the tables, so no
    plain ``db`` test may follow one. Only the slow tests without the test database (the outage
    tests, on servers of their own) move to the front, and the slow ones lead their group.
    """
    def rank(item):
        slow = bool(item.get_closest_marker("processes") or item.get_closest_marker("e2e"))
        group = _database_group(item)
        return (-1 if slow and group == 2 else group), not slow

    items.sort(key=rank)


def _database_group(item) -> int:
    """pytest-django's: 0 for the test database, 1 for a transactional one, 2 for none."""
    marker = item.get_closest_marker("django_db")
    fixtures = getattr(item, "fixturenames", ())
    transactional = (marker is not None and (marker.kwargs.get("transaction") or marker.kwargs.get("reset_sequences"))
                     or "transactional_db" in fixtures or "live_server" in fixtures)
    return 1 if transactional else 0 if (marker is not None or "db" in fixtures) else 2


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """One test database per pytest run: several runs may share the embedded server."""
    from django.conf import settings

    test = settings.DATABASES["default"].setdefault("TEST", {})
    test["NAME"] = f"test_seoinsight_{os.getpid()}"


@pytest.fixture(scope="session")
def django_db_setup(django_test_environment, django_db_blocker, django_db_modify_db_settings):
    """The test database, a copy of the migrated template (tests/support/test_database.py).

    Django's own set-up then finds it present (keepdb) and up to date: its migrate is a no-op.
    Nothing is serialized: no test here uses serialized_rollback.
    """
    from django.test.utils import setup_databases, teardown_databases

    with django_db_blocker.unblock():
        if hasattr(connection, "attach_embedded"):
            connection.attach_embedded()  # the embedded server's socket, for the template's migrate
        clone_test_database(connection.settings_dict, connection.settings_dict["TEST"]["NAME"])
        config = setup_databases(verbosity=0, interactive=False, keepdb=True, serialized_aliases=set())
    yield
    with django_db_blocker.unblock():
        _end_stray_sessions(connection.settings_dict["NAME"])
        teardown_databases(config, verbosity=0)


def _end_stray_sessions(name: str) -> None:
    """Sessions still on the test database when the run ends would make its DROP fail: name them, then end them.

    Every test closes what it opens and stops the processes it starts, so a session here is a leak or
    a process slower to exit than its test waited for; the line says whose it was.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid, application_name, state, left(query, 200) FROM pg_stat_activity "
                       "WHERE datname = %s AND pid <> pg_backend_pid()", [name])
        stray = cursor.fetchall()
        for pid, application, state, query in stray:
            print(f"\nstray session on {name} at the end of the run: pid={pid} application={application!r} "
                  f"state={state} query={query!r}; ended")
            cursor.execute("SELECT pg_terminate_backend(%s, 5000)", [pid])  # waits for it to end
    connection.close()


@pytest.fixture
def executions(transactional_db):
    """The table test handlers record their runs in, empty. Returns a query helper."""
    with connection.cursor() as cursor:
        cursor.execute(EXECUTIONS_DDL)
        cursor.execute("TRUNCATE test_executions")

    def query(sql="SELECT job_id, type, attempt, pid, site_id, started_at, finished_at FROM test_executions", params=None):
        with connection.cursor() as cursor:
            cursor.execute(sql, params or [])
            return cursor.fetchall()

    return query


@pytest.fixture
def processes(request):
    """Start managed processes; all are stopped at teardown, their logs shown if the test failed."""
    started: list[ManagedProcess] = []

    def start(factory, *args, **kwargs) -> ManagedProcess:
        proc = factory(*args, **kwargs)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        for proc in started:
            print(f"\n----- output of {' '.join(proc.args)} (pid {proc.pid}) -----\n{proc.output()[-6000:]}")


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


@pytest.fixture(scope="session")
def zombies_possible(django_db_setup, django_db_blocker):
    """Wait until the database server has been up longer than the default zombie threshold.

    The sweep never counts a job's silence from before pg_postmaster_start_time()
    (so a restarted server does not judge its workers dead): on a server started
    seconds ago, as in a fresh CI run, no job can be a zombie yet, however old its
    started_at. Session-scoped, so it runs before any test's transaction begins
    (now() inside that transaction is what the zombie rule reads).
    """
    from jobs import conf

    threshold = float(conf.get("JOBS_STALE_AFTER")) + 1
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute("SELECT EXTRACT(EPOCH FROM clock_timestamp() - pg_postmaster_start_time())")
        (up,) = cursor.fetchone()
    if float(up) < threshold:
        time.sleep(threshold - float(up))
