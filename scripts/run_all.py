"""`make run`: the web server, a job worker and a mail poller together, in the foreground.

First it checks that the web server's address (``RUN_ADDRESS``, host:port, default 127.0.0.1:8000)
is free: a port already taken ends it with code 1 and the address to use instead, before anything
starts — the database migration included, which would start the embedded PostgreSQL. Then it
migrates, creates the demo login (``seeddemo``) and starts the three.

Ctrl-C (or SIGTERM) stops all three: the worker finishes its current job first. The embedded
PostgreSQL keeps running, as other local processes may use it (``make stopdb`` stops it).
A worker that ended itself because a job's handler ran past its timeout and could not be stopped
(exit code 75, ``jobs.timeouts.EXIT_TIMED_OUT``) is started again, as systemd's Restart=always would;
if any process exits otherwise, the others are stopped too, so nothing is left half-running, and
the exit code is 1 (0 after Ctrl-C or SIGTERM; 2 for a RUN_ADDRESS that is not host:port).
"""

import errno
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
DEFAULT_ADDRESS = "127.0.0.1:8000"
# Where seoinsight/settings.py keeps the embedded server without DATABASE_URL (this script imports
# nothing of the project; a test keeps the two equal).
EMBEDDED_PGDATA = ROOT / ".data" / "postgres"

SETUP = [
    [PYTHON, "manage.py", "migrate", "--noinput"],
    [PYTHON, "manage.py", "seeddemo"],
]

# jobs.timeouts.EXIT_TIMED_OUT (a test keeps the two equal).
WORKER_TIMED_OUT = 75

# Ports after a taken one that are tried for the address to suggest instead.
SUGGESTION_TRIES = 20


def commands(address: str) -> dict[str, list[str]]:
    return {
        "web": [PYTHON, "manage.py", "runserver", address, "--noreload"],
        "worker": [PYTHON, "manage.py", "runjobs"],
        "poller": [PYTHON, "manage.py", "pollmail"],
    }


def restarts(name: str, returncode: int) -> bool:
    """Is a process that exited with ``returncode`` started again (True) or does everything stop (False)?

    >>> restarts("worker", 75), restarts("worker", 0), restarts("worker", 1), restarts("web", 75)
    (True, False, False, False)
    """
    return name == "worker" and returncode == WORKER_TIMED_OUT


def parse_address(text: str) -> tuple[str, int]:
    """``(host, port)`` of ``host:port`` (an IPv6 host in brackets); ValueError saying the form otherwise.

    >>> parse_address("127.0.0.1:8001"), parse_address("[::1]:8000"), parse_address("localhost:80")
    (('127.0.0.1', 8001), ('::1', 8000), ('localhost', 80))
    """
    host, _, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        raise ValueError(f"RUN_ADDRESS={text!r} is not host:port, e.g. {DEFAULT_ADDRESS}")
    return host, int(port)


def format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bind_error(host: str, port: int) -> OSError | None:
    """Why a server could not listen on ``host:port`` now (a bind test), or None when it could."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As runserver sets it: a port whose old connections linger in TIME_WAIT is free to it.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            return exc
    return None


def next_free_port(port: int, free, tries: int = SUGGESTION_TRIES) -> int | None:
    """The first port after ``port`` that ``free(port)`` accepts, among the next ``tries``; None if none is.

    >>> next_free_port(8000, lambda p: True), next_free_port(8000, lambda p: p > 8002), next_free_port(8000, bool, 0)
    (8001, 8003, None)
    >>> next_free_port(65535, lambda p: True) is None
    True
    """
    return next((p for p in range(port + 1, min(port + tries, 65535) + 1) if free(p)), None)


def cannot_listen(host: str, port: int, error: OSError, suggestion: int | None) -> str:
    """What to tell the operator when the web server could not listen on ``host:port``.

    >>> in_use = OSError(errno.EADDRINUSE, "Address already in use")
    >>> cannot_listen("127.0.0.1", 8000, in_use, 8001)
    'port 8000 is in use: set RUN_ADDRESS=127.0.0.1:8001'
    >>> cannot_listen("::1", 8000, in_use, None)
    'port 8000 is in use: set RUN_ADDRESS to a free host:port'
    >>> cannot_listen("10.9.9.9", 80, OSError(errno.EADDRNOTAVAIL, "Cannot assign requested address"), None)
    'cannot listen on 10.9.9.9:80 (Cannot assign requested address): set RUN_ADDRESS to an address of this machine'
    """
    if error.errno == errno.EADDRINUSE:
        instead = f"={format_address(host, suggestion)}" if suggestion else " to a free host:port"
        return f"port {port} is in use: set RUN_ADDRESS{instead}"
    return (f"cannot listen on {format_address(host, port)} ({error.strerror or error}): "
            f"set RUN_ADDRESS to an address of this machine")


def database_line(environ) -> str:
    """Where the data lives; a DATABASE_URL is not printed (it may hold a password)."""
    if environ.get("DATABASE_URL"):
        return "database: the PostgreSQL that DATABASE_URL names"
    return (f"database: the embedded PostgreSQL, its data in {EMBEDDED_PGDATA}; it keeps running after "
            f"Ctrl-C (`make stopdb` stops it)")


def banner(address: str, password: str, pids: dict[str, int], environ) -> str:
    return (f"\n  seoinsight is starting: imports at http://{address}/imports/, admin at http://{address}/admin/\n"
            f"  login: admin / {password}\n"
            f"  {database_line(environ)}\n"
            f"  processes: {', '.join(f'{name} (pid {pid})' for name, pid in pids.items())}. "
            f"Ctrl-C stops all three.\n")


# What `make run` turns on that a deployment chooses for itself (each off by default): the environment wins.
RUN_DEFAULTS = {"IMPORT_SCHEDULED_PULLS_EVERY": "3600", "INSIGHT_DETECT_DROPS_CRON": "0 6 * * *"}


def start(command: list[str]) -> subprocess.Popen:
    # Own sessions: a terminal Ctrl-C reaches only this script, which then stops
    # each child exactly once (a worker's second signal means "exit now").
    return subprocess.Popen(command, cwd=ROOT, start_new_session=True, env={**RUN_DEFAULTS, **os.environ})


def address_problem(address: str) -> tuple[int, str] | None:
    """``(exit code, message)`` when the web server could not listen on ``address`` now; None when it could."""
    try:
        host, port = parse_address(address)
    except ValueError as exc:
        return 2, str(exc)
    error = bind_error(host, port)
    if error is None:
        return None
    suggestion = next_free_port(port, lambda p: bind_error(host, p) is None)
    return 1, cannot_listen(host, port, error, suggestion)


def main(environ=os.environ) -> int:
    address = environ.get("RUN_ADDRESS") or DEFAULT_ADDRESS
    problem = address_problem(address)
    if problem is not None:
        code, message = problem
        print(message, file=sys.stderr)
        return code
    try:
        if any(subprocess.run(step, cwd=ROOT).returncode != 0 for step in SETUP):
            return 1
    except KeyboardInterrupt:
        return 130
    return supervise(address, environ)


def supervise(address: str, environ) -> int:
    """Start the three and watch them until Ctrl-C, SIGTERM or an exit; the exit code of ``make run``."""
    password_file = ROOT / ".data" / "demo-admin-password"
    password = password_file.read_text().strip() if password_file.exists() else "(see `manage.py seeddemo`)"
    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True

    # Before the first start: a Ctrl-C from here on stops whatever has started, never leaves it running.
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    to_run = commands(address)
    procs = {name: start(command) for name, command in to_run.items()}
    print(banner(address, password, {name: p.pid for name, p in procs.items()}, environ), flush=True)

    exit_code = 0
    while not stopping:
        ended = {name: p.returncode for name, p in procs.items() if p.poll() is not None}
        stopped = {name: code for name, code in ended.items() if not restarts(name, code)}
        if stopped:
            exit_code = 1
            print(f"  {', '.join(f'{n} exited with code {c}' for n, c in stopped.items())}: stopping the others",
                  file=sys.stderr, flush=True)
            break
        for name, code in ended.items():
            procs[name] = start(to_run[name])
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
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
