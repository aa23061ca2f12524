"""The core tests use the shared fixtures (tests/support/fixtures.py)."""

from tests.support.fixtures import media, token_server  # noqa: F401
