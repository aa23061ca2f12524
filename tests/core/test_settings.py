"""Settings declare and start nothing; each app setting is declared once, read through its conf, documented once."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from imports import conf as imports_conf
from insight import conf as insight_conf
from jobs import conf as jobs_conf
from mailpoll import conf as mailpoll_conf
from outbox import conf as outbox_conf
from seoinsight import conf as core_conf
from seoinsight.conf import Declarations, Setting
from tests.support.processes import ROOT

APP_SETTINGS = [*core_conf.SETTINGS, *jobs_conf.SETTINGS, *imports_conf.SETTINGS, *outbox_conf.SETTINGS,
                *mailpoll_conf.SETTINGS, *insight_conf.SETTINGS]

# A pgserver that refuses to be used: whatever imports it is starting or attaching to the embedded server.
FAKE_PGSERVER = '''
import os, pathlib
pathlib.Path(os.environ["PGSERVER_TOUCHED"]).write_text("imported")
raise RuntimeError("pgserver imported: something started the embedded server")
'''


def manage(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


def without_database_url(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(extra)
    return env


@pytest.mark.parametrize("args", [
    ["help"],
    ["check"],
    ["shell", "-c", "import seoinsight.settings"],
])
def test_settings_and_commands_without_a_database_start_no_server(args, tmp_path):
    (tmp_path / "pgserver").mkdir()
    (tmp_path / "pgserver" / "__init__.py").write_text(FAKE_PGSERVER)
    touched = tmp_path / "touched"
    env = without_database_url(PYTHONPATH=str(tmp_path), PGSERVER_TOUCHED=str(touched))

    result = manage(*args, env=env)

    assert result.returncode == 0, result.stderr
    assert not touched.exists(), result.stderr


@pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="this run's database is not the embedded one")
def test_the_first_connection_attaches_the_embedded_server_and_names_its_socket():
    code = (
        "from django.db import connection\n"
        "print(connection.vendor, repr(connection.settings_dict['HOST']))\n"
        "with connection.cursor() as cursor:\n"
        "    cursor.execute('SELECT current_database()')\n"
        "    print(cursor.fetchone()[0], connection.settings_dict['PORT'], connection.settings_dict['HOST'])\n"
    )
    result = manage("shell", "-c", code, env=without_database_url())

    assert result.returncode == 0, result.stderr
    *_, before, after = result.stdout.strip().splitlines()  # after what shell says it imported
    assert before == "postgresql ''"  # nothing attached yet
    database, port, host = after.split(" ", 2)
    assert database == "seoinsight"
    assert (Path(host) / f".s.PGSQL.{port}").is_socket()  # the embedded server listens on a Unix socket only


@pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="this run's database is not the embedded one")
@pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")
def test_dbshell_finds_the_embedded_server_before_any_connection():
    result = manage("dbshell", "--", "-At", "-c", "SELECT current_database()", env=without_database_url())
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "seoinsight"


# -- reading a declared setting ---------------------------------------------------------------

LIMIT = Setting("SEOINSIGHT_TEST_LIMIT", int, 5, "a limit for this test", old_names=("SEOINSIGHT_TEST_OLD_LIMIT",))


@pytest.mark.parametrize(("django", "environment", "expected"), [
    ({}, {}, 5),
    ({}, {"SEOINSIGHT_TEST_LIMIT": "7"}, 7),
    ({}, {"SEOINSIGHT_TEST_OLD_LIMIT": "8"}, 8),
    ({}, {"SEOINSIGHT_TEST_LIMIT": "7", "SEOINSIGHT_TEST_OLD_LIMIT": "8"}, 7),
    ({"SEOINSIGHT_TEST_LIMIT": 9}, {"SEOINSIGHT_TEST_LIMIT": "7"}, 9),
    ({"SEOINSIGHT_TEST_OLD_LIMIT": 10}, {"SEOINSIGHT_TEST_LIMIT": "7"}, 10),
])
def test_a_value_comes_from_django_settings_then_the_environment_then_the_default(
        django, environment, expected, settings, monkeypatch):
    for name, value in django.items():
        setattr(settings, name, value)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert Declarations(LIMIT).get("SEOINSIGHT_TEST_LIMIT") == expected


@pytest.mark.parametrize(("kind", "text", "expected"), [
    (int, "25", 25),
    (float, "1.5", 1.5),
    (bool, "0", False),
    (bool, "true", True),
    (list, "a,b", ["a", "b"]),
    (str, "mdy", "mdy"),
])
def test_the_environment_is_read_by_the_declared_type(kind, text, expected, monkeypatch):
    monkeypatch.setenv("SEOINSIGHT_TEST_VALUE", text)
    assert Declarations(Setting("SEOINSIGHT_TEST_VALUE", kind, None, "test")).get("SEOINSIGHT_TEST_VALUE") == expected


def test_an_undeclared_name_is_an_error_and_a_name_is_declared_once():
    with pytest.raises(KeyError):
        Declarations(LIMIT).get("SEOINSIGHT_TEST_OTHER")
    with pytest.raises(ValueError, match="declared twice"):
        Declarations(LIMIT, Setting("SEOINSIGHT_TEST_LIMIT", int, 6, "again"))


def test_former_names_in_use_and_unreadable_texts_are_found(settings, monkeypatch):
    declared = Declarations(LIMIT)
    assert declared.old_names_in_use() == [] and declared.unparsable() == []
    settings.SEOINSIGHT_TEST_OLD_LIMIT = 3
    monkeypatch.setenv("SEOINSIGHT_TEST_LIMIT", "many")
    assert declared.old_names_in_use() == [("SEOINSIGHT_TEST_OLD_LIMIT", "SEOINSIGHT_TEST_LIMIT")]
    assert declared.unparsable() == [("SEOINSIGHT_TEST_LIMIT", "many", LIMIT)]


def test_no_app_setting_is_left_in_django_settings():
    """Declared in the app's conf.py only: a second default in settings.py would win over it, silently."""
    from django.conf import settings

    assert [s.name for s in APP_SETTINGS if hasattr(settings, s.name)] == []


def test_each_app_setting_is_declared_in_one_app_only():
    names = [s.name for s in APP_SETTINGS]
    assert len(names) == len(set(names))


# -- the README's Environment table -------------------------------------------------------------

def environment_table() -> list[tuple[list[str], str]]:
    """(variable names, default cell) of each row of the README's Environment table."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Environment\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if line.startswith("| `"):
            cells = [cell.strip() for cell in line.strip("|").split(" | ")]
            rows.append((re.findall(r"`([A-Z][A-Z0-9_]*)`", cells[0]), cells[1]))
    return rows


def shown(default) -> str | None:
    """A declared default as the README writes it; None for an empty one (written —)."""
    if isinstance(default, bool):
        return "1" if default else "0"
    if isinstance(default, list):
        return ",".join(default) or None
    if isinstance(default, float):
        return f"{default:g}"
    return str(default) or None


def django_level_names() -> set[str]:
    """The variables seoinsight/settings.py reads from the environment itself."""
    return set(re.findall(r'env(?:\.\w+)?\(\s*"([A-Z][A-Z0-9_]*)"', (ROOT / "seoinsight" / "settings.py").read_text()))


def test_every_declared_setting_is_in_the_readme_once_with_its_default():
    rows = environment_table()
    listed = [name for names, _ in rows for name in names]
    for setting in APP_SETTINGS:
        assert listed.count(setting.name) == 1, f"{setting.name} is listed {listed.count(setting.name)} times"
        (cell,) = [cell for names, cell in rows if setting.name in names]
        expected = shown(setting.default)
        if expected is None:
            assert cell == "—", f"{setting.name}: the README says {cell}, the declaration no default"
        else:
            assert cell.startswith(f"`{expected}`"), f"{setting.name}: the README says {cell}, declared {expected}"


def test_the_readme_lists_nothing_that_is_not_read_and_everything_that_is():
    listed = {name for names, _ in environment_table() for name in names}
    read = {s.name for s in APP_SETTINGS} | django_level_names()
    assert listed - read == set(), "listed in the README, read nowhere"
    assert read - listed == set(), "read, missing from the README's Environment table"
