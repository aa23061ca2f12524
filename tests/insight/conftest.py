"""The insight tests use the shared fixtures (tests/support/fixtures.py)."""

from tests.support.fixtures import acme, keyed_target, media, member, target, target_domain  # noqa: F401
from tests.support.tmpfs import media_tmpfs  # noqa: F401
