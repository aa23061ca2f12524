"""A query string no page can follow is a plain 400 before any view reads it: admin lists included."""

import pytest
from django.contrib.auth import get_user_model

from seoinsight.query_guard import MAX_QUERY_BYTES

# Each was a 500 from PostgreSQL ("cannot contain NUL characters") before the guard.
REFUSED = [
    ("/admin/jobs/job/?type=a%00b", "NUL character"),  # the project's own list filter
    ("/admin/imports/import/?status__exact=%00", "NUL character"),  # Django's own
    ("/admin/jobs/job/?a%00=1", "NUL character"),  # in a key
    ("/admin/jobs/job/?q=+%00+", "NUL character"),
    (f"/admin/jobs/job/?q={'x' * MAX_QUERY_BYTES}", "bytes long"),
]


@pytest.fixture
def root(client, db):
    client.force_login(get_user_model().objects.create_superuser("root", "root@agency.example", "pw"))
    return client


@pytest.mark.parametrize(("url", "says"), REFUSED, ids=[url[:50] for url, _ in REFUSED])
def test_a_query_no_page_can_follow_is_a_plain_400(root, url, says):
    response = root.get(url)

    assert response.status_code == 400
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert says in response.content.decode() and "Nothing was done." in response.content.decode()


def test_an_ordinary_query_passes(root):
    assert root.get("/admin/jobs/job/?type=noop&q=shoes%01").status_code == 200
