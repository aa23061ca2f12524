"""Declaring an app's settings once: name, type, default and one line of meaning.

Each app lists its settings in its own ``conf.py`` (``jobs.conf``, ``imports.conf``,
``mailpoll.conf``) and reads them with that module's ``get(name)``. A value comes from
``django.conf.settings`` when set there (a deployment's own settings module, a test's
``settings`` fixture), else from the environment parsed by the declared type
(django-environ), else the declared default. Nothing is read at import, so
``seoinsight.settings`` never lists these settings.

This module is the ground floor: it knows no app.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import environ
from django.conf import settings
from django.core import checks


@dataclass(frozen=True)
class Setting:
    name: str
    type: type
    default: object
    meaning: str
    # Former names, still read when the current one is unset; the app's system check asks to rename them.
    old_names: tuple[str, ...] = ()


class Declarations:
    """The settings of one app, each declared once; ``get`` is the only way they are read."""

    def __init__(self, *declared: Setting):
        self._by_name: dict[str, Setting] = {}
        for setting in declared:
            if setting.name in self._by_name:
                raise ValueError(f"{setting.name} is declared twice")
            self._by_name[setting.name] = setting

    def __iter__(self) -> Iterator[Setting]:
        return iter(self._by_name.values())

    def defaults(self) -> dict:
        return {setting.name: setting.default for setting in self}

    def get(self, name: str):
        """The value of a declared setting; an undeclared name is a KeyError, not a silent default."""
        setting = self._by_name[name]
        names = (setting.name, *setting.old_names)
        for each in names:
            if hasattr(settings, each):
                return getattr(settings, each)
        for each in names:
            raw = os.environ.get(each)
            if raw is not None:
                return parse(raw, setting.type)
        return setting.default

    def old_names_in_use(self) -> list[tuple[str, str]]:
        """(old, current) for every former name still set in django settings or the environment."""
        return [
            (old, setting.name)
            for setting in self
            for old in setting.old_names
            if hasattr(settings, old) or old in os.environ
        ]

    def unparsable(self) -> list[tuple[str, str, Setting]]:
        """(variable, its text, its Setting) for every environment value its declared type cannot read."""
        found = []
        for setting in self:
            for each in (setting.name, *setting.old_names):
                raw = os.environ.get(each)
                if raw is None:
                    continue
                try:
                    parse(raw, setting.type)
                except (TypeError, ValueError):
                    found.append((each, raw, setting))
        return found

    # The checks every app runs on its own settings, under its own ids.

    def environment_errors(self, check_id: str) -> list[checks.Error]:
        """An environment text the declared type cannot read: ``get`` would raise in the middle of work."""
        return [
            checks.Error(f"{variable} is {raw!r} in the environment; it must be {_KINDS[setting.type]}.",
                         hint=f"{setting.name}: {setting.meaning}.", id=check_id)
            for variable, raw, setting in self.unparsable()
        ]

    def not_positive_errors(self, names, check_id: str) -> list[checks.Error]:
        """Each of ``names`` that is not above zero (call only once ``environment_errors`` found none)."""
        return [
            checks.Error(f"{name} is {self.get(name)!r}; it must be above zero.",
                         hint=f"{name}: {self._by_name[name].meaning}.", id=check_id)
            for name in names
            if not isinstance(self.get(name), (int, float)) or self.get(name) <= 0
        ]

    def former_name_warnings(self, check_id: str) -> list[checks.Warning]:
        return [
            checks.Warning(f"{old} is the former name of {current}; it is still read, for now.",
                           hint=f"Rename {old} to {current} (environment or settings).", id=check_id)
            for old, current in self.old_names_in_use()
        ]


_KINDS = {int: "a whole number", float: "a number", bool: "1 or 0 (true/false, yes/no)",
          list: "a comma-separated list", str: "text"}


def parse(raw: str, kind: type):
    """An environment text read as ``kind`` (bool: 1/0, true/false, yes/no...; list: comma-separated)."""
    return environ.Env.parse_value(raw, kind)


# The core's own settings (each app declares its own in its conf.py).
SETTINGS = Declarations(
    Setting("QUERY_MAX_PERIOD_DAYS", int, 500,
            "the most days a period chosen in a page's address may span (the site page's custom period): "
            "16 months, what Search Console keeps, fit"),
)
get = SETTINGS.get
