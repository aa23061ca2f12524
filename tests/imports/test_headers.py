from pathlib import Path

import pytest

from imports.formats.headers import ALIASES, describe_missing, field_for, fold, map_columns

DOCS = Path(__file__).resolve().parents[2] / "docs" / "imports.md"


@pytest.mark.parametrize(
    ("header", "field"),
    [
        ("Top pages", "url"),
        ("TOP PAGES", "url"),
        ("  top\u00a0 pages ", "url"),
        ("Pages les plus populaires", "url"),
        ("pages les plus populaires", "url"),
        ("Landing Page", "url"),
        ("landing-page", "url"),
        ("Address", "url"),
        ("URL", "url"),
        ("Clics", "clicks"),
        ("CLICKS", "clicks"),
        ("Impressions", "impressions"),
        ("ctr", "ctr"),
        ("Avg. position", "position"),
        ("avg position", "position"),
        ("Avg.position", "position"),
        ("Average position", "position"),
        ("Position moyenne", "position"),
        ("Date", "date"),
        ("Jour", "date"),
        ("Top queries", None),
        ("Requêtes les plus fréquentes", None),
        ("Clicks (previous period)", None),
        ("", None),
    ],
)
def test_field_for(header, field):
    assert field_for(header) == field


def test_accents_do_not_matter():
    assert fold("Requêtes") == fold("REQUETES") == "requetes"


def test_leftmost_column_wins():
    assert map_columns(("Page", "URL", "Clics", "Clicks")) == {"url": 0, "clicks": 2}


def test_missing_message_is_clipped():
    headers = tuple(f"Column {i}" for i in range(30)) + ("x" * 100,)
    message = describe_missing("url", headers)
    assert message.startswith("no URL column: found headers 'Column 0', 'Column 1',")
    assert "'Column 19', …; expected one of: Top pages" in message


def test_docs_list_every_alias():
    text = DOCS.read_text()
    missing = [alias for aliases in ALIASES.values() for alias in aliases if f"`{alias}`" not in text]
    assert not missing, f"docs/imports.md does not list {missing}: add them to its header table"
