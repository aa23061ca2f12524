"""No import circles inside an app: within each app the modules' imports form a tree, not a loop.

Beside the layer test (``test_layers``, which orders the apps): inside one app,
two modules that import each other, directly or around a longer loop, only
work by the order Python happens to load them in, and neither can be read
without the other. Every module of each app, sub-packages included, is read
with ``ast``; module-level and function-level imports both count (a late import
inside a function is the usual way to hide a circle, not to remove it).
``from . import x`` is an arrow to the module ``x`` when ``x`` is a module, to
the package otherwise.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.support.source_imports import app_modules, imported_names

ROOT = Path(__file__).resolve().parent.parent

APPS = ("seoinsight", "jobs", "imports", "outbox", "mailpoll", "insight")

Graph = dict[str, dict[str, int]]  # module -> {module it imports: line of the first such import}


class Circle(NamedTuple):
    members: tuple[str, ...]  # every module of the strongly connected group, sorted
    path: tuple[str, ...]  # one shortest loop through the first member: path[0] -> ... -> path[-1] -> path[0]


def _known(name: str, modules) -> str | None:
    """``name`` if it is one of ``modules``, else its longest prefix that is (``import a.b.c`` runs a.b too)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(modules: dict[str, tuple[str, bool]]) -> Graph:
    """The arrows between ``modules`` that stay inside one app (same first name), self-imports left out."""
    graph: Graph = {}
    for module, (source, is_package) in modules.items():
        arrows = graph.setdefault(module, {})
        for line, name in imported_names(module, source, is_package=is_package, known=modules):
            target = _known(name, modules)
            if target and target != module and target.split(".")[0] == module.split(".")[0]:
                arrows.setdefault(target, line)
    return graph


def circles(graph: dict[str, dict[str, int] | set[str]]) -> list[Circle]:
    """Each group of modules tied by a loop of imports (Tarjan's strongly connected components), sorted.

    >>> circles({"a": {"b"}, "b": {"a", "c"}, "c": set()})
    [Circle(members=('a', 'b'), path=('a', 'b'))]
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(Circle(tuple(group), _shortest_loop(graph, group)) for group in groups)


def _shortest_loop(graph, group: list[str]) -> tuple[str, ...]:
    """The shortest loop from ``group[0]`` back to itself inside ``group`` (breadth first)."""
    start, inside = group[0], set(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for succ in sorted(graph.get(node, ())):
                if succ == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return tuple(reversed(path))
                if succ in inside and succ not in came_from:
                    came_from[succ] = node
                    following.append(succ)
        frontier = following
    raise AssertionError(f"no loop through {start}: {group} is not strongly connected")


def describe(circle: Circle, graph: Graph) -> str:
    loop = [*circle.path, circle.path[0]]
    lines = [" -> ".join(loop)]
    lines += [f"  {a}:{graph[a][b]} imports {b}" for a, b in pairwise(loop)]
    if len(circle.members) > len(circle.path):
        lines.append(f"  ({len(circle.members)} modules tied in loops: {', '.join(circle.members)})")
    return "\n".join(lines)


HOW_TO_FIX = ("Give each pair one direction: move what both need into a module below them both, or let the "
              "module above hand it down (a method it attaches, a hook, a parameter). A late import inside a "
              "function is still an arrow.")


def test_no_app_has_an_import_circle():
    graph = import_graph(app_modules(ROOT, APPS))
    assert {"jobs.models", "imports.handlers", "mailpoll.handlers", "outbox", "seoinsight.models"} <= graph.keys()
    assert "jobs.models" in graph["jobs.queue"]  # the parser does see the arrows
    found = circles(graph)
    assert not found, "import circles inside an app:\n" + "\n".join(describe(c, graph) for c in found) + \
        "\n" + HOW_TO_FIX


CIRCLE_CASES = [
    # (graph as module -> the modules it imports, expected circles as (members, path))
    pytest.param({}, [], id="empty"),
    pytest.param({"a": {"b"}, "b": {"c"}, "c": set()}, [], id="chain"),
    pytest.param({"a": {"b", "c"}, "b": {"d"}, "c": {"d"}, "d": set()}, [], id="diamond"),
    pytest.param({"a": {"a"}}, [], id="self-import-is-no-circle"),
    pytest.param({"a": {"b"}, "b": {"a"}}, [(("a", "b"), ("a", "b"))], id="pair"),
    pytest.param({"z": {"m"}, "m": {"z"}}, [(("m", "z"), ("m", "z"))], id="named-from-the-first-member"),
    pytest.param({"x": {"a"}, "a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()},
                 [(("a", "b", "c"), ("a", "b", "c"))], id="loop-of-three-with-tail-and-exit"),
    pytest.param({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}, "e": {"a", "c"}},
                 [(("a", "b"), ("a", "b")), (("c", "d"), ("c", "d"))], id="two-separate-circles"),
    pytest.param({"a": {"b", "c"}, "b": {"a"}, "c": {"d"}, "d": {"a"}},
                 [(("a", "b", "c", "d"), ("a", "b"))], id="figure-eight-is-one-group-shortest-loop-shown"),
    pytest.param({"a": {"b"}, "b": {"c"}, "c": {"d"}, "d": {"b"}},
                 [(("b", "c", "d"), ("b", "c", "d"))], id="loop-not-through-the-entry"),
]


@pytest.mark.parametrize("graph, expected", CIRCLE_CASES)
def test_the_finder_finds_exactly_the_circles(graph, expected):
    assert [tuple(c) for c in circles(graph)] == expected


def module(source: str, is_package: bool = False) -> tuple[str, bool]:
    return source, is_package


GRAPH_CASES = [
    # (the modules, the arrows as {module: {imported: line}})
    pytest.param({"jobs.models": module("def f():\n    from . import queue\n"), "jobs.queue": module("")},
                 {"jobs.models": {"jobs.queue": 2}, "jobs.queue": {}}, id="function-level-relative"),
    pytest.param({"jobs.queue": module("from .models import Job\nimport jobs.models\n"), "jobs.models": module("")},
                 {"jobs.queue": {"jobs.models": 1}, "jobs.models": {}}, id="first-line-kept"),
    pytest.param({"imports.formats": module("from . import csvfile, open_source\n", is_package=True),
                  "imports.formats.csvfile": module("from . import open_source\nfrom .. import ingest\n"),
                  "imports.ingest": module("")},
                 {"imports.formats": {"imports.formats.csvfile": 1},
                  "imports.formats.csvfile": {"imports.formats": 1, "imports.ingest": 2}, "imports.ingest": {}},
                 id="from-package-a-module-or-a-name"),
    pytest.param({"mailpoll.sync.poller": module("import mailpoll.sync.store\nimport mailpoll.nowhere\n"),
                  "mailpoll.sync.store": module(""), "mailpoll": module("", is_package=True)},
                 {"mailpoll.sync.poller": {"mailpoll.sync.store": 1, "mailpoll": 2},
                  "mailpoll.sync.store": {}, "mailpoll": {}}, id="absolute-import-to-the-longest-known-name"),
    pytest.param({"imports.views": module("from jobs.models import Job\nimport os\nfrom . import views\n"),
                  "jobs.models": module("")},
                 {"imports.views": {}, "jobs.models": {}}, id="other-apps-libraries-and-itself-left-out"),
]


@pytest.mark.parametrize("modules, expected", GRAPH_CASES)
def test_the_graph_has_exactly_the_arrows_inside_an_app(modules, expected):
    assert import_graph(modules) == expected


def test_the_message_names_the_loop_each_arrow_line_and_the_whole_group():
    modules = {"jobs.models": module("\nfrom . import queue\nfrom . import finish\n"),
               "jobs.queue": module("from . import models\n"), "jobs.rows": module("from .models import Job\n"),
               "jobs.finish": module("from . import rows\nfrom . import queue\n"), "jobs.sql": module("")}
    graph = import_graph(modules)
    (circle,) = circles(graph)
    assert describe(circle, graph).splitlines() == [
        "jobs.finish -> jobs.queue -> jobs.models -> jobs.finish",
        "  jobs.finish:2 imports jobs.queue",
        "  jobs.queue:1 imports jobs.models",
        "  jobs.models:3 imports jobs.finish",
        "  (4 modules tied in loops: jobs.finish, jobs.models, jobs.queue, jobs.rows)",
    ]
