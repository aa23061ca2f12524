"""The queue benchmark's peers (bench/peers.py): the rate read from a peer's own columns, and the report's rows.

The peers themselves (procrastinate, django-tasks-db) are the ``bench`` extra, which ``make test`` does not
install: nothing here imports them.
"""

import datetime
import subprocess
import sys

import pytest

from bench import peers
from bench.common import ROOT
from bench.queue import LABELS

T0 = datetime.datetime(2026, 12, 4, 12, 0, tzinfo=datetime.UTC)


def test_the_rate_is_jobs_over_first_start_to_last_finish():
    assert peers.rate("q", 1000, 1000, T0, T0 + datetime.timedelta(seconds=2.5)) == (400.0, 2.5)


@pytest.mark.parametrize(("done", "first", "last", "says"), [
    (999, T0, T0 + datetime.timedelta(seconds=1), "999 of 1000 jobs finished"),
    (1000, None, None, "no time between"),  # nothing started: the drain ran nothing
    (1000, T0, T0, "no time between"),
])
def test_a_drain_that_did_not_finish_every_job_raises(done, first, last, says):
    with pytest.raises(RuntimeError, match=says):
        peers.rate("q", 1000, done, first, last)


def test_each_peer_is_judged_by_a_raw_loop_of_the_same_run():
    assert {peer.base for peer in peers.PEERS} <= set(LABELS)
    assert len({peer.key for peer in peers.PEERS} | set(LABELS)) == len(peers.PEERS) + len(LABELS)


def row(label, value, ratio="", goal=""):
    return f"{label}|{value}|{ratio}|{goal}"


def test_the_report_has_no_peer_rows_when_they_did_not_run():
    assert peers.header(None) == []
    assert peers.drain_rows(None, 1, "1 process", row, str, lambda key: 1.0) == []
    assert peers.other_rows(None, row, str, 1.0, 1.0, lambda values, q: 0.0) == []
    assert peers.round_lines(None, str) == []


def test_a_peer_drain_row_gives_the_median_and_its_ratio_to_its_raw_loop():
    results = {"versions": {"procrastinate": "3.10.0"}, "enqueue": {}, "latency": {},
               "drains": {("procrastinate_8", 2): [{"rate": 300.0}, {"rate": 100.0}, {"rate": 200.0}]}}
    bases = {"minimal_10": 1000.0}
    assert peers.drain_rows(results, 2, "2 processes", row, str, bases.__getitem__) == [
        "procrastinate --concurrency 8, 2 processes|200.0|0.20x 10|"]
    assert peers.drain_rows(results, 1, "1 process", row, str, bases.__getitem__) == []


def test_without_the_peers_installed_the_benchmark_says_how_to_get_them_and_runs_without(monkeypatch, capsys):
    monkeypatch.setattr(peers, "find_spec", lambda name: None)
    assert peers.prepare({}, "unused", "postgres://unused") is None  # touches no database
    assert capsys.readouterr().out == peers.INSTALL_HINT + "\n"


def test_the_peers_enqueue_timer_starts_without_the_peers_installed():
    result = subprocess.run([sys.executable, "-m", "bench.peers", "--help"], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: ")
