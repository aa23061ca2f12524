"""The browser test uses the shared fixtures (tests/support/fixtures.py)."""

from tests.support.fixtures import media  # noqa: F401
