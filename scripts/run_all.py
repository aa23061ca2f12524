"""`make run`: the web server, a job worker and a mail poller together, in the foreground.

Ctrl-C (or SIGTERM) stops all three: the worker finishes its current job first.
A worker that ended itself because a job's handler ran past its timeout and
could not be stopped (exit code 75, ``jobs.timeouts.EXIT_TIMED_OUT``) is
started again, as systemd's Restart=always would; if any process exits
otherwise, the others are stopped too, so nothing is left half-running.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
ADDRESS = os.environ.get("RUN_ADDRESS", "127.0.0.1:8000")

COMMANDS = {
    "web": [PYTHON, "manage.py", "runserver", ADDRESS, "--noreload"],
    "worker": [PYTHON, "manage.py", "runjobs"],
    "poller": [PYTHON, "manage.py", "pollmail"],
}

# jobs.timeouts.EXIT_TIMED_OUT (this script imports nothing of the project; a test keeps the two equal).
WORKER_TIMED_OUT = 75


def restarts(name: str, returncode: int) -> bool:
    """Is a process that exited with ``returncode`` started again (True) or does everything stop (False)?

    >>> restarts("worker", 75), restarts("worker", 0), restarts("worker", 1), restarts("web", 75)
    (True, False, False, False)
    """
    return name == "worker" and returncode == WORKER_TIMED_OUT


def start(name: str) -> subprocess.Popen:
    # Own sessions: a terminal Ctrl-C reaches only this script, which then stops
    # each child exactly once (a worker's second signal means "exit now").
    return subprocess.Popen(COMMANDS[name], cwd=ROOT, start_new_session=True)


def main() -> int:
    password_file = ROOT / ".data" / "demo-admin-password"
    password = password_file.read_text().strip() if password_file.exists() else "(see `manage.py seeddemo`)"
    procs = {name: start(name) for name in COMMANDS}
    print(f"\n  seoinsight is starting: imports at http://{ADDRESS}/imports/, admin at http://{ADDRESS}/admin/\n"
          f"  login: admin / {password}\n"
          f"  processes: {', '.join(f'{n} (pid {p.pid})' for n, p in procs.items())}. Ctrl-C stops all.\n",
          flush=True)

    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    while not stopping:
        ended = {name: p.returncode for name, p in procs.items() if p.poll() is not None}
        if any(not restarts(name, code) for name, code in ended.items()):
            break
        for name, code in ended.items():
            procs[name] = start(name)
            print(f"  {name} exited with code {code} (a job's handler could not be stopped after its timeout); "
                  f"started again as pid {procs[name].pid}", flush=True)
        time.sleep(0.2)
    for proc in procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 30
    for proc in procs.values():
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
