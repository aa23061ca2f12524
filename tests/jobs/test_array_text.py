"""rows.array_text: a list as the text of a PostgreSQL array, read back by the server as the same list."""

import uuid

import pytest
from django.db import connection

from jobs import rows

ODD = ["", "a", 'say "hi"', "back\\slash", "\\\"", "NULL", "null", "{x,y}", " padded ", "comma,inside", "é ü 中",
       "line\nbreak", "tab\there", "'single'", '{"json": [1, "two"]}']


@pytest.mark.parametrize("values, text", [
    ([], "{}"),
    (["a"], '{"a"}'),
    ([None], "{NULL}"),
    (["NULL"], '{"NULL"}'),
    (['a"b'], '{"a\\"b"}'),
    (["a\\b"], '{"a\\\\b"}'),
    (["x", None, "y"], '{"x",NULL,"y"}'),
])
def test_the_text(values, text):
    assert rows.array_text(values) == text


@pytest.mark.django_db
@pytest.mark.parametrize("values", [[], ODD, [None, *ODD, None], [None]])
def test_the_server_reads_back_the_same_list(values):
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::text[]", [rows.array_text(values)])
        assert cursor.fetchone()[0] == values


@pytest.mark.django_db
def test_ids_and_numbers_read_as_their_types():
    ids = [uuid.uuid4() for _ in range(3)]
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::uuid[], %s::int[]", [rows.array_text(i.hex for i in ids),
                                                          rows.array_text(str(n) for n in (1, -2, 30))])
        assert cursor.fetchone() == (ids, [1, -2, 30])
