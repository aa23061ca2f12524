"""Imports point downward only: seoinsight <- jobs <- imports <- outbox <- mailpoll.

The core (``seoinsight``) knows no app; the job queue (``jobs``) knows the core
only; ``imports`` may use the queue and the core; ``outbox`` (the downstream delivery of
accepted documents) those three; ``mailpoll`` all four.
Every ``import`` in every module of the five packages is read with ``ast``,
function-level imports and migrations included, so a late import inside a
function (the usual way to hide a wrong arrow) is caught too.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Lowest first: a package may import from those before it, never from those after it.
LAYERS = ("seoinsight", "jobs", "imports", "outbox", "mailpoll")

# Modules that exist to wire the apps together and must import them to do it, each with the reason.
# None today: seoinsight/settings.py, urls.py and wsgi.py name the apps in dotted strings only
# (INSTALLED_APPS, MIDDLEWARE, include("jobs.urls")), which this test does not read.
WIRING: dict[str, str] = {}


class WrongArrow(NamedTuple):
    module: str
    line: int
    imported: str

    def __str__(self) -> str:
        lower, upper = layer_of(self.module), layer_of(self.imported)
        return (f"{self.module}:{self.line} imports {self.imported}: {lower} -> {upper} points upward "
                f"({' <- '.join(LAYERS)}). Move the code that needs {upper} into {upper} (an admin action "
                f"registered by {upper}, a hook {upper} sets on {lower}), or move what it needs down into "
                f"{lower}.")


def layer_of(module: str) -> str | None:
    top = module.split(".", 1)[0]
    return top if top in LAYERS else None


def imported_names(module: str, source: str, *, is_package: bool = False):
    """``(line, absolute module name)`` for every import statement anywhere in ``source``."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module
            yield node.lineno, target  # the names it takes are in the same layer as ``target``


def wrong_arrows(modules: dict[str, tuple[str, bool]], wiring=WIRING) -> list[WrongArrow]:
    """The imports of ``modules`` (name -> (source, is_package)) that point from a layer to one above it."""
    found = []
    for module, (source, is_package) in sorted(modules.items()):
        if module in wiring or layer_of(module) is None:
            continue
        rank = LAYERS.index(layer_of(module))
        for line, imported in imported_names(module, source, is_package=is_package):
            upper = layer_of(imported)
            if upper is not None and LAYERS.index(upper) > rank:
                found.append(WrongArrow(module, line, imported))
    return found


def project_modules() -> dict[str, tuple[str, bool]]:
    modules = {}
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            modules[name] = (path.read_text(encoding="utf-8"), is_package)
    return modules


def test_no_module_imports_from_a_layer_above_its_own():
    modules = project_modules()
    assert {"seoinsight.admin", "jobs.sql", "imports.forms", "mailpoll.handlers"} <= modules.keys()
    assert any(".migrations." in name for name in modules)
    wrong = wrong_arrows(modules)
    assert not wrong, "imports point the wrong way:\n" + "\n".join(map(str, wrong))


def test_every_wiring_exemption_names_a_module_that_exists():
    assert set(WIRING) <= project_modules().keys()


def module(source: str, is_package: bool = False) -> tuple[str, bool]:
    return source, is_package


CASES = [
    # (the modules, the wrong arrows as (module, line, imported))
    pytest.param({"seoinsight.admin": module("from imports.models import Import\n")},
                 [("seoinsight.admin", 1, "imports.models")], id="core-from-imports"),
    pytest.param({"jobs.worker": module("import os\nimport mailpoll.poller\n")},
                 [("jobs.worker", 2, "mailpoll.poller")], id="plain-import"),
    pytest.param({"imports.views": module("def pull():\n    from mailpoll import handlers\n")},
                 [("imports.views", 2, "mailpoll")], id="function-level-import"),
    pytest.param({"jobs.migrations.0002_x": module("from django.db import migrations\nimport imports.models\n")},
                 [("jobs.migrations.0002_x", 2, "imports.models")], id="migration"),
    pytest.param({"mailpoll.handlers": module("from imports.services import create_import\nfrom jobs import sql\n"
                                              "from seoinsight import storage\n")},
                 [], id="downward-is-fine"),
    pytest.param({"imports.formats.csvfile": module("from .. import ingest\nfrom . import text\n")},
                 [], id="relative-within-its-layer"),
    pytest.param({"imports.formats": module("from . import ole\nfrom .. import models\n", is_package=True)},
                 [], id="relative-from-a-package"),
    pytest.param({"seoinsight.models": module("from django.db import models\nimport jobsearch\n")},
                 [], id="a-name-that-only-starts-like-a-layer"),
    pytest.param({"tests.factories": module("import mailpoll.models\n")}, [], id="outside-the-layers"),
]


@pytest.mark.parametrize("modules, expected", CASES)
def test_the_checker_finds_exactly_the_upward_arrows(modules, expected):
    assert [tuple(arrow) for arrow in wrong_arrows(modules)] == expected


def test_a_wiring_exemption_covers_the_named_module_only():
    modules = {"seoinsight.settings": module("import mailpoll.conf\n"),
               "seoinsight.checks": module("import mailpoll.conf\n")}
    wiring = {"seoinsight.settings": "lists the apps"}
    assert [tuple(arrow) for arrow in wrong_arrows(modules, wiring)] == [("seoinsight.checks", 1, "mailpoll.conf")]


def test_the_message_names_the_module_line_and_arrow_and_says_how_to_fix_it():
    (arrow,) = wrong_arrows({"seoinsight.admin": module("\n\nfrom imports.searchconsole_api import x\n")})
    message = str(arrow)
    assert message.startswith("seoinsight.admin:3 imports imports.searchconsole_api: seoinsight -> imports")
    assert "Move the code that needs imports into imports" in message
