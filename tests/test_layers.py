"""Imports point downward only: seoinsight <- jobs <- imports <- outbox <- mailpoll <- insight.

The core (``seoinsight``) knows no app; the job queue (``jobs``) knows the core
only; ``imports`` may use the queue and the core; ``outbox`` (the downstream delivery of
accepted documents) those three; ``mailpoll`` all four; ``insight`` (what comes out: the site
page, the portfolio, alerts) every one of them.
Every ``import`` in every module of the six packages is read with ``ast``,
function-level imports and migrations included, so a late import inside a
function (the usual way to hide a wrong arrow) is caught too.

Inside ``mailpoll`` the same holds between its rooms (``MAILPOLL_ROOMS``): its sub-packages and the two
kinds of module at its top, the base they share and the wiring that puts the app together.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest

from tests.support.source_imports import app_modules, imported_names

ROOT = Path(__file__).resolve().parent.parent

# Lowest first: a package may import from those before it, never from those after it.
LAYERS = ("seoinsight", "jobs", "imports", "outbox", "mailpoll", "insight")

# Modules that exist to wire the apps together and must import them to do it, each with the reason.
# None today: seoinsight/settings.py, urls.py and wsgi.py name the apps in dotted strings only
# (INSTALLED_APPS, MIDDLEWARE, include("jobs.urls")), which this test does not read.
WIRING: dict[str, str] = {}

# mailpoll's rooms, lowest first: a module may import from its own room and those before it, never after.
MAILPOLL_ROOMS = ("message", "base", "routing", "oauth", "providers", "sync", "admin", "wiring")
# The top-level modules the sub-packages share; every other top-level module or package of mailpoll (apps,
# checks, grant_checks, handlers, metrics, management, migrations) is "wiring", above all of them.
MAILPOLL_BASE = frozenset({"conf", "cursor", "models", "attachments", "post_actions", "health"})


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


class WrongRoom(NamedTuple):
    module: str
    line: int
    imported: str

    def __str__(self) -> str:
        lower, upper = room_of(self.module), room_of(self.imported)
        return (f"{self.module}:{self.line} imports {self.imported}: mailpoll's {lower} -> {upper} points upward "
                f"({' <- '.join(MAILPOLL_ROOMS)}). Move what both need down to {lower} or below (as the Mailbox "
                f"fields a grant is bound to went to mailpoll.models), or let {upper} hand it to {lower} (as "
                f"providers.graph_mailbox sets oauth's msal refresh).")


def room_of(module: str) -> str | None:
    """The room of a module of mailpoll (None outside it): its sub-package, or the base or the wiring at its top."""
    parts = module.split(".")
    if parts[0] != "mailpoll":
        return None
    if len(parts) == 1 or parts[1] in MAILPOLL_BASE:
        return "base"
    return parts[1] if parts[1] in MAILPOLL_ROOMS else "wiring"


def wrong_rooms(modules: dict[str, tuple[str, bool]]) -> list[WrongRoom]:
    """The imports of mailpoll's ``modules`` that point from one of its rooms to one above it."""
    found = []
    for module, (source, is_package) in sorted(modules.items()):
        if room_of(module) is None:
            continue
        rank = MAILPOLL_ROOMS.index(room_of(module))
        for line, imported in imported_names(module, source, is_package=is_package, known=modules):
            upper = room_of(imported)
            if upper is not None and MAILPOLL_ROOMS.index(upper) > rank:
                found.append(WrongRoom(module, line, imported))
    return found


def test_no_module_imports_from_a_layer_above_its_own():
    modules = app_modules(ROOT, LAYERS)
    assert {"seoinsight.admin", "jobs.sql", "imports.forms", "mailpoll.handlers"} <= modules.keys()
    assert any(".migrations." in name for name in modules)
    wrong = wrong_arrows(modules)
    assert not wrong, "imports point the wrong way:\n" + "\n".join(map(str, wrong))


def test_no_room_of_mailpoll_imports_from_one_above_its_own():
    modules = app_modules(ROOT, LAYERS)
    rooms = {room_of(name) for name in modules if name.startswith("mailpoll")}
    assert rooms == set(MAILPOLL_ROOMS), "every room exists, and every sub-package of mailpoll is a room"
    assert {f"mailpoll.{name}" for name in MAILPOLL_BASE} <= modules.keys()
    wrong = wrong_rooms(modules)
    assert not wrong, "mailpoll imports point the wrong way:\n" + "\n".join(map(str, wrong))


def test_every_wiring_exemption_names_a_module_that_exists():
    assert set(WIRING) <= app_modules(ROOT, LAYERS).keys()


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


ROOM_CASES = [
    # (the modules, the wrong arrows as (module, line, imported))
    pytest.param({"mailpoll.providers.base": module("from ..sync.cursor import FolderStatus\n")},
                 [("mailpoll.providers.base", 1, "mailpoll.sync.cursor")], id="providers-from-sync"),
    pytest.param({"mailpoll.oauth.apps": module("def refresh():\n    from ..providers.graph_auth import GraphApp\n")},
                 [("mailpoll.oauth.apps", 2, "mailpoll.providers.graph_auth")], id="function-level-import"),
    pytest.param({"mailpoll.models": module("from .sync import cursor\n"), "mailpoll.sync.cursor": module("")},
                 [("mailpoll.models", 1, "mailpoll.sync.cursor")], id="base-from-a-module-of-a-sub-package"),
    pytest.param({"mailpoll.sync.store": module("from .. import checks, conf\n"), "mailpoll.checks": module(""),
                  "mailpoll.conf": module("")},
                 [("mailpoll.sync.store", 1, "mailpoll.checks")], id="a-wiring-module-named-from-the-package"),
    pytest.param({"mailpoll.message.parse": module("from . import headers\nfrom .text import safe_filename\n")},
                 [], id="within-its-room"),
    pytest.param({"mailpoll.sync.poller": module("from .. import conf\nfrom ..oauth.tokens import x\n"
                                                 "from ..providers import for_mailbox\nfrom jobs import queue\n")},
                 [], id="downward-is-fine"),
    pytest.param({"mailpoll.checks": module("from .oauth.apps import credentials_problem\n")}, [],
                 id="wiring-above-all"),
    pytest.param({"outbox.entries": module("from mailpoll.sync import store\n")}, [], id="outside-mailpoll"),
]


@pytest.mark.parametrize("modules, expected", ROOM_CASES)
def test_the_checker_finds_exactly_the_upward_arrows_between_mailpolls_rooms(modules, expected):
    assert [tuple(arrow) for arrow in wrong_rooms(modules)] == expected


def test_the_room_message_names_the_arrow_and_says_how_to_fix_it():
    (arrow,) = wrong_rooms({"mailpoll.oauth.connect": module("from ..admin.forms import APP_FIELDS\n")})
    message = str(arrow)
    assert message.startswith("mailpoll.oauth.connect:1 imports mailpoll.admin.forms: mailpoll's oauth -> admin")
    assert "Move what both need down to oauth or below" in message
