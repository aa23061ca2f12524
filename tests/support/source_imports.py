"""The project's own modules as source text, and the imports each one makes: what the layer and circle tests read.

Read with ``ast``, never imported: module-level and function-level imports both count (a late import inside a
function is the usual way to hide a wrong arrow or a circle, not to remove it).
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from pathlib import Path


def app_modules(root: Path, apps) -> dict[str, tuple[str, bool]]:
    """Module name -> (source, is_package) for every ``.py`` file of ``apps`` under ``root``."""
    modules = {}
    for app in apps:
        for path in sorted((root / app).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            modules[name] = (path.read_text(encoding="utf-8"), is_package)
    return modules


def imported_names(module: str, source: str, *, is_package: bool = False, known: Collection[str] = ()):
    """``(line, absolute module name)`` for every import statement anywhere in ``source``.

    ``from package import name`` names ``package.name`` where that is one of the ``known`` modules.
    """
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
            modules = {f"{target}.{alias.name}" for alias in node.names} & set(known)
            if len(modules) < len(node.names):
                yield node.lineno, target  # the names it takes are in the same layer as ``target``
            for name in sorted(modules):
                yield node.lineno, name
