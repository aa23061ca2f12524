"""The tables written once per imported row or per job carry no index that another one already serves.

Each index costs every insert an entry (and, on ``jobs``, every claim and finish: none is a HOT update).
An index whose columns, in the same operator classes, begin another index serves nothing the longer one
does not, the way Django's single-column index on a foreign key does beside a composite that starts with
it (imports migration 0009). ``tests/jobs/test_lean_path.py`` names the reader of each index of ``jobs``.
"""

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db

HOT_TABLES = ["imports_urlmetric", "imports_dimensionmetric", "jobs"]

# Plain btree indexes (no predicate, no expression, not unique) whose key columns and operator classes are
# the leading ones of another plain btree index of the same table.
SERVED_BY_ANOTHER = """
WITH keyed AS (
    SELECT i.indrelid::regclass::text AS tbl, i.indexrelid::regclass::text AS name, i.indisunique AS is_unique,
           i.indpred IS NULL AND i.indexprs IS NULL AS plain, am.amname,
           (SELECT array_agg(ARRAY[k, c] ORDER BY n)
            FROM unnest(i.indkey::int2[], i.indclass::oid[]::int8[]) WITH ORDINALITY AS u(k, c, n)
            WHERE n <= i.indnkeyatts) AS keys
    FROM pg_index AS i
    JOIN pg_class AS ic ON ic.oid = i.indexrelid
    JOIN pg_am AS am ON am.oid = ic.relam
    WHERE i.indrelid = ANY(%s::regclass[])
)
SELECT short.tbl, short.name, long.name
FROM keyed AS short JOIN keyed AS long ON long.tbl = short.tbl AND long.name <> short.name
WHERE NOT short.is_unique AND short.plain AND long.plain AND short.amname = 'btree' AND long.amname = 'btree'
  AND array_length(short.keys, 1) <= array_length(long.keys, 1)
  AND long.keys[1:array_length(short.keys, 1)] = short.keys
ORDER BY 1, 2
"""


def test_no_index_of_a_hot_table_begins_another():
    with connection.cursor() as cursor:
        cursor.execute(SERVED_BY_ANOTHER, [HOT_TABLES])
        served = cursor.fetchall()
    assert served == [], "indexes another index serves (table, index, served by): " + repr(served)


def test_the_check_finds_an_index_that_begins_another():
    """The query above can fail: a single-column index beside the natural key is reported."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE INDEX redundant_for_the_test ON imports_urlmetric (site_target_id)")
        cursor.execute(SERVED_BY_ANOTHER, [HOT_TABLES])
        served = cursor.fetchall()
    assert ("imports_urlmetric", "redundant_for_the_test", "urlmetric_natural_key") in served
