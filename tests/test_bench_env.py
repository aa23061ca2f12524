"""The benchmarks run the app's processes as production does: DEBUG off, whatever the shell says."""

import subprocess
import sys

from bench.common import ROOT, AppProcess, worker_env

SHOW = "from django.conf import settings; print(settings.DEBUG, bool(settings.SECRET_KEY))"


def test_every_app_process_of_a_benchmark_gets_debug_off(monkeypatch):
    monkeypatch.setenv("DEBUG", "1")  # a developer's shell
    env = worker_env("postgres://bench@localhost/unused", extra={"LOG_LEVEL": "DEBUG"})
    assert (env["DEBUG"], env["LOG_LEVEL"]) == ("0", "DEBUG")

    shown = subprocess.run([sys.executable, "manage.py", "shell", "-v", "0", "-c", SHOW], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == ["False", "True"]


def test_app_process_takes_its_extra_settings_through_worker_env(monkeypatch):
    """One place builds the environment: a process with settings of its own still gets DEBUG off."""
    started = {}
    monkeypatch.setattr("bench.common.subprocess.Popen", lambda *args, **kwargs: started.update(kwargs))
    process = AppProcess("postgres://bench@localhost/unused", "pollmail", "--once", env={"MAILPOLL_LIVE_RECONCILE": 0.3})
    process.log.unlink()
    assert (started["env"]["DEBUG"], started["env"]["MAILPOLL_LIVE_RECONCILE"]) == ("0", "0.3")
