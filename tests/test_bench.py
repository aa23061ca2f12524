"""The benchmarks still start, and the mail profile's groups still name code that exists.

The benchmarks themselves are not run here (minutes, figures, not tests): see
docs/benchmarks.md for their quick modes.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from bench.mail_profile import GROUPS

ROOT = Path(__file__).resolve().parent.parent

# What time_groups reads beside GROUPS: the whole poll's cumulative time.
PROFILED = sorted({(suffix, function) for _group, suffix, function, _caller in GROUPS}
                  | {("mailpoll/sync/poller.py", "poll")})


@pytest.mark.parametrize("module", ["bench.queue", "bench.imports", "bench.mail", "bench.mail_api",
                                    "bench.concurrency", "bench.schema_cost", "bench.queue_profile",
                                    "bench.enqueue_paths", "bench.hostile"])
def test_a_benchmark_starts_as_a_module_of_the_package(module):
    result = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: ")


@pytest.mark.parametrize(("suffix", "function"), PROFILED)
def test_a_profile_group_names_a_function_of_that_file(suffix, function):
    """cProfile files functions by path and name: one moved or renamed would drop out of the report unseen."""
    path = ROOT / suffix
    defined = set()
    if path.exists():
        defined = {node.name for node in ast.walk(ast.parse(path.read_text()))
                   if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
    assert function in defined, (f"{suffix} defines no {function}(): point bench/mail_profile.py's GROUPS "
                                 f"(or time_groups' total) at where it lives now")
