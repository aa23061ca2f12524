"""Planner statistics a test can set for one table, inside its transaction (rolled back with it).

A claim statement must take what its LIMIT says under any statistics the planner
may hold; the awkward ones appear by themselves only with autovacuum's timing.
"""

from __future__ import annotations

import pytest
from django.db import connection


def believe_nearly_empty(table: str) -> None:
    """Make the planner estimate one row for ``table`` and its indexes, as after autovacuum saw it empty.

    With that belief it may scan the table as the outer side of a nested loop
    and run the inner side once per row. Needs a superuser (pg_class is written):
    the embedded server's role is one.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        if not cursor.fetchone()[0]:
            pytest.skip("setting planner statistics needs a superuser; DATABASE_URL's role is not one")
        # Pages but no tuples on them: the estimate is one row, however many pages (366 was the case seen).
        cursor.execute("UPDATE pg_class SET reltuples = 0, relpages = 366 WHERE oid = %s::regclass", [table])
        cursor.execute("UPDATE pg_class SET reltuples = 0, relpages = 1 "
                       "WHERE oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = %s::regclass)", [table])


def as_subquery_in_from(claim: str) -> str:
    """``claim`` (``WITH due AS MATERIALIZED (<locking SELECT>) UPDATE … FROM due …``) as it was first written,
    the locking SELECT a subquery in FROM: the form these statistics make the planner run once per outer row."""
    locking_select, update = claim.split("WITH due AS MATERIALIZED (", 1)[1].split("\n)\n", 1)
    return update.replace("FROM due\n", f"FROM ({locking_select}\n) AS due\n")
