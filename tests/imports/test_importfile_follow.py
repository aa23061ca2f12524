"""`importfile --wait` as a real process, through the faults it must ride out.

A database restart while it follows, a worker killed under it, an import that
fails in the worker, a 40-column terminal: the command keeps following, says
what is going on in one line that fits, and its exit code means what the docs
say (0 done, 1 failed, 2 nothing queued, 3 stopped waiting).
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from imports.models import Import, ImportStatus
from jobs.models import Job, JobStatus
from tests.support.postgres import migrated_server
from tests.support.processes import ROOT, ManagedProcess, process_env, runjobs, wait_for

pytestmark = pytest.mark.processes

ROWS = 120_000  # with IMPORT_BATCH_SIZE=500: 240 batches, seconds of work for the faults to land in


def write_export(path, rows: int = ROWS):
    with path.open("w") as out:
        out.write("Page,Clicks,Impressions,Date\n")
        for i in range(rows):
            out.write(f"https://acme.example/p{i % 5000},{i % 7},{i % 90 + 10},2026-10-{i % 28 + 1:02d}\n")
    return path


def importfile(*args, **env) -> ManagedProcess:
    return ManagedProcess("importfile", *[str(a) for a in args], env=process_env(**env))


def lines_drawn(output: str) -> list[str]:
    """The status lines as redrawn: what follows each carriage return, up to the next one or a newline."""
    return [re.split(r"[\r\n]", piece, maxsplit=1)[0] for piece in output.split("\r")[1:]]


def raw_output(process: ManagedProcess) -> str:
    """The process's output with its carriage returns (``output()`` reads them as newlines)."""
    return Path(process.log.name).read_bytes().decode(errors="replace")


def assert_fits(output: str, columns: int) -> None:
    drawn = lines_drawn(output)
    assert drawn, "no status line was drawn"
    too_long = [line for line in drawn if len(line) >= columns]
    assert not too_long, f"lines that would wrap at {columns} columns: {too_long}"


# -- a database restart, on a server of our own -----------------------------------------------

DB = "seoinsight_follow"


@pytest.fixture
def outage_server(request):
    with migrated_server(request, DB) as server:
        yield server


def create_target(server) -> int:
    code = ("from seoinsight.models import Org, Site, SiteTarget; org = Org.objects.create(id='acme', name='Acme'); "
            "site = Site.objects.create(org=org, domain='acme.example'); "
            "print(SiteTarget.objects.create(site=site, url_prefix='https://acme.example/').pk)")
    result = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=120, env=process_env(DATABASE_URL=server.url(DB)))
    assert result.returncode == 0, result.stderr
    return int(result.stdout.strip().splitlines()[-1])


def test_wait_follows_the_import_through_a_database_restart(outage_server, processes, tmp_path):
    server = outage_server
    target = create_target(server)
    env = {"DATABASE_URL": server.url(DB), "MEDIA_ROOT": str(tmp_path / "media"), "IMPORT_BATCH_SIZE": "500"}
    processes(runjobs, **env)
    follower = processes(importfile, write_export(tmp_path / "export.csv"), "--target", target, "--wait",
                         COLUMNS="40", **env)

    def importing():
        rows = server.query(DB, "SELECT (progress ->> 'done')::int FROM jobs WHERE type = 'import_csv'"
                             " AND status = 'running'")
        return rows and (rows[0][0] or 0) > 0

    wait_for(importing, timeout=60, message="the import to be under way")
    server.restart()  # every session is cut, the follower's too

    assert follower.wait(timeout=180) == 0, follower.output()
    output = follower.output()
    assert "database unavailable — retrying in" in output
    assert "Traceback" not in output
    assert f"read {ROWS}  inserted" in output
    assert server.query(DB, "SELECT status FROM imports_import") == [("done",)]
    assert_fits(raw_output(follower), 40)


def test_wait_keeps_following_while_the_database_is_down(outage_server, processes, tmp_path):
    server = outage_server
    target = create_target(server)
    env = {"DATABASE_URL": server.url(DB), "MEDIA_ROOT": str(tmp_path / "media"), "IMPORT_BATCH_SIZE": "500"}
    processes(runjobs, **env)
    follower = processes(importfile, write_export(tmp_path / "export.csv"), "--target", target, "--wait", **env)
    wait_for(lambda: "rows" in follower.output(), timeout=60, message="the progress bar")

    server.stop()
    # Tries again and again, with growing waits: 0.5, 1, 2 s …
    wait_for(lambda: "retrying in 2 s" in follower.output(), timeout=30, message="the backoff to grow")
    assert follower.alive()
    server.start()

    assert follower.wait(timeout=180) == 0, follower.output()
    assert "Traceback" not in follower.output()


# -- on the test database, committed: the processes read it --------------------------------------

@pytest.mark.django_db(transaction=True)
def test_a_dead_worker_is_named_and_the_import_still_finishes(target, processes, tmp_path):
    env = {"MEDIA_ROOT": str(tmp_path / "media"), "IMPORT_BATCH_SIZE": "500"}
    worker = processes(runjobs, **env)
    follower = processes(importfile, write_export(tmp_path / "export.csv"), "--target", target.pk, "--wait",
                         COLUMNS="80", **env)
    wait_for(lambda: Job.objects.filter(type="import_csv", status=JobStatus.RUNNING,
                                        progress__done__gt=0).exists(), timeout=60, message="the import to run")
    worker.kill9()

    # No heartbeat any more: after WORKER_HINT_AFTER (10 s) the line says so.
    wait_for(lambda: "— is a worker running?" in follower.output(), timeout=40, message="the dead-worker hint")
    assert re.search(r"no progress for \d+ s — is a worker running\?", follower.output())
    processes(runjobs, **env)  # its sweep puts the job back (JOBS_STALE_AFTER=3), then it resumes

    assert follower.wait(timeout=180) == 0, follower.output()
    assert Import.objects.get().status == ImportStatus.DONE
    assert_fits(raw_output(follower), 80)


@pytest.mark.django_db(transaction=True)
def test_an_import_failing_in_the_worker_exits_1_with_the_operators_message(target, processes, tmp_path):
    env = {"MEDIA_ROOT": str(tmp_path / "media")}
    follower = processes(importfile, write_export(tmp_path / "export.csv", rows=10), "--target", target.pk,
                         "--wait", **env)
    imp = wait_for(lambda: Import.objects.first(), timeout=60, message="the import to be queued")
    (tmp_path / "media" / imp.file.name).unlink()  # the stored copy vanishes before a worker reads it
    processes(runjobs, **env)

    assert follower.wait(timeout=60) == 1, follower.output()
    output = follower.output()
    assert f"import {imp.pk} failed: " in output and "ImportRejected" not in output
    assert "Traceback" not in output


@pytest.mark.django_db(transaction=True)
def test_ctrl_c_stops_waiting_with_exit_3_and_the_import_goes_on(target, processes, tmp_path):
    env = {"MEDIA_ROOT": str(tmp_path / "media")}
    follower = processes(importfile, write_export(tmp_path / "export.csv", rows=10), "--target", target.pk,
                         "--wait", **env)
    wait_for(lambda: "waiting for a worker" in follower.output(), timeout=60, message="the follower to wait")
    follower.signal(signal.SIGINT)
    assert follower.wait(timeout=30) == 3, follower.output()
    assert "goes on in the background" in follower.output()
    assert Import.objects.get().status == ImportStatus.QUEUED


def test_no_database_at_all_is_exit_2_nothing_queued(tmp_path):
    nowhere = tmp_path / "no-server"
    nowhere.mkdir()
    export = write_export(tmp_path / "export.csv", rows=3)
    result = subprocess.run([sys.executable, "manage.py", "importfile", str(export), "--target", "1"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60,
                            env=process_env(DATABASE_URL=f"postgres://postgres@{str(nowhere).replace('/', '%2F')}/x"))
    assert result.returncode == 2, result.stderr
    assert "the database is unavailable, nothing was queued" in result.stderr
    assert "Traceback" not in result.stderr
