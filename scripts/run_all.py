"""`make run`: the web server, a job worker and a mail poller together, in the foreground.

Ctrl-C (or SIGTERM) stops both: the worker finishes its current job first. If
either process exits, the other is stopped too, so nothing is left half-running.
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


def main() -> int:
    password_file = ROOT / ".data" / "demo-admin-password"
    password = password_file.read_text().strip() if password_file.exists() else "(see `manage.py seeddemo`)"
    # Own sessions: a terminal Ctrl-C reaches only this script, which then stops
    # each child exactly once (a worker's second signal means "exit now").
    procs = {name: subprocess.Popen(cmd, cwd=ROOT, start_new_session=True) for name, cmd in COMMANDS.items()}
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
    while not stopping and all(p.poll() is None for p in procs.values()):
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
