"""A pytest plugin for the Django 6 run of the task-backend tests (scripts/test_django6.sh: ``-p tests.support.django6``).

That run's test database is a copy of a template migrated by Django 6, which the template's name
tells apart (its digest has the Django version). A template build drops the other templates of its
prefix, so with the main suite's prefix each `make test` would drop and rebuild both in turn; under a
prefix of its own the Django 6 template lives beside the main one, and is rebuilt only when the
main suite's build (after a migration changed) drops it.
"""

from tests.support import test_database

test_database.TEMPLATE_PREFIX = "test_seoinsight_template_django6_"
