"""Every CSV a user downloads is written by ``seoinsight.csvexport``, the one writer that neutralises formulas.

Every module of the five packages is read with ``ast``: a ``csv.writer`` or ``csv.DictWriter`` (however
imported), or a response with ``content_type`` ``text/csv`` built by hand, anywhere but in ``seoinsight/csvexport.py``, is an
export that would write imported texts as a spreadsheet runs them. (bench/ and tests/ write their own files.)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.source_imports import app_modules
from tests.test_layers import LAYERS

ROOT = Path(__file__).resolve().parent.parent
THE_WRITER = "seoinsight.csvexport"
WRITERS = {"writer", "DictWriter"}


def own_csv_writers(modules: dict[str, tuple[str, bool]]) -> list[str]:
    """``module:line what`` for each CSV writer or CSV response made outside ``THE_WRITER``."""
    found = []
    for name, (source, _) in sorted(modules.items()):
        if name == THE_WRITER:
            continue
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Attribute) and node.attr in WRITERS and isinstance(node.value, ast.Name) \
                    and node.value.id == "csv":
                found.append(f"{name}:{node.lineno} csv.{node.attr}")
            elif isinstance(node, ast.ImportFrom) and node.module == "csv":
                found += [f"{name}:{node.lineno} from csv import {a.name}" for a in node.names if a.name in WRITERS]
            elif isinstance(node, ast.keyword) and node.arg == "content_type" and _names_csv(node.value):
                found.append(f"{name}:{node.value.lineno} a text/csv response")
    return found


def _names_csv(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and "text/csv" in node.value


def test_no_module_but_the_shared_writer_writes_csv():
    found = own_csv_writers(app_modules(ROOT, LAYERS))
    assert found == [], (
        f"{', '.join(found)}: write CSV for users with seoinsight.csvexport (csvexport.download(filename) gives "
        "the response and its writer), which keeps imported texts from running as formulas in a spreadsheet.")


@pytest.mark.parametrize(("source", "expected"), [
    ("import csv\nw = csv.writer(f)\n", ["m:2 csv.writer"]),
    ("import csv\nw = csv.DictWriter(f, fieldnames=[])\n", ["m:2 csv.DictWriter"]),
    ("from csv import writer as w\n", ["m:1 from csv import writer"]),
    ("r = HttpResponse(content_type='text/csv')\n", ["m:1 a text/csv response"]),
    ("import csv\nrows = csv.reader(f)\n", []),  # reading an upload is no export
    ("CSV_MIMES = {'text/csv', 'text/x-csv'}\n", []),  # nor recognising one
])
def test_the_checker_finds_each_way_of_writing_csv(source, expected):
    assert own_csv_writers({"m": (source, False), THE_WRITER: ("import csv\ncsv.writer(f)\n", False)}) == expected
