"""The production web server: gunicorn on 127.0.0.1 with DEBUG=0 serves /health/ as a probe sees it.

Each test starts one gunicorn (one worker) against a database of its own kind —
the test database with a runjobs and a pollmail listed, nothing listening, an
empty database — and stops it at the end.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import tempfile
import uuid
from contextlib import closing, contextmanager
from pathlib import Path

import pytest
import requests
from django.db import connection

from jobs.models import Process
from tests.support.processes import ROOT, database_url, process_env, wait_for

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


def free_port() -> int:
    with closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def gunicorn(database: str):
    """A gunicorn serving the project with production settings; yields its base URL."""
    port = free_port()
    env = process_env(DATABASE_URL=database, DEBUG="0", SECRET_KEY=f"gunicorn-test-{uuid.uuid4()}",
                      ALLOWED_HOSTS="127.0.0.1", METRICS_TOKEN="")
    log = tempfile.NamedTemporaryFile(prefix="gunicorn-", suffix=".log", delete=False)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "seoinsight.wsgi:application", "--bind", f"127.0.0.1:{port}",
         "--workers", "1", "--timeout", "20", "--graceful-timeout", "2"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"

    def answers():
        if proc.poll() is not None:
            raise AssertionError(f"gunicorn exited {proc.returncode}:\n{Path(log.name).read_text()[-4000:]}")
        try:
            return requests.get(f"{base}/health/live", timeout=5, allow_redirects=False).status_code == 200
        except (requests.ConnectionError, requests.Timeout):
            return False  # not listening yet, or its worker still importing the app on a busy machine

    try:
        wait_for(answers, timeout=30, interval=0.1, message="gunicorn to answer /health/live")
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def ready(base: str) -> requests.Response:
    response = requests.get(f"{base}/health/ready", timeout=10, allow_redirects=False)
    assert response.headers["Content-Type"] == "application/json", response.text
    return response


def test_gunicorn_with_debug_off_is_ready_with_a_worker_and_a_poller_listed():
    Process.objects.all().delete()
    Process.objects.create(kind="runjobs", host="app-1", pid=101)
    Process.objects.create(kind="pollmail", host="app-1", pid=102)

    with gunicorn(database_url()) as base:
        response = ready(base)
        assert response.status_code == 200, response.text
        assert response.json()["status"] == "ready"
        # Everything else is still sent to HTTPS with DEBUG off (a metrics token too): only the probes are exempt.
        assert requests.get(f"{base}/metrics", timeout=5, allow_redirects=False).status_code == 301
        admin = requests.get(f"{base}/admin/", timeout=5, allow_redirects=False)
        assert admin.status_code == 301 and admin.headers["Location"].startswith("https://")


def test_gunicorn_without_its_database_is_live_but_not_ready_and_says_no_more():
    port = free_port()  # nothing listens there
    with gunicorn(f"postgres://ops_user:hunter2@127.0.0.1:{port}/seoinsight_gone") as base:
        response = ready(base)

    assert response.status_code == 503
    body = response.json()
    assert body["checks"] == {"database": {"ok": False, "problems": ["the database is unreachable"]}}
    for secret in ("hunter2", "ops_user", str(port), "seoinsight_gone"):
        assert secret not in response.text


def test_gunicorn_on_an_unmigrated_database_is_not_ready():
    name = f"test_unmigrated_{uuid.uuid4().hex[:8]}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {name}")
    try:
        settings = {**connection.settings_dict, "NAME": name}
        with gunicorn(database_url(settings)) as base:
            response = ready(base)
        assert response.status_code == 503
        checks = response.json()["checks"]
        assert checks["database"]["ok"] is True
        assert checks["migrations"]["ok"] is False
        assert "not applied" in checks["migrations"]["problems"][0]
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
