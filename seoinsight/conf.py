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

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

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

    def unparsable(self) -> list[tuple[str, str, Exception]]:
        """(name, raw text, error) for every environment value its declared type cannot read."""
        found = []
        for setting in self:
            for each in (setting.name, *setting.old_names):
                raw = os.environ.get(each)
                if raw is None:
                    continue
                try:
                    parse(raw, setting.type)
                except (TypeError, ValueError) as exc:
                    found.append((each, raw, exc))
        return found


def parse(raw: str, kind: type):
    """An environment text read as ``kind`` (bool: 1/0, true/false, yes/no...; list: comma-separated)."""
    return environ.Env.parse_value(raw, kind)
