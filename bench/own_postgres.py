"""A throw-away PostgreSQL cluster of Debian's binaries, with pg_stat_statements, for the queue's profile.

The embedded server (pgserver) has no contrib modules; Debian's ``postgresql-15`` has them
(``scripts/install_postgres_profiling.sh`` installs it). The cluster lives in a temporary
directory, listens on a Unix socket only (no TCP), runs as the ``postgres`` system user when
started by root (the server refuses root), and is removed at the end. Settings are initdb's
defaults (fsync on) plus what the profile reads: pg_stat_statements with its utility statements
(BEGIN, COMMIT) and planning time, and I/O timing.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

POSTGRES_ROOT = Path("/usr/lib/postgresql")
SETTINGS = {
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track": "all",
    "pg_stat_statements.track_utility": "on",
    "pg_stat_statements.track_planning": "on",
    "track_io_timing": "on",
    "listen_addresses": "",
}


class Unavailable(Exception):
    """No Debian PostgreSQL with pg_stat_statements on this machine."""


def binaries() -> Path:
    """The newest Debian PostgreSQL ``bin`` directory whose ``lib`` has pg_stat_statements."""
    found = sorted((d for d in POSTGRES_ROOT.glob("*") if (d / "lib" / "pg_stat_statements.so").exists()
                    and (d / "bin" / "postgres").exists()), key=lambda d: int(d.name) if d.name.isdigit() else 0)
    if not found:
        raise Unavailable(f"no PostgreSQL with pg_stat_statements under {POSTGRES_ROOT}: "
                          "run scripts/install_postgres_profiling.sh (make bench-profile does)")
    return found[-1] / "bin"


def _as_server_user() -> tuple[list[str], int | None, int | None]:
    """The prefix and ids that run a server command as ``postgres`` when we are root; nothing otherwise."""
    if os.geteuid() != 0:
        return [], None, None
    user = pwd.getpwnam("postgres")
    return ["runuser", "-u", "postgres", "--"], user.pw_uid, user.pw_gid


@contextmanager
def debian_server():
    """Start the cluster; yield the settings ``bench.common.connect`` takes, and the postgres binary's path."""
    bin_dir = binaries()
    prefix, uid, gid = _as_server_user()
    base = Path(tempfile.mkdtemp(prefix="seoinsight-profile-pg-"))
    data, sockets = base / "data", base / "sockets"
    sockets.mkdir()
    if uid is not None:
        for path in (base, sockets):
            os.chown(path, uid, gid)
    try:
        subprocess.run([*prefix, str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust",
                        "--no-sync"], check=True, stdout=subprocess.DEVNULL)
        options = " ".join(f"-c {key}={value!r}" if value else f"-c {key}=''" for key, value in SETTINGS.items())
        subprocess.run([*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-w", "-l", str(base / "log"),
                        "-o", f"{options} -k {sockets}", "start"], check=True, stdout=subprocess.DEVNULL)
        try:
            yield {"host": str(sockets), "port": "5432", "user": "postgres", "password": ""}, bin_dir / "postgres"
        finally:
            subprocess.run([*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-w", "-m", "fast", "stop"],
                           check=False, stdout=subprocess.DEVNULL)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def server_cpu_seconds(postgres_binary: Path) -> float:
    """User + system CPU of every process of that binary so far (the cluster's backends and its helpers).

    Only this profile's cluster runs Debian's binary here (the app's server is pgserver's); a
    backend that exited meanwhile is counted by its parent as children's time (cutime, cstime).
    """
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    target = str(postgres_binary)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "exe") != target:
                continue
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, PermissionError, ProcessLookupError):
            continue
        # After the ")": state is field 3, utime 14, stime 15, cutime 16, cstime 17 (1-based in proc(5)).
        total += sum(int(fields[i]) for i in (11, 12, 13, 14))
    return total / ticks
