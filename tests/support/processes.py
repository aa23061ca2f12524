"""Real OS processes for concurrency tests: workers started with `manage.py runjobs` (and ``run_burst``, one in-process)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def database_url(settings_dict=None) -> str:
    """A DATABASE_URL for the database the tests are using (the test database)."""
    s = settings_dict or connection.settings_dict
    host = quote(s["HOST"] or "localhost", safe="")
    port = s["PORT"] or 5432
    password = f":{quote(s['PASSWORD'])}" if s.get("PASSWORD") else ""
    return f"postgres://{quote(s['USER'])}{password}@{host}:{port}/{s['NAME']}"


def process_env(**overrides) -> dict:
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": database_url(),
            "JOBS_HANDLER_MODULES": "tests.support.worker_types",
            "JOBS_HEARTBEAT_INTERVAL": "0.5",
            "JOBS_STALE_AFTER": "3",
            "JOBS_SWEEP_INTERVAL": "1",
            "JOBS_POLL_INTERVAL": "0.5",
            "LOG_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update({k: str(v) for k, v in overrides.items()})
    return env


class ManagedProcess:
    """A `manage.py` command in its own process, its output kept in a file for failure reports."""

    def __init__(self, *args: str, env: dict | None = None):
        self.args = args
        self.log = tempfile.NamedTemporaryFile(prefix="proc-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env or process_env(),
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def wait(self, timeout: float = 60) -> int:
        return self.proc.wait(timeout=timeout)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def output(self) -> str:
        return Path(self.log.name).read_text(errors="replace")

    def stop(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


def peak_rss_kb(process: ManagedProcess, *, until_exit: float | None = None) -> int:
    """The process's peak resident memory in kB: its VmHWM, the kernel's high-water mark.

    Read once, from a process that must still run. With ``until_exit`` (seconds), for a process that ends on
    its own: read again while it runs, at most that long, and the last reading kept (0 if it was gone already).
    """
    status, peak = Path(f"/proc/{process.pid}/status"), 0
    ends = time.monotonic() + (until_exit or 0)
    while True:
        try:
            text = status.read_text()
        except (FileNotFoundError, ProcessLookupError):
            text = ""  # reaped
        hwm = next((int(line.split()[1]) for line in text.splitlines() if line.startswith("VmHWM:")), None)
        if until_exit is None:
            assert hwm is not None, f"{' '.join(process.args)} (pid {process.pid}) no longer runs: no VmHWM"
            return hwm
        if hwm is None:  # gone, or a zombie: no memory left
            return peak
        peak = max(peak, hwm)
        if not process.alive() or time.monotonic() >= ends:
            return peak
        time.sleep(0.02)


def runjobs(*args: str, **env_overrides) -> ManagedProcess:
    return ManagedProcess("runjobs", *args, env=process_env(**env_overrides))


def wait_for(condition, timeout: float = 30, interval: float = 0.05, message: str = "condition"):
    """Poll ``condition`` until it returns a truthy value; fail with ``message`` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


def run_burst(**kwargs) -> int:
    """A worker in this process until nothing is claimable; returns jobs processed."""
    from jobs.worker import Worker

    return Worker(burst=True, listen=False, **kwargs).run()
