"""`make run` (scripts/run_all.py): a taken web port stops it before anything starts; its banner says where
the embedded PostgreSQL keeps its data and that it outlives Ctrl-C."""

from __future__ import annotations

import doctest
import importlib.util
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import ROOT

SCRIPT = ROOT / "scripts" / "run_all.py"

# Imported by every Python process started with this directory on PYTHONPATH: each appends its command line.
RECORDER = """\
import os, sys
with open(os.path.join(os.path.dirname(__file__), "started"), "a") as started:
    started.write(" ".join(sys.argv) + "\\n")
"""


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("run_all", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_scripts_examples_hold(script):
    # scripts/ is outside pytest's doctest paths: its docstring examples run here.
    assert doctest.testmod(script).failed == 0


def processes_with(marker: str) -> list[str]:
    """The command lines of the live processes whose environment holds ``marker``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and marker.encode() in (proc / "environ").read_bytes():
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:  # gone meanwhile, or another user's
            continue
    return found


def test_a_taken_port_ends_make_run_with_its_reason_before_anything_starts(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(RECORDER)
    marker = f"{os.getpid()}-{tmp_path.name}"
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        env = {**os.environ, "RUN_ADDRESS": f"127.0.0.1:{port}", "PYTHONPATH": str(tmp_path),
               "SEOINSIGHT_MAKE_RUN_TEST": marker,
               # Were anything started, it would find no database rather than touch a real one.
               "DATABASE_URL": "postgres://nobody@127.0.0.1:9/nothing"}
        result = subprocess.run([sys.executable, str(SCRIPT)], cwd=ROOT, env=env, capture_output=True, text=True,
                                timeout=120)

    assert result.returncode == 1, result.stderr
    message = result.stderr.strip()
    assert message.startswith(f"port {port} is in use: set RUN_ADDRESS=127.0.0.1:"), message
    assert int(message.rsplit(":", 1)[1]) > port
    assert result.stdout == ""  # no banner, no migration
    # The script alone ran: no migrate, seeddemo, runserver, runjobs or pollmail, not even for a moment.
    assert (tmp_path / "started").read_text().splitlines() == [str(SCRIPT)]
    assert processes_with(f"SEOINSIGHT_MAKE_RUN_TEST={marker}") == []


def test_a_run_address_that_is_not_host_and_port_is_refused(tmp_path):
    env = {**os.environ, "RUN_ADDRESS": "8001"}
    result = subprocess.run([sys.executable, str(SCRIPT)], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)

    assert (result.returncode, result.stderr.strip()) == (2, "RUN_ADDRESS='8001' is not host:port, e.g. 127.0.0.1:8000")


@pytest.mark.parametrize("address, problem", [
    ("127.0.0.1:8000", None),
    ("localhost:8000", None),
    ("127.0.0.1", "not host:port"),
    (":8000", "not host:port"),
    ("127.0.0.1:0", "not host:port"),
    ("127.0.0.1:65536", "not host:port"),
    ("127.0.0.1:80x", "not host:port"),
    ("127.0.0.1:٨٠٠٠", "not host:port"),  # digits to str.isdigit, not a port
])
def test_parse_address(script, address, problem):
    if problem is None:
        assert script.parse_address(address) == (address.split(":")[0], 8000)
    else:
        with pytest.raises(ValueError, match=problem):
            script.parse_address(address)


def test_a_free_address_has_no_problem_and_a_held_one_names_a_free_port(script):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        code, message = script.address_problem(f"127.0.0.1:{port}")
        suggested = int(message.rsplit(":", 1)[1])
        assert script.bind_error("127.0.0.1", suggested) is None
    assert code == 1
    assert script.address_problem(f"127.0.0.1:{port}") is None  # released with the socket


def embedded_data_directory() -> str:
    """Where the settings put the embedded server's data when DATABASE_URL is unset (settings start nothing)."""
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"} | {"DJANGO_SETTINGS_MODULE": "seoinsight.settings"}
    code = "from django.conf import settings; print(settings.DATABASES['default']['EMBEDDED']['PGDATA'])"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip()


def test_the_banner_says_where_the_embedded_postgresql_keeps_its_data_and_how_to_stop_it(script):
    text = script.banner("127.0.0.1:8001", "pw", {"web": 11, "worker": 12, "poller": 13}, environ={})
    data = embedded_data_directory()

    assert str(script.EMBEDDED_PGDATA) == data
    assert (f"database: the embedded PostgreSQL, its data in {data}; it keeps running "
            f"after Ctrl-C (`make stopdb` stops it)") in text
    assert "http://127.0.0.1:8001/admin/" in text and "login: admin / pw" in text
    assert "web (pid 11), worker (pid 12), poller (pid 13)" in text


def test_the_banner_never_prints_a_database_url(script):
    text = script.banner("127.0.0.1:8000", "pw", {}, environ={"DATABASE_URL": "postgres://u:secret@db/seo"})

    assert "database: the PostgreSQL that DATABASE_URL names" in text
    assert "secret" not in text and ".data" not in text
